"""The owner's MCP servers' tools as worker tools: ``mcp__<server>__<tool>`` (:mod:`zerg.mcp_servers`).

Invariants:
- Built from the owner's cached listings only (no connection when a worker starts); another
  owner's servers are never read.
- Within the worker's tool budget: at most :data:`TOOLS_PER_WORKER` MCP tools and
  :data:`SCHEMA_BUDGET` bytes of their descriptions and schemas, servers by name, tools in the
  server's order; what is left out is said once in the worker's tool list (the first tool's
  description), never silently.
- A description is the server's text: it reaches the model fenced as untrusted data
  (:class:`zerg.llm.untrusted.Fence`), so a description that tries to instruct the model is just data.
  So is the free text of its input schema: the function's ``parameters`` the model gets is the schema
  without it (:func:`model_schema`: types, properties, required, bounds, short enum values only), and
  what the server said about each parameter (its description, title, examples, default, pattern, format)
  rides inside the description's fence, capped (:func:`parameter_notes`). Arguments are checked
  against the server's whole schema.
  The tool's result is a ``tool`` message, fenced like every tool output.
- A call passes the same seam as the built-in tools (:func:`zerg.loop.tool.invoke`): its arguments
  must be a JSON object that its schema accepts, the owner's approval policy decides (default ``ask``;
  ``allow`` when the server marks the tool read-only), then the call runs within the worker's deadline
  and ``ZERG_MCP_TIMEOUT_S``, is ended by the run's cancel, and its whole result (up to the artifact
  bound) goes to ``tool_calls/`` with the usual header; the model reads it capped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, cap, error

if TYPE_CHECKING:
    from zerg.runtime import Runtime

TOOLS_PER_WORKER = 40
SCHEMA_BUDGET = 48_000  # bytes of MCP tool descriptions and input schemas one worker's request carries


class McpArgs(BaseModel):
    """Any JSON object: the server's schema is checked in :func:`_run` (and by the server)."""

    model_config = ConfigDict(extra="allow")
    mcp_read_only: ClassVar[bool] = False


@dataclass(frozen=True)
class McpTool(Tool):
    server: str = ""
    listed: dict[str, Any] | None = None

    def schema(self) -> dict[str, Any]:
        listed = self.listed or {}
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": model_schema(listed.get("input_schema") or {})}}


# What of a server's input schema the model gets as the function's parameters: structure and bounds,
# never free text (descriptions, titles, examples, defaults, comments, patterns: they go fenced).
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
           "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
_FORMATS = {"date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4",
            "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
            "relative-json-pointer", "regex"}  # JSON Schema's own words: structure, kept
ENUM_VALUES_MAX = 50  # enum values kept per schema
ENUM_VALUE_MAX = 64  # characters of one (JSON-encoded) enum value kept
NAME_MAX = 64  # characters of a property or definition name
DEPTH_MAX = 12
NOTE_MAX = 300  # characters the server says about one parameter
NOTES_MAX = 3_000  # characters of all its parameter notes
_FREE_TEXT = ("title", "description", "examples", "default", "pattern", "format", "$comment")


def _short(value: Any) -> bool:
    return len(json.dumps(value, ensure_ascii=False)) <= ENUM_VALUE_MAX


