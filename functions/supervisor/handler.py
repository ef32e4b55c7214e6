"""Supervisor Lambda: one stateless step of a run (plan, resume, finalize, fail), the run's
memory writes after it (remember: an asynchronous invocation by the Remember state), and the
escalation state machine's steps (escalate: the next repeat of a critical alert; escalation_failed)."""

from __future__ import annotations

from typing import Any

from zerg import observability

ESCALATION_ACTIONS = ("escalate", "escalation_failed")


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    # Imported here, not at the top: pydantic and the event models stay out of the cold start's
    # import (tests/test_supervisor_imports.py).
    from zerg.handler_input import InvalidEvent, SupervisorEvent, parse_event

    ev = parse_event(SupervisorEvent, event, "supervisor")
    if ev.action in ESCALATION_ACTIONS:
        if ev.escalation_id is None:
            raise InvalidEvent(f"invalid supervisor event: escalation_id: Field required for {ev.action}")
    elif ev.action != "fail" and ev.thread_id is None:
        raise InvalidEvent(f"invalid supervisor event: thread_id: Field required for {ev.action}")
    from zerg import tracing
    from zerg.tracing import steps
    from zerg.wiring import get_runtime

    rt = get_runtime()
    # An escalation's steps are not a run's: they carry no traceparent and open no span.
    name, attributes = steps.supervisor_span(ev.action, ev.thread_id)
    if name.startswith("invoke_agent"):
        attributes.update(steps.agent_provider(rt, ev.traceparent, "supervisor"))
    with observability.invocation("supervisor", ev.run_id, tracing.trace_id_of(ev.traceparent)) as log, \
            tracing.invocation(ev.traceparent, name, run_id=ev.run_id, owner_id=ev.owner_id, attributes=attributes):
        if ev.action in ESCALATION_ACTIONS:  # the model, tools and memory stay unimported for these
            from zerg.alerts import repeats

            if ev.action == "escalate":
                out = repeats.repeat(rt, ev.owner_id, ev.run_id, ev.escalation_id)
            else:
                out = repeats.escalation_failed(rt, ev.owner_id, ev.run_id, ev.escalation_id, ev.error)
        elif ev.action == "remember":
            from zerg.memory.writes import remember_run

            out = remember_run(rt, ev.run_id, ev.owner_id, ev.thread_id)
        else:
            from zerg.supervisor import turn

            if ev.action == "fail":
                out = turn.fail(rt, ev.run_id, ev.owner_id, ev.error)
            else:
                out = getattr(turn, ev.action)(rt, ev.run_id, ev.owner_id, ev.thread_id)
        log.info(f"supervisor {ev.action} done", extra={"action": ev.action, "result": out})
    return out
