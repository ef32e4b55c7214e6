"""Ingress Lambda: the entry for every external event. Today: the Jarvis HTTP API (API Gateway
HTTP API v2 events), scheduled housekeeping (``{"trigger": "housekeeping", "task": NAME}`` from
an EventBridge rule), owners' schedules (``{"trigger": "schedule", "schedule_id", "scheduled_time"}``
from EventBridge Scheduler) and the run state machine's execution status changes (EventBridge)."""

from __future__ import annotations

from typing import Any

from zerg import observability
from zerg.api.app import resolve

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
    request_id = ((event or {}).get("requestContext") or {}).get("requestId")
    with observability.invocation("events", request_id):
        return resolve(event, context)


def housekeeping(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    from zerg.alerts.deliver import release_held
    from zerg.handler_input import HousekeepingEvent, parse_event
    from zerg.memory.filesystem import prune_versions
    from zerg.memory.org import prune_forgotten_facts
    from zerg.runtime import get_runtime
    from zerg.workers.retention import run_retention

    ev = parse_event(HousekeepingEvent, event, "housekeeping")
    tasks = {"retention": run_retention, "memory-versions": prune_versions,  # one entry per HousekeepingEvent.task
             "memory-facts": prune_forgotten_facts, "embed": embed_sweep, "notifications": release_held,
             "schedules": schedules_sweep}
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
    from zerg.schedules.fire import recover_pending

    recovered = recover_pending(rt, should_stop=should_stop)
    return {"recovered": recovered, **service.prune_fired_one_offs(rt, should_stop=should_stop)}


def schedule_fire(event: dict[str, Any]) -> dict[str, Any]:
    """A schedule is due: fire it (zerg.schedules.fire), at most once per scheduled time. A bad event
    raises InvalidEvent before anything is touched; a failure raises, so Scheduler (or Lambda's
    asynchronous retry) delivers it again and the retry completes the same fire."""
    from zerg.handler_input import ScheduleFireEvent, parse_event
    from zerg.runtime import get_runtime
    from zerg.schedules.fire import fire

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


def execution_status(event: dict[str, Any]) -> dict[str, Any]:
    """A run's execution failed, timed out or was aborted: close the run (zerg.runs.execution_status)."""
    from zerg.runs.execution_status import on_execution_status
    from zerg.runtime import get_runtime

    with observability.invocation("events", event.get("id")) as log:
        out = on_execution_status(get_runtime(), event)
        log.info("execution status handled", extra=out)
    return out
