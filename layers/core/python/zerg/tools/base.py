"""The tool seam shared by workers and the supervisor.

Invariants:
- A tool validates its arguments with pydantic and returns text for the model; it never raises
  into the agent loop. A bad argument, an unknown tool, a failed command: each becomes an error
  string the model can read and correct.
- The one exception is :class:`CriticalToolError` (e.g. SSH authentication failed): the worker
  stops at once and fails with that reason, instead of letting the model flail.
- The model sees capped output; the artifact keeps the full output (up to a storage bound).
- A tool that runs a command honours :attr:`ToolContext.cancel`: it does not start once the signal
  is set, and when it fires mid-command it ends the command (sandbox killed, SSH channel signalled
  and closed) before it returns.
"""

from __future__ import annotations

import json
import os
import threading
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


class CancelSignal:
    """Set once, when the work must stop (the run was cancelled); never cleared.

    Waitable as an event (:meth:`wait`) and, for ``poll()``, as a file descriptor that becomes
    readable when the signal is set: a sandbox waits on its process and on this at once.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None
        self._closed = False
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            if self._pipe is not None and not self._closed:
                os.write(self._pipe[1], b"x")

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def fileno(self) -> int:
        """A descriptor that is readable once the signal is set (created on first use)."""
        with self._lock:
            if self._closed:
                raise ValueError("the cancel signal is closed")
            if self._pipe is None:
                self._pipe = os.pipe()
                if self._event.is_set():
                    os.write(self._pipe[1], b"x")
            return self._pipe[0]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pipe, self._pipe = self._pipe, None
        for fd in pipe or ():
            os.close(fd)


@dataclass
class ToolContext:
    settings: Settings
    deadline: float | None = None  # time.monotonic() value the tool must finish by
    owner_id: int | None = None
    run_id: int | None = None
    runtime: "Runtime | None" = None  # for tools that read the database or artifacts
    cancel: CancelSignal | None = None  # set when the run is cancelled: end the command now

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

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
