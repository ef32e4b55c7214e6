"""Reconciliation: the ``worker_jobs`` index brought back in step with ``metadata.json``, without
anyone running ``zerg workers reindex``.

A worker writes its outcome to ``metadata.json`` first and then to the index; when the database
is unreachable at that moment (and stays so past the worker's retries) the row stays ``running``
although the worker finished. This module repairs such rows.

Invariants:
- ``metadata.json`` wins for a finished worker: an unfinished row whose worker's metadata says
  ``success``/``failed``/``timeout`` gets that outcome (:func:`jobs.mark_finished`), and the run's
  stream gets the ``worker_complete`` it missed while the run is still going.
- Only unfinished rows with a worker id are read (one ``metadata.json`` each), so it is cheap
  enough for every run's resume and finalize and for the housekeeping loop.
- A metadata that still says ``running`` is left alone here: the worker may be running (deciding
  it is not is orphan recovery's job, or :func:`reconcile_run` at finalize, when no worker of the
  run can still be running). An unreadable ``metadata.json`` is logged and skipped, never taken
  as a failure.
- :func:`reconcile_index` works across owners (system maintenance, not a read path); each row is
  repaired from its own worker's metadata and events go to that row's own run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.runtime import Runtime
from zerg.statuses import JOB_UNFINISHED, RUN_FINAL, WORKER_OUTCOMES
from zerg.timestamps import parse_iso, utcnow

log = logging.getLogger("zerg.workers.reconcile")


@dataclass
class ReconcileReport:
    checked: int = 0
    repaired: list[int] = field(default_factory=list)  # job ids whose row took its metadata's outcome
    closed: list[int] = field(default_factory=list)  # job ids failed at finalize (no outcome anywhere)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (job id, why)


def _finished_meta(rt: Runtime, row: dict[str, Any], report: ReconcileReport) -> dict[str, Any] | None:
    """The worker's metadata when it records an outcome, else None (still running, or unreadable)."""
    try:
        meta = rt.store.read_metadata(row["worker_id"])
    except Exception as exc:  # missing or corrupt: reported, never read as an outcome
        report.skipped.append((row["id"], f"metadata.json unreadable: {type(exc).__name__}: {exc}"))
        log.warning("job %s: metadata.json of %s unreadable: %s", row["id"], row["worker_id"], exc)
        return None
    return meta if meta.get("status") in WORKER_OUTCOMES and meta.get("finished_at") else None


def _repair(rt: Runtime, row: dict[str, Any], meta: dict[str, Any]) -> bool:
    with rt.pool.connection() as conn:
        if not jobs.mark_finished(conn, row["id"], meta):
            return False
        run = runs.get_run(conn, row["owner_id"], row["run_id"]) if row["run_id"] is not None else None
        if run is not None and run["status"] not in RUN_FINAL:  # nothing follows a run's final event
            events.emit(conn, row["run_id"], row["owner_id"], "worker_complete", {
                "job_id": row["id"], "worker_id": row["worker_id"], "status": meta["status"],
                "duration_ms": meta.get("duration_ms"),
            })
    log.info("job %s: index reconciled with metadata.json (%s)", row["id"], meta["status"])
    return True


def reconcile_run(rt: Runtime, owner_id: int, run_id: int, *, close_unfinished: bool = False) -> ReconcileReport:
    """Bring the run's unfinished jobs in step with their workers' metadata.

    Called when no worker of the run can still be running (the state machine's fan-out has
    returned: resume, finalize). With ``close_unfinished`` (finalize) a job that is still
    unfinished afterwards, with no outcome anywhere, is failed the Catch path's way, so a run never
    ends while one of its jobs stays ``running`` in the index."""
    from zerg.workers.runner import mark_job_failed

    report = ReconcileReport()
    with rt.pool.connection() as conn:
        rows = jobs.unfinished_started_jobs(conn, run_id=run_id)
    for row in rows:
        if row["owner_id"] != owner_id:  # run ids are global; the owner is checked all the same
            continue
        report.checked += 1
        meta = _finished_meta(rt, row, report)
        if meta is not None and _repair(rt, row, meta):
            report.repaired.append(row["id"])
    if close_unfinished:
        with rt.pool.connection() as conn:
            left = [r["id"] for r in jobs.run_jobs(conn, owner_id, run_id) if r["status"] in JOB_UNFINISHED]
        for job_id in left:
            mark_job_failed(rt, job_id, owner_id, run_id, "the worker ended without recording its outcome")
            report.closed.append(job_id)
    return report


def reconcile_index(rt: Runtime, *, settle_s: float | None = None, limit: int = 500) -> ReconcileReport:
    """Repair every unfinished row (all owners) whose worker's metadata records an outcome that is
    at least ``settle_s`` old (default: the workers' own retry window plus one connection wait, so
    a worker still retrying its bookkeeping is not raced). For the periodic housekeeping loop."""
    settings = rt.settings
    settle = timedelta(seconds=settings.db_retry_s + settings.db_wait_s if settle_s is None else settle_s)
    report = ReconcileReport()
    with rt.pool.connection() as conn:
        rows = jobs.unfinished_started_jobs(conn, limit=limit)
    now = utcnow()
    for row in rows:
        report.checked += 1
        meta = _finished_meta(rt, row, report)
        if meta is None or now - parse_iso(meta["finished_at"]) < settle:
            continue
        if _repair(rt, row, meta):
            report.repaired.append(row["id"])
    return report


RECONCILE_INTERVAL_S = 300.0  # zerg serve's housekeeping: every 5 minutes


def run_reconcile(rt: Runtime) -> dict[str, int]:
    """:func:`reconcile_index` as a housekeeping task: its counts, for the log."""
    report = reconcile_index(rt)
    return {"checked": report.checked, "repaired": len(report.repaired), "skipped": len(report.skipped)}
