"""The tool seam shared by workers and the supervisor.

Invariants:
- A tool validates its arguments with pydantic and returns text for the model; it never raises
  into the agent loop. A bad argument, an unknown tool, a failed command: each becomes an error
  string the model can read and correct.
- The one exception is :class:`CriticalToolError` (e.g. SSH authentication failed): the worker
  stops at once and fails with that reason, instead of letting the model flail.
- The model sees capped output; the artifact keeps the full output (up to a storage bound).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from zerg.config import Settings

if TYPE_CHECKING:
    from zerg.runtime import Runtime

# Bytes of raw output a tool keeps for the artifact (the model gets ZERG_TOOL_OUTPUT_CAP).
ARTIFACT_OUTPUT_CAP = 50_000_000


class CriticalToolError(RuntimeError):
    """The worker cannot go on (connection/auth failure): fail fast with this reason."""


@dataclass
class ToolContext:
    settings: Settings
    deadline: float | None = None  # time.monotonic() value the tool must finish by
    owner_id: int | None = None
    run_id: int | None = None
    runtime: "Runtime | None" = None  # for tools that read the database or artifacts

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def bounded(self, timeout_s: float) -> float:
        """``timeout_s`` cut to what is left of the deadline."""
        left = self.remaining()
        return timeout_s if left is None else min(timeout_s, left)


@dataclass(frozen=True)
class ToolOutcome:
    text: str  # what the model reads (capped)
    ok: bool = True  # False: non-zero exit, refused, error
    artifact: str | None = None  # what tool_calls/NNN_tool.txt keeps (None: same as text)
    exit_code: int | None = None
    critical: str | None = None  # set: the worker must stop with this reason

    @property
    def saved(self) -> str:
        return self.text if self.artifact is None else self.artifact


def error(message: str) -> ToolOutcome:
    return ToolOutcome(text=f"ERROR: {message}", ok=False)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[Any, ToolContext], ToolOutcome]

    def schema(self) -> dict[str, Any]:
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


def parse_args(tool: Tool, arguments: str) -> BaseModel | ToolOutcome:
    """The validated arguments of a model's tool call, or the error to show the model."""
    try:
        raw = json.loads(arguments or "{}")
    except ValueError as exc:
        return error(f"arguments for {tool.name} are not valid JSON: {exc}")
    if not isinstance(raw, dict):
        return error(f"arguments for {tool.name} must be a JSON object")
    try:
        return tool.args.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return error(f"invalid arguments for {tool.name}: {problems}")


def invoke(tools: dict[str, Tool], name: str, arguments: str, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call from the model: validate, execute, and turn every failure into text."""
    tool = tools.get(name)
    if tool is None:
        return error(f"unknown tool {name!r}; available: {', '.join(sorted(tools))}")
    args = parse_args(tool, arguments)
    if isinstance(args, ToolOutcome):
        return args
    try:
        return tool.run(args, ctx)
    except CriticalToolError as exc:
        return ToolOutcome(text=f"CRITICAL: {exc}", ok=False, critical=str(exc))
    except Exception as exc:  # a tool bug must not kill the loop: the model is told
        return error(f"{name} failed: {type(exc).__name__}: {exc}")


def cap(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` bytes, with an explicit marker."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    head = data[: limit // 2].decode("utf-8", "ignore")
    tail = data[len(data) - limit // 2 :].decode("utf-8", "ignore")
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}\n[... truncated {omitted} bytes of {len(data)} ...]\n{tail}"


def shell_report(
    header: str, exit_code: int | None, stdout: str, stderr: str, duration_ms: int, note: str, limit: int
) -> tuple[str, str]:
    """(model text, artifact text) for a shell-like command: same shape, different caps."""

    def render(out: str, err: str) -> str:
        lines = [header, f"exit_code: {exit_code if exit_code is not None else 'none'}",
                 f"duration_ms: {duration_ms}"]
        if note:
            lines.append(f"note: {note}")
        lines += ["--- stdout ---", out.rstrip("\n"), "--- stderr ---", err.rstrip("\n")]
        return "\n".join(lines) + "\n"

    return render(cap(stdout, limit), cap(stderr, limit)), render(stdout, stderr)
