"""Ingress Lambda: the entry for every external event. Today: the Jarvis HTTP API (API Gateway
HTTP API v2 events), scheduled housekeeping (``{"trigger": "housekeeping", "task": NAME}`` from
an EventBridge rule), owners' schedules (``{"trigger": "schedule", "schedule_id", "scheduled_time"}``
from EventBridge Scheduler), the run state machine's execution status changes (EventBridge), and
replies: inbound mail (SES receipt rule, ``Records[].eventSource == "aws:ses"``) and inbound SMS
(the two-way SMS topic, ``Records[].EventSource == "aws:sns"``)."""

from __future__ import annotations

from typing import Any

from zerg import observability

# Lambda's remaining time below which a housekeeping task starts no new piece of work.
HOUSEKEEPING_MARGIN_MS = 5_000
# An embedding batch started just before the margin must end within it.
EMBED_BATCH_TIMEOUT_S = HOUSEKEEPING_MARGIN_MS / 1000 - 1


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    if isinstance(event, dict) and event.get("trigger") == "housekeeping":
        return housekeeping(event, context)
    if isinstance(event, dict) and event.get("trigger") == "schedule":
        return schedule_fire(event)
    if isinstance(event, dict) and event.get("source") == "aws.states":
        return execution_status(event)
    if (channel := inbound_channel(event)) is not None:
        return inbound(event, channel)
    # Imported here, not at the top: the API (Powertools' event handler, the routes and their
    # models) is loaded by the first HTTP request, never by a scheduled or inbound event.
    from zerg.api.app import resolve

    request_id = ((event or {}).get("requestContext") or {}).get("requestId")
    with observability.invocation("events", request_id):
        return resolve(event, context)