def model_schema(schema: Any, depth: int = 0) -> dict[str, Any]:
    """``schema`` without its free text: ``type``, ``properties`` (names up to :data:`NAME_MAX`),
    ``required``, the numeric and size bounds, a standard ``format``, ``enum``/``const`` values that are short scalars (at most
    :data:`ENUM_VALUES_MAX` of them), sub-schemas and local ``$ref``\\s; everything else is left out."""
    if not isinstance(schema, dict) or depth > DEPTH_MAX:
        return {}
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = kind
    elif isinstance(kind, list) and kind and all(isinstance(k, str) and k in _TYPES for k in kind):
        out["type"] = list(dict.fromkeys(kind))
    if isinstance(props := schema.get("properties"), dict):
        out["properties"] = {str(k)[:NAME_MAX]: model_schema(v, depth + 1) for k, v in props.items()}
    if schema.get("format") in _FORMATS:
        out["format"] = schema["format"]
    if isinstance(required := schema.get("required"), list):
        out["required"] = [str(r)[:NAME_MAX] for r in required if isinstance(r, str)]
    for key in _BOUNDS:
        value = schema.get(key)
        if isinstance(value, bool) == (key == "uniqueItems") and isinstance(value, int | float):
            out[key] = value
    if isinstance(enum := schema.get("enum"), list):
        kept = [v for v in enum if (v is None or isinstance(v, str | int | float | bool)) and _short(v)]
        if kept:
            out["enum"] = kept[:ENUM_VALUES_MAX]
    if "const" in schema and (schema["const"] is None or isinstance(schema["const"], str | int | float | bool)) \
            and _short(schema["const"]):
        out["const"] = schema["const"]
    for key in _SUBSCHEMAS:
        value = schema.get(key)
        if isinstance(value, bool) and key == "additionalProperties":
            out[key] = value
        elif isinstance(value, dict):
            out[key] = model_schema(value, depth + 1)
    for key in _SCHEMA_LISTS:
        if isinstance(value := schema.get(key), list):
            out[key] = [model_schema(v, depth + 1) for v in value[:ENUM_VALUES_MAX]]
    for key in ("$defs", "definitions"):
        if isinstance(value := schema.get(key), dict):
            out[key] = {str(k)[:NAME_MAX]: model_schema(v, depth + 1) for k, v in value.items()}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and len(ref) <= 2 * NAME_MAX + 16:
        out["$ref"] = ref
    if depth == 0:
        out.setdefault("type", "object")
        out.setdefault("properties", {})
    return out


def parameter_notes(schema: Any) -> str:
    """What the server's schema says about each parameter in words (its description, title, examples,
    default, pattern, format, comment, enum values too long for the schema), one line per parameter
    (path.to.it), each cut to :data:`NOTE_MAX` characters, all to :data:`NOTES_MAX`: data to fence."""
    lines: list[str] = []

    def walk(node: Any, path: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > DEPTH_MAX:
            return
        said = [f"{key}: {node[key] if isinstance(node[key], str) else json.dumps(node[key], ensure_ascii=False)}"
                for key in _FREE_TEXT if key in node and not (key == "format" and node[key] in _FORMATS)]
        enum = node.get("enum")
        if isinstance(enum, list) and (len(enum) > ENUM_VALUES_MAX or not all(_short(v) for v in enum)):
            said.append(f"enum: {json.dumps(enum, ensure_ascii=False)}")
        if said and path:
            lines.append(f"- {path}: " + "; ".join(" ".join(s.split()) for s in said)[:NOTE_MAX])
        elif said:
            lines.append("- (the arguments): " + "; ".join(" ".join(s.split()) for s in said)[:NOTE_MAX])
        for name, sub in node["properties"].items() if isinstance(node.get("properties"), dict) else ():
            walk(sub, f"{path}.{name}" if path else str(name), depth + 1)
        for key in _SUBSCHEMAS:
            walk(node.get(key), f"{path}[{key}]" if path else f"[{key}]", depth + 1)
        for key in _SCHEMA_LISTS:
            for i, sub in enumerate(node[key] if isinstance(node.get(key), list) else []):
                walk(sub, f"{path}[{key} {i}]", depth + 1)
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                for name, sub in node[key].items():
                    walk(sub, f"#/{key}/{name}", depth + 1)

    walk(schema, "", 0)
    text = "\n".join(lines)
    return text if len(text) <= NOTES_MAX else text[:NOTES_MAX] + "\n[... parameter notes cut]"


def _args_model(read_only: bool) -> type[McpArgs]:
    return type("McpReadOnlyArgs" if read_only else "McpArgs", (McpArgs,), {"mcp_read_only": read_only})


_READ_ONLY, _OTHER = _args_model(True), _args_model(False)


def _describe(server: str, listed: dict[str, Any]) -> str:
    from zerg.llm.untrusted import Fence

    said = listed.get("description") or "(no description)"
    if notes := parameter_notes(listed.get("input_schema") or {}):
        said += "\n\nParameters:\n" + notes
    kind = "read-only" if listed.get("read_only") else "may change things: the owner's policy may ask first"
    return (f"Tool {listed['name']!r} of the owner's MCP server {server!r} ({kind}). Its description and what it "
            "says of its parameters, as the server wrote them:\n"
            + Fence([said]).wrap(said, f"description of an MCP tool of server {server}"))


def mcp_tool(server: str, listed: dict[str, Any], description: str | None = None) -> McpTool:
    """The worker tool of one cached tool ``listed`` of the owner's ``server``."""
    return McpTool(name=listed["exposed"], description=description or _describe(server, listed),
                   args=_READ_ONLY if listed.get("read_only") else _OTHER, run=_runner(server, listed), server=server,
                   listed=listed)


def _schema_errors(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    import jsonschema

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))[:3]
    except jsonschema.SchemaError as exc:
        return f"the server's input schema is invalid ({exc.message[:200]})"
    if not problems:
        return None
    return "; ".join(f"{'/'.join(map(str, p.path)) or 'arguments'}: {p.message[:200]}" for p in problems)


