"""Tool sets: what a worker may call, and (later) what the supervisor may call."""

from __future__ import annotations

from zerg.tools.base import CancelSignal, CriticalToolError, Tool, ToolContext, ToolOutcome, invoke


def worker_tools() -> dict[str, Tool]:
    """The worker's shell-first toolset: the terminal is the primitive, not a curated list. Memory:
    read tools and ``memory_write`` for new files only (a worker reads untrusted output directly)."""
    from zerg.tools import clock, connectors, container, http, memory, ssh

    return {t.name: t for t in (ssh.TOOL, container.TOOL, http.TOOL, clock.TOOL, *memory.WORKER_TOOLS,
                                *connectors.WORKER_TOOLS)}


__all__ = ["CancelSignal", "CriticalToolError", "Tool", "ToolContext", "ToolOutcome", "invoke", "worker_tools"]
