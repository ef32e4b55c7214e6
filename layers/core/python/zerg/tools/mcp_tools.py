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
                             "parameters": listed.get("input_schema") or {"type": "object", "properties": {}}}}


def _args_model(read_only: bool) -> type[McpArgs]:
    return type("McpReadOnlyArgs" if read_only else "McpArgs", (McpArgs,), {"mcp_read_only": read_only})


_READ_ONLY, _OTHER = _args_model(True), _args_model(False)


def _describe(server: str, listed: dict[str, Any]) -> str:
    from zerg.llm.untrusted import Fence

    said = listed.get("description") or "(no description)"
    kind = "read-only" if listed.get("read_only") else "may change things: the owner's policy may ask first"
    return (f"Tool {listed['name']!r} of the owner's MCP server {server!r} ({kind}). Its description, as the "
            "server wrote it:\n" + Fence([said]).wrap(said, f"description of an MCP tool of server {server}"))


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


def owner_tools(rt: Runtime, owner_id: int) -> dict[str, Tool]:
    """The owner's MCP tools for one worker, within the budget (see the module's invariants)."""
    from zerg import mcp_servers

    with rt.pool.connection() as conn:
        servers = mcp_servers.list_servers(conn, owner_id)
    tools: dict[str, Tool] = {}
    used, left = 0, 0
    for server in servers:
        for listed in server.tools or []:
            description = _describe(server.name, listed)
            size = len(description) + len(json.dumps(listed.get("input_schema") or {}))
            if len(tools) >= TOOLS_PER_WORKER or used + size > SCHEMA_BUDGET:
                left += 1
                continue
            used += size
            tools[listed["exposed"]] = McpTool(
                name=listed["exposed"], description=description, args=_READ_ONLY if listed.get("read_only") else _OTHER,
                run=_runner(server.name, listed), server=server.name, listed=listed)
    if left and tools:
        first = next(iter(tools))
        note = (f"\n(Zerg: {left} more MCP tool(s) of the owner's servers are left out of this worker: "
                f"at most {TOOLS_PER_WORKER} tools and {SCHEMA_BUDGET} bytes of their descriptions and schemas.)")
        tools[first] = McpTool(**{**tools[first].__dict__, "description": tools[first].description + note})
    return tools