def _runner(server: str, listed: dict[str, Any]) -> Any:
    def run(args: McpArgs, ctx: ToolContext) -> ToolOutcome:
        from zerg import mcp_servers

        arguments = args.model_dump(mode="json")
        exposed = listed["exposed"]
        if problem := _schema_errors(listed.get("input_schema") or {}, arguments):
            return error(f"invalid arguments for {exposed}: {problem}")
        rt = ctx.runtime
        if rt is None or ctx.owner_id is None:
            return error(f"{exposed} is not available here")
        if ctx.cancelled():
            return error(f"not run: {ctx.cancel.reason}")
        timeout = ctx.bounded(ctx.settings.mcp_timeout_s)
        header = [f"{exposed}: tool {listed['name']!r} of MCP server {server!r}",
                  f"arguments: {json.dumps(arguments, ensure_ascii=False)[:2_000]}"]
        try:
            result = mcp_servers.call_tool(rt.pool.connection, ctx.settings, rt.sealer, ctx.owner_id, server, listed,
                                           arguments, timeout_s=max(timeout, 0.1), cancel=ctx.cancel)
        except mcp_servers.ServerNotFound:
            return error(f"{exposed}: the owner no longer has an MCP server {server!r}")
        except mcp_servers.McpError as exc:
            text = "\n".join([*header, "status: failed", f"error: {exc}"])
            return ToolOutcome(text=f"ERROR: {exc}", artifact=text, ok=False)
        body = _content_text(result.content, result.structured)
        head = [*header, f"status: {'error' if result.is_error else 'ok'}", f"duration_ms: {result.duration_ms}",
                "--- result ---"]
        full = "\n".join([*head, body])
        if len(full) > ARTIFACT_OUTPUT_CAP:
            full = full[:ARTIFACT_OUTPUT_CAP] + f"\n[... cut at {ARTIFACT_OUTPUT_CAP} characters]"
        model = "\n".join([*head, cap(body, ctx.settings.tool_output_cap)])
        return ToolOutcome(text=model, artifact=full, ok=not result.is_error)

    return run


def _content_text(content: list[dict[str, Any]], structured: Any) -> str:
    parts = []
    for item in content:
        if item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        elif item.get("type") in ("image", "audio"):
            parts.append(f"[{item['type']}: {item.get('mime_type') or item.get('mimeType')}, "
                         f"{len(item.get('data') or '') * 3 // 4} bytes, not shown]")
        else:
            parts.append(json.dumps(item, ensure_ascii=False))
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    return "\n".join(parts)


def owner_tools(rt: Runtime, owner_id: int, list_pending: bool = False) -> dict[str, Tool]:
    """The owner's MCP tools for one worker, within the budget (see the module's invariants);
    ``list_pending``: first list the servers never listed (:func:`zerg.mcp_servers.list_pending`)."""
    from zerg import mcp_servers

    if list_pending:
        mcp_servers.list_pending(rt.pool.connection, rt.settings, rt.sealer, owner_id)
    with rt.pool.connection() as conn:
        servers = mcp_servers.list_servers(conn, owner_id)
    tools: dict[str, Tool] = {}
    used, left = 0, 0
    for server in servers:
        for listed in server.tools or []:
            description = _describe(server.name, listed)
            size = len(description) + len(json.dumps(model_schema(listed.get("input_schema") or {})))
            if len(tools) >= TOOLS_PER_WORKER or used + size > SCHEMA_BUDGET:
                left += 1
                continue
            used += size
            tools[listed["exposed"]] = mcp_tool(server.name, listed, description)
    if left and tools:
        first = next(iter(tools))
        note = (f"\n(Zerg: {left} more MCP tool(s) of the owner's servers are left out of this worker: "
                f"at most {TOOLS_PER_WORKER} tools and {SCHEMA_BUDGET} bytes of their descriptions and schemas.)")
        tools[first] = McpTool(**{**tools[first].__dict__, "description": tools[first].description + note})
    return tools
