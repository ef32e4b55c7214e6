"""Summary Lambda: a ≤150-character summary of a finished worker. Best-effort by contract:
it never changes a job's status and never fails the state machine."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from zerg.lambda_events import JobEvent, parse_event

logger = Logger(service="zerg-summary")


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    ev = parse_event(JobEvent, event, "summary")
    from zerg.runtime import get_runtime
    from zerg.summary import summarize_job

    try:
        out = summarize_job(get_runtime(), ev.job_id, ev.owner_id, ev.run_id)
    except Exception:  # a summary may fail; the run must not
        logger.exception("summary failed", extra={"job_id": ev.job_id, "run_id": ev.run_id})
        return {"job_id": ev.job_id, "worker_id": None, "summary": None}
    return {"job_id": out["job_id"], "worker_id": out["worker_id"], "summary_ready": out["summary"] is not None}
