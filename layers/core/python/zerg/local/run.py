"""``zerg run "task"``: one task end to end on the embedded runtime, with live progress.

Starts the run on the owner's thread (the local owner by default), executes the real state
machine with the runtime's local engine, prints progress from ``run_events`` as it is written, then
the answer, the run id and where the artifacts are.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from zerg import tracing
from zerg.agents.settings import check_models
from zerg.config import ConfigError
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.runs.progress import describe_event
from zerg.runtime import Runtime
from zerg.statuses import RUN_FINAL

Printer = Callable[[str], None]


@dataclass
class RunReport:
    run_id: int
    status: str
    result: str | None
    error: str | None
    artifact_dirs: list[str]
    interrupted: bool = False  # Ctrl-C: the run was cancelled on the way out


CTRL_C_REASON = "cancelled by the user (Ctrl-C on zerg run)"
CANCEL_WAIT_S = 5.0  # as long as the API's cancel waits for the workers to end their commands


def run_task(rt: Runtime, task: str, *, owner_id: int, out: Printer = print, poll_s: float = 0.1) -> RunReport:
    """Run ``task`` for ``owner_id`` on the runtime's local engine, printing progress as it happens.

    Ctrl-C (KeyboardInterrupt) cancels the run (its jobs too, with the reason) and stops its
    execution before this returns; the report says so."""
    from zerg.local.engine import LocalStarter

    starter = rt.starter
    if not isinstance(starter, LocalStarter):  # refused before a run row exists
        raise ConfigError("zerg run executes on the local engine: unset ZERG_STATE_MACHINE_ARN")
    with rt.pool.connection() as conn:
        check_models(conn, rt.settings, owner_id)  # a provider it cannot reach: one line, before a run row
        started = runs.start_run(conn, owner_id, task, trigger="cli")
        run = runs.get_run(conn, owner_id, started.run_id) if tracing.active() else None
        traceparent = tracing.traceparent_for(run) if run is not None else None
    if rt.settings.offline:
        out("  (no OPENAI_API_KEY / OPENAI_BASE_URL: using the offline planner and its playbook)")
    interrupted = False
    try:
        engine = starter.engine()
        arn = starter.start(started.run_id, owner_id, started.thread_id, traceparent)
        follow_events(rt, owner_id, started.run_id, lambda: engine.describe(arn)["status"] != "RUNNING", out, poll_s)
    except KeyboardInterrupt:
        interrupted = True
        cancel(rt, starter, owner_id, started.run_id)
    return report_of(rt, owner_id, started.run_id, interrupted)


def report_of(rt: Runtime, owner_id: int, run_id: int, interrupted: bool = False) -> RunReport:
    """The run as it ended: status, answer or error, and where its workers' artifacts are."""
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
        workers = [j for j in jobs.run_jobs(conn, owner_id, run_id) if j["worker_id"]]
    dirs = [rt.store.location(w["worker_id"]) for w in workers]
    return RunReport(run["id"], run["status"], run["result"], run["error"], dirs, interrupted)


def follow_events(rt: Runtime, owner_id: int, run_id: int, finished: Callable[[], bool], out: Printer = print,
                  poll_s: float = 0.1) -> None:
    """Print the run's progress as its events are written, until ``finished()`` and none is left."""
    last_id = 0
    done = False
    while True:
        with rt.pool.connection() as conn:
            batch = events.list_events(conn, owner_id, run_id, after_id=last_id)
        for e in batch:
            last_id = e["id"]
            line = describe_event(e["event_type"], e["payload"])
            if line:
                out(line)
        if done and not batch:
            break
        done = finished()
        if not done:
            time.sleep(poll_s)


