"""Background runs (trigger ``schedule``) at their end: the assessment, the inbox item, the
escalation matrix; and acknowledging an item.

Every closer of a run calls :func:`on_run_end` once the run is closed, through
:func:`zerg.runs.closing.after_close`: the supervisor's ``finalize`` and ``fail``, a failed start,
the orphan sweep (:mod:`zerg.runs.orphans`) and the AWS execution-status rule
(:mod:`zerg.runs.execution_status`). ``finalize`` assesses before it closes (the thread rule
needs the severity: :attr:`zerg.alerts.severity.Assessment.on_thread`) and hands its assessment on.

Invariants:
- Best effort after the run is recorded: nothing here fails or changes the closer; every failure
  is logged with the run id and reported in the returned dict.
- Exactly one inbox item per background run, and only the call that wrote it applies the
  escalation matrix, so a redelivered step or a second closer sends nothing twice.
- A cancelled run gets no item: the owner stopped it (nothing to tell).
- Acknowledging (:func:`acknowledge`, the one path of the API, the CLI and replies) is scoped by
  owner and idempotent. The item and its escalation are acknowledged in one transaction: no one
  ever sees an acknowledged item whose escalation still runs, and a repeat step racing the
  acknowledgement either claimed its repeat before it or finds the escalation ended. Stopping the
  execution afterwards is best effort (its next repeat step ends it anyway).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from zerg.alerts import inbox
from zerg.alerts.severity import Assessment, assess
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.schedules.fires import schedule_of_run
from zerg.statuses import RUN_FINAL, is_background

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

log = logging.getLogger(__name__)


def assess_run(conn: "Connection", run: dict[str, Any], schedule: dict[str, Any] | None) -> Assessment:
    """The assessment of ``run`` (with its final ``status`` and ``error``) from its answer and jobs."""

    rows = jobs.run_jobs(conn, run["owner_id"], run["id"])
    return assess(run.get("result"), rows, run, schedule_name=(schedule or {}).get("name"))


def assess_closing(rt: "Runtime", run: dict[str, Any], status: str, answer: str,
                   error: str | None = None) -> Assessment | None:
    """For ``finalize``: the assessment the run will close with (None if that cannot be computed;
    the run then closes as any other, and :func:`on_run_end` assesses it afterwards)."""
    try:
        with rt.pool.connection() as conn:
            schedule = schedule_of_run(conn, run["owner_id"], run["id"])
            return assess_run(conn, {**run, "status": status, "result": answer, "error": error}, schedule)
    except Exception:
        log.warning("background run %s: could not assess it before closing", run["id"], exc_info=True)
        return None


def on_run_end(rt: "Runtime", owner_id: int, run_id: int, assessment: Assessment | None = None) -> dict[str, Any]:
    """The closed background run's inbox item and notifications (see module). Never raises."""
    try:
        return _on_run_end(rt, owner_id, run_id, assessment)
    except Exception as exc:
        log.warning("background run %s: inbox or notifications failed", run_id, exc_info=True)
        return {"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"[:300]}


def on_close(rt: "Runtime", run: dict[str, Any], assessment: Assessment | None = None) -> dict[str, Any]:
    """The run-close subscriber for a background run (registered by :mod:`zerg.wiring`)."""
    return on_run_end(rt, run["owner_id"], run["id"], assessment)


def _on_run_end(rt: "Runtime", owner_id: int, run_id: int, assessment: Assessment | None) -> dict[str, Any]:
    from zerg.alerts import matrix as escalation

    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
        if run is None or not is_background(run):
            return {"run_id": run_id, "skipped": "not a background run"}
        if run["status"] not in RUN_FINAL or run["status"] == "cancelled":
            return {"run_id": run_id, "skipped": f"the run is {run['status']}"}
        schedule = schedule_of_run(conn, owner_id, run_id)
        assessment = assessment or assess_run(conn, run, schedule)
        item = inbox.add(conn, owner_id, run_id, (schedule or {}).get("id"), assessment)
    if item is None:
        return {"run_id": run_id, "skipped": "the run has its inbox item already"}
    item = {**item, "schedule_name": (schedule or {}).get("name")}
    report = escalation.apply(rt, owner_id, item, schedule)
    log.info("background run %s: %s %r", run_id, assessment.severity, assessment.headline,
             extra={"run_id": run_id, "severity": assessment.severity, "assessed_by": assessment.assessed_by})
    return {"run_id": run_id, "inbox": True, **report}


def acknowledge(rt: "Runtime", owner_id: int, run_id: int) -> dict[str, Any] | None:
    """Acknowledge the owner's inbox item of ``run_id``: the item, or None (not the owner's, or no
    item). A critical item's escalation ends with it, and its execution is stopped."""
    from zerg.alerts import escalations

    with rt.pool.connection() as conn:  # one transaction: the item and its escalation together (see module)
        item = inbox.acknowledge(conn, owner_id, run_id)
        ended = (escalations.acknowledge_run(conn, owner_id, run_id)
                 if item is not None and item["severity"] == "critical" else None)
    if ended is not None:
        from zerg.alerts.repeats import stop_execution

        stop_execution(rt, ended)
    return item
