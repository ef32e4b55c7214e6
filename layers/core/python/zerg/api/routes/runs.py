"""Runs: start one, follow its events, read it, cancel it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.api import sse
from zerg.runs import store as runs
from zerg.statuses import RUN_FINAL
from zerg.api.deps import int_param, json_response, owner_of, runtime
from zerg.api.errors import ApiError, not_found

if TYPE_CHECKING:
    from zerg.runtime import Runtime

router = Router()


class StartRunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, description="What the assistant should do")
    context: dict[str, Any] | None = None
    preferences: dict[str, Any] | None = None

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


def stream_url(run_id: int) -> str:
    return f"/api/jarvis/supervisor/events?run_id={run_id}"


@router.post("/api/jarvis/supervisor", summary="Start a supervisor run")
def start_supervisor_run(body: StartRunBody):
    rt = runtime()
    owner_id = owner_of(router.current_event)
    size = len(body.task.encode())
    if size > rt.settings.task_max_bytes:
        raise ApiError(413, "payload_too_large", f"task is {size} bytes; the limit is {rt.settings.task_max_bytes}")
    key = router.current_event.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= 200:
        raise ApiError(400, "bad_request", "Idempotency-Key must be 1-200 characters")
    with rt.pool.connection() as conn:
        started = runs.start_run(conn, owner_id, body.task, trigger="api", idempotency_key=key)
        run = runs.get_run(conn, owner_id, started.run_id)
    # A replay whose first attempt died before starting the execution starts it now; starting is
    # idempotent per run (the execution is named after the run id).
    if run["status"] == "running" and run["execution_arn"] is None:
        _start_execution(rt, run)
    with rt.pool.connection() as conn:
        status = runs.get_run(conn, owner_id, started.run_id)["status"]
    return json_response({"run_id": started.run_id, "thread_id": started.thread_id, "status": status,
                          "stream_url": stream_url(started.run_id)}, status=202)


def _start_execution(rt: "Runtime", run: dict[str, Any]) -> None:
    try:
        arn = rt.starter.start(run["id"], run["owner_id"], run["thread_id"])
    except Exception as exc:
        with rt.pool.connection() as conn:
            runs.fail_run(conn, run, "failed", f"could not start the run: {type(exc).__name__}")
            runs.release_idempotency_key(conn, run["id"])
        raise ApiError(503, "unavailable", "the run could not be started; try again") from None
    with rt.pool.connection() as conn:
        runs.set_execution_arn(conn, run["id"], arn)


def stream_request(event: Any) -> tuple[int, int, int]:
    """(owner, run, last event id) of an events request, checked: 401/404/422 as ApiError.

    Shared by the Lambda long-poll below and the local server's live stream."""
    owner_id = owner_of(event)
    query = event.get("queryStringParameters") or {}
    headers = event.get("headers") or {}
    run_id = int_param(query.get("run_id"), "run_id")
    after = int_param(headers.get("last-event-id") or query.get("last_event_id"), "Last-Event-ID", default=0, lo=0)
    with runtime().pool.connection() as conn:
        if runs.get_run(conn, owner_id, run_id) is None:
            raise not_found(f"run {run_id}")
    return owner_id, run_id, after


def long_poll_seconds(configured: float, context: Any) -> float:
    """The configured long-poll, cut to what the Lambda has left (minus 2 s to answer): a cold
    start already spent part of the function's timeout."""
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return configured
    return max(0.5, min(configured, context.get_remaining_time_in_millis() / 1000 - 2.0))


@router.get("/api/jarvis/supervisor/events", summary="Run progress as Server-Sent Events")
def run_events_stream():
    """Long-poll under Lambda: the body holds the events after Last-Event-ID (header or
    ``last_event_id`` query) and ends with ``retry:``; 204 once the final event was delivered."""
    rt = runtime()
    owner_id, run_id, after = stream_request(router.current_event)
    if after and sse.terminal_delivered(rt.pool, owner_id, run_id, after):
        return Response(status_code=204, content_type="text/event-stream", body="")
    deadline = time.monotonic() + long_poll_seconds(rt.settings.sse_poll_s, router.lambda_context)
    body = "".join(sse.stream(rt.pool, owner_id, run_id, after, heartbeat_s=rt.settings.heartbeat_s,
                              deadline=deadline, linger_s=1.0))
    return Response(status_code=200, content_type="text/event-stream", body=body + f"retry: {sse.RETRY_MS}\n\n",
                    headers={"Cache-Control": "no-cache"})


@router.get("/api/jarvis/runs/<run_id>", summary="A run's details")
def get_run(run_id: str):
    rt = runtime()
    owner_id = owner_of(router.current_event)
    rid = int_param(run_id, "run_id")
    with rt.pool.connection() as conn:
        doc = runs.run_document(conn, owner_id, rid)
    if doc is None:
        raise not_found(f"run {rid}")
    return json_response(doc)


@router.post("/api/jarvis/runs/<run_id>/cancel", summary="Cancel a running run")
def cancel_run(run_id: str):
    rt = runtime()
    owner_id = owner_of(router.current_event)
    rid = int_param(run_id, "run_id")
    with rt.pool.connection() as conn:
        before = runs.get_run(conn, owner_id, rid)
        if before is None:
            raise not_found(f"run {rid}")
        run = runs.cancel_run(conn, owner_id, rid)
    if before["status"] not in RUN_FINAL and before["execution_arn"]:
        try:
            rt.starter.stop(before["execution_arn"], "cancelled by the user")
        except Exception:  # the run is already marked cancelled; its steps will no-op
            pass
    return json_response({"run_id": rid, "status": run["status"]})