def cancel(rt: Runtime, starter, owner_id: int, run_id: int) -> None:
    """The user pressed Ctrl-C: the run ends ``cancelled``, its execution stops, its workers end their
    commands (waited for up to ``CANCEL_WAIT_S``) and the final event is written. A worker that has
    not stopped by then is recorded cancelled here: this process, which runs it, is about to exit."""
    from zerg.workers.cancellation import stop_run_workers
    from zerg.workers.runner import end_approval_waits

    with rt.pool.connection() as conn:
        runs.cancel_run(conn, owner_id, run_id, reason=CTRL_C_REASON)
    arn = starter.execution_of(run_id)
    if arn:
        try:
            starter.stop(arn, CTRL_C_REASON)
        except Exception:  # the run is already cancelled; its remaining steps no-op
            pass
    end_approval_waits(rt, owner_id, run_id)
    if stop_run_workers(rt, owner_id, run_id, wait_s=CANCEL_WAIT_S):
        with rt.pool.connection() as conn:
            runs.finish_abandoned_cancel(conn, owner_id, run_id)


def print_report(rt: Runtime, report: RunReport, owner_id: int, out: Printer = print) -> None:
    with rt.pool.connection() as conn:
        run = runs.run_totals(conn, owner_id, report.run_id)
    out("")
    if report.interrupted and report.status == "cancelled":
        out(f"Run {report.run_id} {report.error}.")
    elif report.status == "success":
        out(report.result)
    elif report.status == "timeout" and report.result:  # answered with what existed at the deadline
        out(report.result)
    else:
        out(f"Run {report.status}: {report.error}")
    out("")
    cost = "unknown" if run["cost_usd"] is None else f"${float(run['cost_usd']):.4f}"
    took = "-" if run["duration_ms"] is None else f"{run['duration_ms'] / 1000:.1f}s"
    out(f"run {report.run_id}: {report.status} in {took}, tokens {run['tokens_in']} in / {run['tokens_out']} out, cost {cost}")
    if report.artifact_dirs:
        out("artifacts:")
        for d in report.artifact_dirs:
            out(f"  {d}")


def prepare_local_run(rt: Runtime) -> None:
    """What ``zerg run`` does before a run executes in this process: say how isolated workers are,
    and warm the engine's imports (nothing when runs execute on Step Functions)."""
    from zerg.local.engine import LocalStarter, prewarm
    from zerg.sandbox import announce

    if isinstance(rt.starter, LocalStarter):
        announce(rt.settings)
        prewarm(cache_dir=rt.settings.data_dir / "cache")


def wait_for_run(rt: Runtime, owner_id: int, run_id: int, out: Printer = print) -> int:
    """A run started by another path (a schedule's fire, a reply): follow its progress until it
    ends, print its answer as ``zerg run`` does, then its inbox item's severity and headline when it
    has one. Returns the exit status: 0 success, 1 otherwise, 130 Ctrl-C (the run is cancelled on
    the way out when it executes in this process)."""
    from zerg.alerts import inbox
    from zerg.local.engine import LocalStarter

    local = isinstance(rt.starter, LocalStarter)

    def ended() -> bool:  # the run closed, and this process's execution of it (if any) stopped
        with rt.pool.connection() as conn:
            if runs.run_status(conn, owner_id, run_id) not in RUN_FINAL:
                return False
        return not local or rt.starter.execution_of(run_id) is None or rt.starter.ended_execution(run_id) is not None

    interrupted = False
    try:
        follow_events(rt, owner_id, run_id, ended, out)
    except KeyboardInterrupt:
        if not local:
            raise
        interrupted = True
        cancel(rt, rt.starter, owner_id, run_id)
    report = report_of(rt, owner_id, run_id, interrupted)
    print_report(rt, report, owner_id, out)
    if local and not interrupted:  # the steps after the answer (memory, the inbox item) run on here
        rt.starter.finish_background(lambda line: print(line, file=sys.stderr, flush=True))
    with rt.pool.connection() as conn:
        item = inbox.get(conn, owner_id, run_id)
    if item is not None:
        out(f"inbox: {item['severity']}: {item['headline']}")
    if interrupted:
        return 130
    return 0 if report.status == "success" else 1
