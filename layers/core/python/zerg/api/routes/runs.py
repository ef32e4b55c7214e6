"""Runs: start one, follow its events, read it, cancel it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from zerg.agents import settings as agent_settings
from zerg.api import sse
from zerg.api.deps import MAX_ID, Owner, Rt, caller_of, json_response, runtime
from zerg.api.errors import ApiError, not_found
from zerg.api.models import (FeedFrame, RunAccepted, RunCancelled, RunDocument, RunEventFrame, RunList, RunTimeline,
                             RunTrace, responses)
from zerg.api.query import repeated
from zerg.api.routes.jarvis import UTTERANCE_CHARS
from zerg.auth import Caller
from zerg.llm.providers import ModelConfigError
from zerg.runs import events
from zerg.runs import store as runs
from zerg.runs.launch import LaunchError, start_execution
from zerg.runs.store import RunTrigger
from zerg.runtime import Runtime
from zerg.statuses import RUN_FINAL, RunStatus
from zerg.validation import NOT_BLANK, validation_message

router = Router()
CANCEL_WAIT_S = 5.0  # how long a cancel waits for the run's workers to end their commands


class PreviousMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=UTTERANCE_CHARS)


class ClientContext(BaseModel):
    """What the client sends along (seed 5.1), for this run only: never written to the thread."""

    model_config = ConfigDict(extra="forbid")
    conversation_id: str | None = Field(default=None, min_length=1, max_length=200,
                                        description="The client's own conversation id (kept on the run)")
    previous_messages: list[PreviousMessage] | None = Field(default=None, max_length=200, description=(
        "The client's latest messages, oldest first: shown to this run's supervisor as data, never stored on "
        "the thread (at most ZERG_PREVIOUS_MESSAGES_MAX, default 20; the whole context at most "
        "ZERG_CLIENT_CONTEXT_MAX_BYTES, default 32 KB, as JSON)"))


class Preferences(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verbosity: Literal["concise", "detailed"] | None = Field(default=None, description=(
        "concise: a few sentences; detailed: the full findings with their evidence (job ids)"))
    notify_on_complete: bool | None = Field(default=None, strict=True, description=(
        "Email the answer (or why the run failed) to the owner's verified address when the run ends"))
    budget_usd: float | None = Field(default=None, ge=0, le=1_000_000, description=(
        "This run's model spending limit, USD (default: the owner's run_usd_budget, else the agent default): "
        "checked before every model call; past it the run stops with a partial answer. A model without a "
        "known price is refused for a budgeted run"))
    budget_tokens: int | None = Field(default=None, ge=0, le=10**12, strict=True, description=(
        "This run's model token limit, tokens in + out (default: the owner's run_token_budget, else the agent default)"))


class StartRunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK}, description=(
        "What the assistant should do: not blank, at most ZERG_TASK_MAX_BYTES bytes of UTF-8 (default 8192; "
        "over it 413)"))
    context: ClientContext | None = None
    preferences: Preferences | None = None

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


def stream_url(run_id: int) -> str:
    return f"/api/jarvis/supervisor/events?run_id={run_id}"


RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="The run's id")]
# What check_idempotency_key accepts, for the document: 1-200 printable characters (a header value
# is Latin-1, and HTTP strips the spaces at its ends).
IDEMPOTENCY_KEY_PATTERN = r"^[!-~\xa1-\xac\xae-\xff]([ -~\xa1-\xac\xae-\xff]*[!-~\xa1-\xac\xae-\xff])?$"
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key", description=(
    "1-200 printable characters; a replay with the same key answers with the same run and starts nothing new"),
    json_schema_extra={"minLength": 1, "maxLength": 200, "pattern": IDEMPOTENCY_KEY_PATTERN})]


@router.post("/api/jarvis/supervisor", summary="Start a supervisor run", status_code=202,
             responses=responses(202, "Run accepted; follow stream_url", RunAccepted, 400, 401, 413, 415, 503))
def start_supervisor_run(body: StartRunBody, owner_id: Owner, rt: Rt, key: IdempotencyKey = None):
    size = len(body.task.encode())
    if size > rt.settings.task_max_bytes:
        raise ApiError(413, "payload_too_large", f"task is {size} bytes; the limit is {rt.settings.task_max_bytes}")
    check_idempotency_key(key)
    context = _client_context(rt, body.context)
    preferences = body.preferences.model_dump(exclude_none=True) if body.preferences else None
    return accept_run(rt, owner_id, body.task, key=key, context=context, preferences=preferences or None)


def check_idempotency_key(key: str | None) -> None:
    # Checked here, not by Header(min_length=...): the 400 and its message are the API's contract.
    if key is not None and not 1 <= len(key) <= 200:
        raise ApiError(400, "bad_request", "Idempotency-Key must be 1-200 characters")
    if key is not None and not key.isprintable():  # stored as text: no NUL, no control characters
        raise ApiError(400, "bad_request", "Idempotency-Key must not contain control characters")


def _client_context(rt: Runtime, context: ClientContext | None) -> dict[str, Any] | None:
    """The request's context as the run keeps it, within the settings' bounds (422, 413)."""
    if context is None:
        return None
    limit = rt.settings.previous_messages_max
    if len(context.previous_messages or ()) > limit:
        raise ApiError(422, "validation_error", f"context.previous_messages: {len(context.previous_messages)} "
                       f"messages; at most {limit} (ZERG_PREVIOUS_MESSAGES_MAX): send the latest ones")
    kept = context.model_dump(exclude_none=True)
    size = len(json.dumps(kept, ensure_ascii=False, separators=(",", ":")).encode())
    if size > rt.settings.client_context_max_bytes:
        raise ApiError(413, "payload_too_large", f"context is {size} bytes as JSON; the limit is "
                       f"{rt.settings.client_context_max_bytes} (ZERG_CLIENT_CONTEXT_MAX_BYTES): send fewer "
                       "or shorter previous_messages")
    return kept or None


def accept_run(rt: Runtime, owner_id: int, task: str, *, key: str | None = None,
               context: dict[str, Any] | None = None, preferences: dict[str, Any] | None = None) -> Response:
    """Start a run of ``task`` for the owner (trigger ``api``) and answer 202 with where to follow
    it and how long it will likely take. The one start path of the API: /supervisor and a worker's
    retry. An Idempotency-Key replay answers the first run and starts nothing new."""
    return json_response(start_api_run(rt, owner_id, task, key=key, context=context, preferences=preferences),
                         status=202)


def start_api_run(rt: Runtime, owner_id: int, task: str, *, key: str | None = None,
                  context: dict[str, Any] | None = None, preferences: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`accept_run`'s work, its answer as a dict (the MCP server's ``ask`` starts runs here too)."""
    with rt.pool.connection() as conn:
        try:  # a model its provider cannot serve as configured: one line, and no run row
            agent_settings.check_models(conn, rt.settings, owner_id)
        except ModelConfigError as exc:
            raise ApiError(503, "unavailable", str(exc)) from None
        started = runs.start_run(conn, owner_id, task, trigger="api", idempotency_key=key,
                                 context=context, preferences=preferences)
        run = runs.get_run(conn, owner_id, started.run_id)
    # A replay whose first attempt died before starting the execution starts it now; starting is
    # idempotent per run (the execution is named after the run id).
    if run["status"] == "running" and run["execution_arn"] is None:
        _start_execution(rt, run)
    with rt.pool.connection() as conn:
        status = runs.get_run(conn, owner_id, started.run_id)["status"]
        estimate = runs.estimated_duration_s(conn, owner_id, "api", default_s=rt.settings.estimate_default_s,
                                             cap_s=rt.settings.run_timeout_s)
    return {"run_id": started.run_id, "thread_id": started.thread_id, "status": status,
            "stream_url": stream_url(started.run_id), "estimated_duration_seconds": estimate}


