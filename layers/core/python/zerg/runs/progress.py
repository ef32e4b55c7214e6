"""Progress lines for a run's events, shared by ``zerg run``, the ``zerg ask`` client and the MCP server's ``ask``."""

from __future__ import annotations

from typing import Any


def describe_event(kind: str, p: dict[str, Any]) -> str | None:
    """One progress line per event (None: not worth a line)."""
    if kind == "supervisor_started":
        return f"> run {p['run_id']} started: {p['task']}"
    if kind == "supervisor_thinking":
        return f"  ... {p['message']}"
    if kind == "worker_spawned":
        return f"  + worker #{p['job_id']} spawned ({p['model']}): {p['task']}"
    if kind == "worker_started":
        return f"  | worker #{p['job_id']} started as {p['worker_id']}"
    if kind == "worker_complete":
        took = "" if p.get("duration_ms") is None else f" in {p['duration_ms'] / 1000:.1f}s"
        return f"  {'✓' if p['status'] == 'success' else '✗'} worker #{p['job_id']} {p['status']}{took}"
    if kind == "worker_summary_ready":
        return f"    #{p['job_id']}: {p['summary']}" if p.get("summary") else None
    if kind == "memory_changed":
        what = p.get("path") or f"fact #{p.get('fact_id')}"
        return f"  * memory {p.get('action')}: {what} (by the {p.get('writer')})"
    if kind == "error":
        status, message = p.get("status") or "failed", p["message"]
        return f"! {message}" if message.startswith(("run ", status)) else f"! run {status}: {message}"
    return None
