"""``zerg run "task"``: one task end to end on the embedded runtime, with live progress.

Migrates the database if needed, starts the run on the local owner's thread, executes the real
state machine with the local engine, prints progress from ``run_events`` as it is written, then
the answer, the run id and where the artifacts are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zerg import events, runs
from zerg.runtime import Runtime

LOCAL_OWNER = "local"
Printer = Callable[[str], None]


@dataclass
class RunReport:
    run_id: int
    status: str
    result: str | None
    error: str | None
    artifact_dirs: list[str]


def local_owner(conn: Any) -> int:
    """The owner that local commands act as (created on first use)."""
    row = conn.execute("SELECT id FROM owners WHERE name = %s ORDER BY id LIMIT 1", (LOCAL_OWNER,)).fetchone()
    if row:
        return row["id"]
    from zerg.owners import create_owner

    return create_owner(conn, LOCAL_OWNER).owner_id


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
    if kind == "error":
        return f"! run failed: {p['message']}"
    return None


def run_task(rt: Runtime, task: str, *, out: Printer = print, poll_s: float = 0.1) -> RunReport:
    from zerg.local_engine import LocalEngine
    from zerg.migrate import migrate

    with rt.pool.connection() as conn:
        migrate(conn)
        owner_id = local_owner(conn)
        started = runs.start_run(conn, owner_id, task, trigger="cli")
    if rt.settings.offline:
        out("  (no OPENAI_API_KEY / OPENAI_BASE_URL: using the offline planner and its playbook)")
    last_id = 0
    with LocalEngine() as engine:
        arn = engine.start_execution(started.run_id, owner_id, started.thread_id, rt.settings.map_concurrency)
        finished = False
        while True:
            with rt.pool.connection() as conn:
                batch = events.list_events(conn, owner_id, started.run_id, after_id=last_id)
            for e in batch:
                last_id = e["id"]
                line = describe_event(e["event_type"], e["payload"])
                if line:
                    out(line)
            if finished and not batch:
                break
            finished = engine.describe(arn)["status"] != "RUNNING"
            if not finished:
                time.sleep(poll_s)
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, started.run_id)
        workers = conn.execute(
            "SELECT worker_id FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND worker_id IS NOT NULL ORDER BY id",
            (owner_id, started.run_id),
        ).fetchall()
    dirs = [rt.store.location(w["worker_id"]) for w in workers]
    return RunReport(run["id"], run["status"], run["result"], run["error"], dirs)


def print_report(rt: Runtime, report: RunReport, out: Printer = print) -> None:
    with rt.pool.connection() as conn:
        run = conn.execute("SELECT duration_ms, tokens_in, tokens_out, cost_usd FROM runs WHERE id = %s", (report.run_id,)).fetchone()
    out("")
    out(report.result if report.status == "success" else f"Run {report.status}: {report.error}")
    out("")
    cost = "unknown" if run["cost_usd"] is None else f"${float(run['cost_usd']):.4f}"
    took = "-" if run["duration_ms"] is None else f"{run['duration_ms'] / 1000:.1f}s"
    out(f"run {report.run_id}: {report.status} in {took}, tokens {run['tokens_in']} in / {run['tokens_out']} out, cost {cost}")
    if report.artifact_dirs:
        out("artifacts:")
        for d in report.artifact_dirs:
            out(f"  {d}")