def _start_execution(rt: Runtime, run: dict[str, Any]) -> None:
    try:
        start_execution(rt, run)
    except LaunchError:
        raise ApiError(503, "unavailable", "the run could not be started; try again") from None


RunIdQuery = Annotated[int, Query(ge=1, le=MAX_ID, description="The run to follow")]
LastEventId = Annotated[int | None, Query(ge=0, description=(
    "Resume after this event id (for clients that cannot send the Last-Event-ID header)"))]
LastEventIdHeader = Annotated[int | None, Header(alias="last-event-id", ge=0, description=(
    "Resume after this event id; wins over the last_event_id query parameter"))]


class _StreamParams(BaseModel):
    """The events route's parameters, for the local server's live stream (not routed by Powertools)."""

    run_id: RunIdQuery
    last_event_id: LastEventId = None


def check_stream(owner_id: int, run_id: int) -> None:
    """404 unless the run is the owner's."""
    with runtime().pool.connection() as conn:
        if runs.get_run(conn, owner_id, run_id) is None:
            raise not_found(f"run {run_id}")


_EVENT_ID = TypeAdapter(Annotated[int, Field(ge=0)])


def _stream_params(event: Any, model: type[BaseModel]) -> BaseModel:
    """A raw events request's query parameters and Last-Event-ID (the header wins over the
    ``last_event_id`` query), validated by ``model`` with the messages Powertools would give (422).
    Both are checked when both are given, as the route checks them."""
    query = event.get("queryStringParameters") or {}
    header = (event.get("headers") or {}).get("last-event-id")
    lists = repeated(event)  # a parameter given twice is a list, as Powertools has it
    errors: list[Any] = []
    params = None
    try:  # blank means absent, as in ``query.without_blanks``
        params = model.model_validate({k: v for k in model.model_fields
                                       if (v := lists.get(k, query.get(k))) not in (None, "")})
    except ValidationError as exc:
        errors += [{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]
    after = None
    if header:
        try:
            after = _EVENT_ID.validate_python(header)
        except ValidationError as exc:
            errors += [{**e, "loc": ("header", "last-event-id")} for e in exc.errors()]
    if errors:
        raise ApiError(*validation_message(errors))
    return params.model_copy(update={"last_event_id": after}) if after is not None else params


def stream_request(event: Any) -> tuple[Caller, int, int]:
    """(caller, run, last event id) of a raw events request, checked as the route checks them:
    401, then 422 (the same messages as Powertools' validation), then 404, as ApiError.

    For the local server's live stream, which does not go through the Lambda route."""
    caller = caller_of(event)
    params = _stream_params(event, _StreamParams)
    check_stream(caller.owner_id, params.run_id)
    return caller, params.run_id, params.last_event_id or 0


def long_poll_seconds(configured: float, context: Any) -> float:
    """The configured long-poll, cut to what the Lambda has left (minus 2 s to answer): a cold
    start already spent part of the function's timeout."""
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return configured
    return max(0.5, min(configured, context.get_remaining_time_in_millis() / 1000 - 2.0))


@router.get("/api/jarvis/supervisor/events", summary="Run progress as Server-Sent Events",
            responses={**responses(200, "The events after Last-Event-ID, then retry:", RunEventFrame, 401, 404,
                                   media_type="text/event-stream"),
                       204: {"description": "The run's final event was already delivered: stop reconnecting",
                             "content": {}}})  # no body (else Powertools documents JSON)
def run_events_stream(owner_id: Owner, rt: Rt, run_id: RunIdQuery, last_event_id: LastEventId = None,
                      last_event_id_header: LastEventIdHeader = None):
    """Long-poll under Lambda: the body holds the events after Last-Event-ID (header or
    ``last_event_id`` query) and ends with ``retry:``; 204 once the final event was delivered."""
    check_stream(owner_id, run_id)
    after = last_event_id_header if last_event_id_header is not None else last_event_id or 0
    if after and sse.terminal_delivered(rt.pool, owner_id, run_id, after):
        return Response(status_code=204, content_type="text/event-stream", body="")
    return _long_poll(rt, partial(sse.stream, rt.pool, owner_id, run_id, after))


def _long_poll(rt: Runtime, frames: Callable[..., Iterator[str]]) -> Response:
    """One long-poll answer under Lambda: the stream's frames until the deadline (what the Lambda
    has left) or 1 s after the first, then ``retry:`` so an EventSource reconnects with the last id."""
    deadline = time.monotonic() + long_poll_seconds(rt.settings.sse_poll_s, router.lambda_context)
    body = "".join(frames(heartbeat_s=rt.settings.heartbeat_s, deadline=deadline, linger_s=1.0))
    return Response(status_code=200, content_type="text/event-stream", body=body + f"retry: {sse.RETRY_MS}\n\n",
                    headers={"Cache-Control": "no-cache"})


@router.get("/api/jarvis/runs/<run_id>", summary="A run's details",
            responses=responses(200, "The run, its workers and its usage", RunDocument, 401, 404))
def get_run(run_id: RunId, owner_id: Owner, rt: Rt):
    from zerg.alerts import inbox
    from zerg.approvals.wait import run_views

    with rt.pool.connection() as conn:
        doc = runs.run_document(conn, owner_id, run_id)
        if doc is not None:  # what it asked the owner, waiting or answered (issue 27)
            row = runs.get_run(conn, owner_id, run_id)
            doc["approvals"] = run_views(conn, owner_id, row)
            doc["trace_id"] = _trace_id(conn, owner_id, row)
        if doc is not None and doc["trigger"] == "schedule":  # a background result opened: its schedule is attended to
            inbox.mark_opened(conn, owner_id, run_id)
    if doc is None:
        raise not_found(f"run {run_id}")
    return json_response(doc)


def _trace_id(conn: Any, owner_id: int, run: dict[str, Any]) -> str | None:
    """The run's trace id: derived from the run while tracing is on, else the one its kept spans carry."""
    from zerg import tracing

    if tracing.active():
        return tracing.ids_for(run["id"], run["created_at"])[0]
    from zerg.tracing import store as spans

    return spans.trace_of_run(conn, owner_id, run["id"])


@router.get("/api/jarvis/runs/<run_id>/trace", summary="A run's trace (its waterfall)",
            responses=responses(200, "The run's spans, nested, with start, duration, tokens, cost and status",
                                RunTrace, 401, 404))
def get_run_trace(run_id: RunId, owner_id: Owner, rt: Rt):
    """The spans kept for the run (``ZERG_TRACE_STORE``, docs/tracing.md); an empty list when none
    were (tracing off, or only exported over OTLP). Another owner's run is 404."""
    from zerg.tracing import store as spans
    from zerg.tracing.waterfall import build

    with rt.pool.connection() as conn:
        if runs.get_run(conn, owner_id, run_id) is None:
            raise not_found(f"run {run_id}")
        rows = spans.spans_of_run(conn, owner_id, run_id)
    return json_response({"run_id": run_id, **build(rows)})


@router.post("/api/jarvis/runs/<run_id>/cancel", summary="Cancel a running run",
             responses=responses(200, "The run's status after the cancel (a finished run is unchanged)",
                                 RunCancelled, 401, 404))
def cancel_run(run_id: RunId, owner_id: Owner, rt: Rt):
    """Queued workers never start; running ones have their commands ended (waited for up to
    ``CANCEL_WAIT_S``); the run's final ``error`` event follows the last of them."""
    from zerg.alerts.completion_mail import mail_answer
    from zerg.workers.cancellation import stop_run_workers
    from zerg.workers.runner import end_approval_waits

    with rt.pool.connection() as conn:
        before = runs.get_run(conn, owner_id, run_id)
        if before is None:
            raise not_found(f"run {run_id}")
        run = runs.cancel_run(conn, owner_id, run_id)
    if before["status"] not in RUN_FINAL and before["execution_arn"]:
        try:
            rt.starter.stop(before["execution_arn"], "cancelled by the user")
        except Exception:  # the run is already marked cancelled; its steps will no-op
            pass
    if before["status"] not in RUN_FINAL:
        end_approval_waits(rt, owner_id, run_id)  # a worker held for approval: closed here, its call never runs
        stop_run_workers(rt, owner_id, run_id, wait_s=CANCEL_WAIT_S)
        if run["status"] == "cancelled":  # a request with notify_on_complete hears that it ended
            mail_answer(rt, owner_id, run_id)
    return json_response({"run_id": run_id, "status": run["status"]})


# ---- The runs list, a run's timeline and the owner-wide feed (issue 16) ----

FEED_PATH = "/api/jarvis/events"
StatusFilter = Annotated[RunStatus | None, Query(description="Only runs with this status")]
TriggerFilter = Annotated[RunTrigger | None, Query(description="Only runs started this way")]


@router.get("/api/jarvis/runs", summary="The owner's runs, newest first",
            responses=responses(200, "Newest first; next_before_id pages on", RunList, 401))
def list_runs(
    owner_id: Owner,
    rt: Rt,
    status: StatusFilter = None,
    trigger: TriggerFilter = None,
    limit: Annotated[int, Query(ge=1, le=100, description="How many")] = 20,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only ids below this (the next page)")] = None,
):
    with rt.pool.connection() as conn:
        rows = runs.list_runs(conn, owner_id, status=status, trigger=trigger, limit=limit, before_id=before_id)
    return json_response({"runs": rows, "next_before_id": rows[-1]["id"] if len(rows) == limit else None})


@router.get("/api/jarvis/runs/<run_id>/events", summary="A run's timeline: its events with their times",
            responses=responses(200, "Oldest first, at most 2,000 (truncated says so)", RunTimeline, 401, 404))
def run_timeline(run_id: RunId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        if runs.get_run(conn, owner_id, run_id) is None:
            raise not_found(f"run {run_id}")
        rows, truncated = events.timeline(conn, owner_id, run_id)
    return json_response({"run_id": run_id, "events": rows, "truncated": truncated})


class _FeedParams(BaseModel):
    """The feed's parameters, for the local server's live stream (not routed by Powertools)."""

    last_event_id: LastEventId = None


def feed_request(event: Any) -> tuple[Caller, int | None]:
    """(caller, last event id or None) of a raw feed request: 401, then 422, as ApiError."""
    caller = caller_of(event)
    return caller, _stream_params(event, _FeedParams).last_event_id


@dataclass(frozen=True)
class LiveStream:
    """A checked request for a live stream (``zerg serve``): whose it is, and its frames once the
    server gives the stop event and the session check (``frames(stop=..., still_valid=...)``)."""

    caller: Caller
    frames: Callable[..., Iterator[str]]


def live_stream(event: Any) -> LiveStream | None:
    """The live stream a raw request asks for (the run's or the owner's feed), checked as its route
    checks it (ApiError otherwise); None: the run's final event was already delivered (204)."""
    rt = runtime()
    if event["rawPath"] == FEED_PATH:
        caller, after = feed_request(event)
        frames = _feed(rt, caller.owner_id, after)
    else:
        caller, run_id, after = stream_request(event)
        if after and sse.terminal_delivered(rt.pool, caller.owner_id, run_id, after):
            return None
        frames = partial(sse.stream, rt.pool, caller.owner_id, run_id, after)
    return LiveStream(caller, partial(frames, heartbeat_s=rt.settings.heartbeat_s))


def _feed(rt: Runtime, owner_id: int, after: int | None) -> Callable[..., Iterator[str]]:
    """The owner's feed after ``after`` as ``frames(**follow)``; no id: from the newest feed event
    (read now, so an unreachable database is the request's 503), announced in an id-only frame."""
    start = sse.feed_start(rt.pool, owner_id) if after is None else after
    return partial(sse.owner_stream, rt.pool, owner_id, start, announce=after is None)


@router.get(FEED_PATH, summary="The owner's runs starting and finishing, as Server-Sent Events",
            responses=responses(200, "The announcements after Last-Event-ID, then retry:", FeedFrame, 401,
                                media_type="text/event-stream"))
def owner_events_stream(owner_id: Owner, rt: Rt, last_event_id: LastEventId = None,
                        last_event_id_header: LastEventIdHeader = None):
    """Every run of the owner (started by this device, another, a schedule or a reply):
    ``run_started`` and ``run_finished``. Long-poll under Lambda (live under ``zerg serve``): the
    body holds what happened after Last-Event-ID (header or ``last_event_id`` query) and ends with
    ``retry:``. Without an id the feed starts now (no history) and says where in an id-only frame."""
    after = last_event_id_header if last_event_id_header is not None else last_event_id
    return _long_poll(rt, _feed(rt, owner_id, after))