def housekeeping(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    from zerg.handler_input import HousekeepingEvent, parse_event
    from zerg.memory.filesystem import prune_versions
    from zerg.memory.org import prune_forgotten_facts
    from zerg.notify.deliver import release_held
    from zerg.wiring import get_runtime
    from zerg.workers.retention import run_retention

    ev = parse_event(HousekeepingEvent, event, "housekeeping")
    tasks = {"retention": run_retention, "memory-versions": prune_versions,  # one entry per HousekeepingEvent.task
             "memory-facts": prune_forgotten_facts, "embed": embed_sweep, "notifications": release_held,
             "schedules": schedules_sweep, "inbound": inbound_sweep}
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    should_stop = (lambda: remaining() < HOUSEKEEPING_MARGIN_MS) if remaining else None
    with observability.invocation("events", f"housekeeping:{ev.task}") as log:
        try:
            result = tasks[ev.task](get_runtime(), should_stop=should_stop)
        except Exception:  # EventBridge's asynchronous invoke retries; the log says what broke
            log.exception("housekeeping task failed", extra={"task": ev.task})
            raise
        log.info("housekeeping task done", extra={"task": ev.task, "result": result})
    return {"trigger": "housekeeping", "task": ev.task, "result": result}


def embed_sweep(rt: Any, should_stop: Any = None) -> dict[str, Any]:
    """Memory files without a current vector get one (written through the API, or missed by the
    Remember step): batches within the margin, so one never outlives the invocation."""
    from zerg.memory.indexer import run_sweep

    return run_sweep(rt, should_stop, batch_timeout_s=EMBED_BATCH_TIMEOUT_S)


def schedules_sweep(rt: Any, should_stop: Any = None) -> dict[str, Any]:
    """What the local ticker does besides firing, for Scheduler's fires: complete the fires a stopped
    invocation left pending (nothing else would start their runs), then prune fired one-offs."""
    from zerg.schedules import service
    from zerg.schedules.firing import recover_pending

    recovered = recover_pending(rt, should_stop=should_stop)
    return {"recovered": recovered, **service.prune_fired_one_offs(rt, should_stop=should_stop)}


def inbound_sweep(rt: Any, should_stop: Any = None) -> dict[str, Any]:
    """Replies a stopped invocation left half done (a row still ``received``, or a run row whose
    execution never started): completed here, as nothing else would."""
    from zerg.inbound import replies

    return replies.recover_pending(rt, should_stop=should_stop)


def schedule_fire(event: dict[str, Any]) -> dict[str, Any]:
    """A schedule is due: fire it (zerg.schedules.firing), at most once per scheduled time. A bad event
    raises InvalidEvent before anything is touched; a failure raises, so Scheduler (or Lambda's
    asynchronous retry) delivers it again and the retry completes the same fire."""
    from zerg.handler_input import ScheduleFireEvent, parse_event
    from zerg.schedules.firing import fire
    from zerg.wiring import get_runtime

    ev = parse_event(ScheduleFireEvent, event, "schedule")
    with observability.invocation("events", f"schedule:{ev.schedule_id}") as log:
        try:
            result = fire(get_runtime(), ev.schedule_id, ev.when, source="scheduler")
        except Exception:
            log.exception("schedule fire failed", extra={"schedule_id": ev.schedule_id,
                                                          "scheduled_time": ev.scheduled_time})
            raise
    return {"trigger": "schedule", "schedule_id": ev.schedule_id, "scheduled_time": ev.scheduled_time,
            "outcome": result.outcome, "run_id": result.run_id, "detail": result.detail,
            "duplicate": result.duplicate}


def inbound_channel(event: Any) -> str | None:
    """``email`` for an SES receipt event, ``sms`` for an SNS delivery, None for anything else."""
    records = event.get("Records") if isinstance(event, dict) else None
    first = records[0] if isinstance(records, list) and records and isinstance(records[0], dict) else {}
    if first.get("eventSource") == "aws:ses":
        return "email"
    if first.get("EventSource") == "aws:sns":
        return "sms"
    return None


def inbound(event: dict[str, Any], channel: str) -> dict[str, Any]:
    """Each record parsed (zerg.inbound.email / .sms), then the one pipeline (zerg.inbound.replies).
    A record whose messageId cannot be read is refused: logged and answered ``{"rejected": why}``,
    with no row (there is nothing to key one by, and a retry would fail the same way). Every other
    message gets a row, a refused one with the reason the pipeline recorded. A database or S3
    outage raises, so Lambda's asynchronous retry delivers the event again, and the pipeline's
    idempotency (by the provider's message id) makes that safe."""
    from zerg.handler_input import InvalidEvent
    from zerg.inbound import replies
    from zerg.wiring import get_runtime

    rt = get_runtime()
    results = []
    with observability.invocation("events", f"inbound:{channel}") as log:
        for record in event["Records"]:
            try:
                parsed = _parse_inbound(rt, channel, record)
            except InvalidEvent as exc:
                log.warning("inbound event refused", extra={"channel": channel, "reason": str(exc)})
                results.append({"rejected": str(exc)})
                continue
            out = replies.receive(rt, parsed)
            results.append({"provider_id": parsed.provider_id, "status": out.status, "reason": out.reason,
                            "inbound_id": out.inbound_id, "run_id": out.run_id, "duplicate": out.duplicate})
    return {"trigger": "inbound", "channel": channel, "results": results}


def _parse_inbound(rt: Any, channel: str, record: Any) -> Any:
    """The record as an :class:`zerg.inbound.messages.Inbound`; InvalidEvent when it is not a record."""
    from zerg.handler_input import InvalidEvent

    if not isinstance(record, dict):
        raise InvalidEvent(f"invalid {channel} event: a record is not an object")
    if channel == "email":
        from zerg.inbound import email

        return email.from_ses_record(rt, record)
    from zerg.inbound import sms

    return sms.from_sns_record(record)


def execution_status(event: dict[str, Any]) -> dict[str, Any]:
    """A run's execution failed, timed out or was aborted: close the run (zerg.runs.execution_status)."""
    from zerg.runs.execution_status import on_execution_status
    from zerg.wiring import get_runtime

    with observability.invocation("events", event.get("id")) as log:
        out = on_execution_status(get_runtime(), event)
        log.info("execution status handled", extra=out)
    return out
