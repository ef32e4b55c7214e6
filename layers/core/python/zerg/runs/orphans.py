"""Orphan recovery on the local runtime: runs whose executing process is gone, runs far past
their deadline, and jobs that outlived their worker timeout.

:func:`reap_orphans` is one sweep; ``zerg serve`` runs it at start and then every
:data:`SWEEP_EVERY_S` (a housekeeping task, :mod:`zerg.local.housekeeping`), ``zerg run`` at start. On AWS the same closing (:func:`zerg.runs.store.fail_run`) is reached from the
state machine's execution-status events instead (:mod:`zerg.runs.execution_status`).

Invariants:
- A run is closed only when nobody can be executing it: its executor is gone
  (:func:`zerg.runs.executor.gone`), or it never got one within :data:`UNCLAIMED_GRACE_S`
  (its process died between inserting the row and starting the execution). Runs executed by
  Step Functions (no executor, an execution ARN) are never touched here.
- Such a run ends ``interrupted`` with one ``error`` event carrying the partial results; its
  unfinished jobs are ``cancelled`` with the reason. A run whose executor lives but that is
  :data:`zerg.runs.deadline.BACKSTOP_GRACE_S` past its deadline ends ``timeout`` the same way.
- A run whose execution this very process's engine ended FAILED, TIMED_OUT or ABORTED while the run
  stayed open is closed as the AWS execution-status rule closes one (``failed``, ``timeout``,
  ``interrupted``): the same ASL, the same backstop in both runtimes.
- A job ``running`` for longer than the worker timeout plus :data:`JOB_GRACE_S` becomes
  ``timeout``: no worker outlives its own deadline by that much.
- A cancelled run waits for its running workers to record their end before its final event
  (:func:`zerg.runs.store.finish_cancel`); when the process running them is gone, the sweep records
  them ``cancelled`` and writes that event, so no stream of the run waits forever.
- Closing is the conditional update of the store, so a sweep racing the run's own end (or another
  sweep) changes nothing twice. A run closed by the sweep gets what follows any close
  (:func:`zerg.runs.closing.after_close`: a background run's inbox item and alerts, a reply's answer). Every artifact written so far stays; a worker cut off gets a
  ``result.txt`` saying so and its final status in ``metadata.json``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zerg.artifacts.store import settle_abandoned
from zerg.runs import deadline as run_deadline
from zerg.runs import events, executor, jobs
from zerg.runs import store as runs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.artifacts import WorkerArtifactStore
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)

UNCLAIMED_GRACE_S = 300.0  # a local run with neither executor nor execution this long after its start
JOB_GRACE_S = 60.0  # past the worker timeout, for the worker's own final bookkeeping
SWEEP_EVERY_S = 60.0  # zerg serve's housekeeping task


@dataclass
class ReapReport:
    interrupted: list[int] = field(default_factory=list)  # run ids
    timed_out_runs: list[int] = field(default_factory=list)
    timed_out_jobs: list[int] = field(default_factory=list)
    closed_cancels: list[int] = field(default_factory=list)  # cancelled runs whose workers' process died
    errors: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.interrupted or self.timed_out_runs or self.timed_out_jobs or self.closed_cancels
                    or self.errors)

    def lines(self) -> list[str]:
        out = []
        if self.interrupted:
            out.append(f"recovered {len(self.interrupted)} orphaned run(s) as interrupted: "
                       + ", ".join(map(str, self.interrupted)))
        if self.timed_out_runs:
            out.append("closed run(s) far past their deadline as timeout: " + ", ".join(map(str, self.timed_out_runs)))
        if self.timed_out_jobs:
            out.append("marked job(s) running past the worker timeout as timeout: "
                       + ", ".join(map(str, self.timed_out_jobs)))
        if self.closed_cancels:
            out.append("ended cancelled run(s) whose workers' process had stopped: "
                       + ", ".join(map(str, self.closed_cancels)))
        out.extend(f"orphan sweep: {e}" for e in self.errors)
        return out


def _verdict(rt: "Runtime", run: dict[str, Any], me: str) -> tuple[str, str] | None:
    """(status, message) to close ``run`` with, or None to leave it."""
    now = run["db_now"]
    if run["executor"] == me and (ended := _own_execution_ended(rt, run["id"])):
        return ended
    who = executor.parse(run["executor"])
    if who is not None and executor.gone(who, run["heartbeat_at"], now):
        return "interrupted", (f"interrupted: the process executing the run ({who.describe()}) stopped "
                               "before it finished; partial results kept")
    if run["executor"] is None and run["execution_arn"] is None:
        since = (now - (run["started_at"] or run["created_at"])).total_seconds()
        if since > UNCLAIMED_GRACE_S:
            return "interrupted", "interrupted: the run never started executing (its process stopped first)"
        return None
    if who is not None and run["started_at"] is not None:  # a live local executor, stuck
        late = run_deadline.seconds_left(run_deadline.deadline(run_deadline.clock_start(run, now), rt.settings), now)
        if -late > run_deadline.BACKSTOP_GRACE_S:
            return "timeout", f"run timed out: {run_deadline.describe(rt.settings)} passed with no answer"
    return None


def _own_execution_ended(rt: "Runtime", run_id: int) -> tuple[str, str] | None:
    """This process's engine ended the run's execution FAILED, TIMED_OUT or ABORTED without the run
    closing (its FailRun step failed too, or the backstop timeout hit): close it as the AWS
    execution-status rule does."""
    from zerg.runs.execution_status import closing

    starter = rt.__dict__.get("starter")  # the runtime's starter if it has one; never built here
    desc = starter.ended_execution(run_id) if hasattr(starter, "ended_execution") else None
    return None if desc is None else closing(desc["status"], desc.get("error"), desc.get("cause"))


def close_run(pool: "ConnectionPool", store: "WorkerArtifactStore", run: dict[str, Any], status: str,
              message: str) -> bool:
    """Close an unfinished run nobody will finish (``interrupted``, or ``timeout`` far past its
    deadline) as the store closes any run; for ``interrupted``, also close the artifacts of the
    workers it was running. False when the run had ended meanwhile (nothing written)."""
    with pool.connection() as conn:
        running = [j for j in jobs.run_jobs(conn, run["owner_id"], run["id"]) if j["status"] == "running"]
        payload = runs.fail_run(conn, run, status, message, cancel_running=True)
    if payload is None:
        return False
    if status == "interrupted":  # nobody runs these workers any more
        for job in running:
            if job["worker_id"]:
                settle_abandoned(store, job["worker_id"], "cancelled", message)
    return True


def _finish_abandoned_cancels(rt: "Runtime", report: ReapReport) -> None:
    """A cancelled run waits for its running workers to record their end before its final event;
    when the process running them is gone, they never will: record them cancelled and end the run's
    events (its SSE streams end too)."""
    with rt.pool.connection() as conn:
        waiting = runs.cancelled_awaiting_workers(conn)
    for run in waiting:
        who = executor.parse(run["executor"])
        if who is None or not executor.gone(who, run["heartbeat_at"], run["db_now"]):
            continue  # a live process (or Step Functions) still runs its workers: they report themselves
        with rt.pool.connection() as conn:
            if runs.finish_abandoned_cancel(conn, run["owner_id"], run["id"]):
                report.closed_cancels.append(run["id"])


def _time_out_jobs(rt: "Runtime", report: ReapReport) -> None:
    limit = rt.settings.worker_timeout_s + JOB_GRACE_S
    message = f"worker timed out: still running {limit:g}s after it started (worker timeout plus a grace)"
    with rt.pool.connection() as conn:
        stale = jobs.stale_running_jobs(conn, limit)
    for job in stale:
        with rt.pool.connection() as conn:
            if not jobs.time_out_job(conn, job["id"], message):
                continue
            run = runs.get_run(conn, job["owner_id"], job["run_id"]) if job["run_id"] else None
            if run is not None:  # emit drops it after the run's terminal event
                events.emit(conn, run["id"], run["owner_id"], "worker_complete",
                            {"job_id": job["id"], "worker_id": job["worker_id"], "status": "timeout", "duration_ms": None})
                runs.finish_cancel(conn, run["owner_id"], run["id"])  # a cancelled run waiting for it ends
        if job["worker_id"]:
            settle_abandoned(rt.store, job["worker_id"], "timeout", message)
        report.timed_out_jobs.append(job["id"])


def reap_orphans(rt: "Runtime") -> ReapReport:
    """One sweep over every owner's unfinished runs and running jobs (see the module's invariants).

    Never raises for one bad row: what could not be closed is in ``report.errors`` and logged."""
    report = ReapReport()
    me = executor.this_process().token
    with rt.pool.connection() as conn:
        candidates = runs.unfinished_runs_of_every_owner(conn)
    for run in candidates:
        try:
            verdict = _verdict(rt, run, me)
            if verdict and close_run(rt.pool, rt.store, run, *verdict):
                (report.interrupted if verdict[0] == "interrupted" else report.timed_out_runs).append(run["id"])
                if verdict[0] == "timeout" and run["executor"] == me:
                    _stop_local_execution(rt, run)
                _closed(rt, run)
        except Exception as exc:
            log.exception("orphan sweep: run %s", run["id"])
            report.errors.append(f"run {run['id']}: {type(exc).__name__}: {exc}")
    try:
        _finish_abandoned_cancels(rt, report)
    except Exception as exc:
        log.exception("orphan sweep: cancelled runs")
        report.errors.append(f"cancelled runs: {type(exc).__name__}: {exc}")
    try:
        _time_out_jobs(rt, report)
    except Exception as exc:
        log.exception("orphan sweep: stale jobs")
        report.errors.append(f"stale jobs: {type(exc).__name__}: {exc}")
    for line in report.lines():  # INFO: the hosts print the report themselves
        log.info(line)
    return report


def _closed(rt: "Runtime", run: dict[str, Any]) -> None:
    """A run closed here gets what follows any close: a scheduled run its inbox item and alerts, a
    reply's run its answer (never raises)."""
    from zerg.runs.closing import after_close

    after_close(rt, run)


def _stop_local_execution(rt: "Runtime", run: dict[str, Any]) -> None:
    """This process executes the stuck run: stop its execution too (its steps would no-op anyway)."""
    arn = getattr(rt.starter, "execution_of", lambda run_id: None)(run["id"])
    if arn:
        try:
            rt.starter.stop(arn, "run timed out")
        except Exception:
            log.debug("could not stop the execution of run %s", run["id"], exc_info=True)


def sweep_counts(rt: "Runtime") -> dict[str, int]:
    """:func:`reap_orphans` as a housekeeping task: what it closed, as counts for the log line."""
    report = reap_orphans(rt)
    return {"interrupted": len(report.interrupted), "timed_out_runs": len(report.timed_out_runs),
            "timed_out_jobs": len(report.timed_out_jobs), "closed_cancels": len(report.closed_cancels),
            "errors": len(report.errors)}
