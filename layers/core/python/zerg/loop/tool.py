"""The tool seam shared by workers and the supervisor.

Invariants:
- A tool validates its arguments with pydantic and returns text for the model; it never raises
  into the agent loop. A bad argument, an unknown tool, a failed command: each becomes an error
  string the model can read and correct.
- The one exception is :class:`CriticalToolError` (e.g. SSH authentication failed): the worker
  stops at once and fails with that reason, instead of letting the model flail.
- The model sees capped output; the artifact keeps the full output (up to a storage bound).
  Shell tools stream it to the artifact as it arrives (``ToolContext.open_output``, see
  :mod:`zerg.tools.output`), so no output is ever held whole in memory.
- A call passes the context's :attr:`ToolContext.gate` (the owner's approval policy,
  :mod:`zerg.tools.approval_gate`) after its arguments validate and before the tool runs: a gate
  that answers with an outcome (denied, approval needed) is that call's result and the tool never
  runs; a gate that fails is a refusal too (fail closed), never a pass.
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
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from zerg.approvals.policy import ApprovalNeeded
from zerg.config import Settings
from zerg.validation import problems

if TYPE_CHECKING:
    from zerg.runtime import Runtime

# Bytes of raw output a tool keeps for the artifact (the model gets ZERG_TOOL_OUTPUT_CAP).
ARTIFACT_OUTPUT_CAP = 50_000_000


class OutputStream(Protocol):
    """Where a tool streams its raw output (:class:`zerg.artifacts.stream.ArtifactStream`)."""

    path: str

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


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
    # Opens the artifact file a tool streams its raw output into (a worker's next tool_calls/NNN_<tool>.txt);
    # None: the tool keeps its raw output in memory and returns it as ToolOutcome.artifact.
    open_output: Callable[[str], OutputStream] | None = None
    cancel: CancelSignal | None = None  # set when the run is cancelled: end the command now
    agent: str | None = None  # whose model calls: "supervisor" or "worker" (memory writes record it)
    # Before each validated call: None lets it run; an outcome is its result instead (denied, approval needed).
    gate: Callable[[str, BaseModel], ToolOutcome | None] | None = None

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
    artifact_path: str | None = None  # already streamed to this tool_calls/ file: nothing left to save
    exit_code: int | None = None
    exit_signal: str | None = None  # a shell command killed by a signal: its name ("TERM"), exit_code None
    critical: str | None = None  # set: the worker must stop with this reason
    approval: ApprovalNeeded | None = None  # set: the owner's policy asks before this call (it did not run)

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
        return error(f"invalid arguments for {tool.name}: {problems(exc.errors(), 'arguments')}")


def gate_failed(name: str, exc: Exception) -> ToolOutcome:
    """The result of a call whose gate failed: it did not run (fail closed)."""
    return error(f"{name} did not run: the owner's approval policy could not be checked ({type(exc).__name__}: {exc})")


def invoke(tools: dict[str, Tool], name: str, arguments: str, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call from the model: validate, execute, and turn every failure into text."""
    tool = tools.get(name)
    if tool is None:
        return error(f"unknown tool {name!r}; available: {', '.join(sorted(tools))}")
    args = parse_args(tool, arguments)
    if isinstance(args, ToolOutcome):
        return args
    if ctx.gate is not None:
        try:
            held = ctx.gate(name, args)
        except Exception as exc:  # fail closed: a policy that cannot be checked lets nothing through
            return gate_failed(name, exc)
        if held is not None:
            return held
    try:
        return tool.run(args, ctx)
    except CriticalToolError as exc:
        return ToolOutcome(text=f"CRITICAL: {exc}", ok=False, critical=str(exc))
    except Exception as exc:  # a tool bug must not kill the loop: the model is told
        return error(f"{name} failed: {type(exc).__name__}: {exc}")


class Capped:
    """The first ``limit`` bytes of a stream, its last ``limit // 2`` and its length: enough to
    render :func:`cap` of the whole stream without holding it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.total = limit, 0
        self.head, self.tail = bytearray(), bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.limit:
            self.head += data[: self.limit - len(self.head)]
        keep = self.limit // 2
        self.tail += data[-keep:]
        if len(self.tail) > keep:
            del self.tail[:-keep]

    def text(self) -> str:
        if self.total <= self.limit:
            return self.head.decode("utf-8", "replace")
        head = self.head[: self.limit // 2].decode("utf-8", "ignore")
        tail = self.tail.decode("utf-8", "ignore")
        omitted = self.total - len(head.encode()) - len(tail.encode())
        return f"{head}\n[... truncated {omitted} bytes of {self.total} ...]\n{tail}"


def cap(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` bytes, with an explicit marker."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    capped = Capped(limit)
    capped.add(data)
    return capped.text()
