"""Summary Lambda: a ≤150-character summary of a finished worker. Best-effort by contract:
it never changes a job's status and never fails the state machine."""

from __future__ import annotations

from typing import Any

from zerg import observability


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    # Imported here, not at the top: pydantic and the event models stay out of the cold start's
    # import (tests/test_supervisor_imports.py).
    from zerg.handler_input import JobEvent, parse_event

    ev = parse_event(JobEvent, event, "summary")
    from zerg import tracing
    from zerg.wiring import get_runtime
    from zerg.workers.summary import summarize_job

    with observability.invocation("summary", ev.run_id, tracing.trace_id_of(ev.traceparent)) as log:
        try:
            rt = get_runtime()
            with tracing.invocation(ev.traceparent, "summarize worker", run_id=ev.run_id, owner_id=ev.owner_id,
                                    attributes={tracing.JOB_ID: ev.job_id}):
                out = summarize_job(rt, ev.job_id, ev.owner_id, ev.run_id)
        except Exception:  # a summary may fail; the run must not
            log.exception("summary failed", extra={"job_id": ev.job_id})
            return {"job_id": ev.job_id, "worker_id": None, "summary": None}
        log.info("summary ready", extra={"job_id": ev.job_id, "worker_id": out["worker_id"]})
    return {"job_id": out["job_id"], "worker_id": out["worker_id"], "summary_ready": out["summary"] is not None}
