"""Supervisor Lambda: one stateless step of a run (plan, resume, finalize, fail), and the run's
memory writes after it (remember: an asynchronous invocation by the Remember state)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from zerg import observability
from zerg.handler_input import InvalidEvent, parse_event


class SupervisorEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action: Literal["plan", "resume", "finalize", "fail", "remember"]
    run_id: int = Field(gt=0)
    owner_id: int = Field(gt=0)
    thread_id: int | None = Field(default=None, gt=0)
    error: Any = None  # the run-level Catch's {"Error", "Cause"}, for fail


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    ev = parse_event(SupervisorEvent, event, "supervisor")
    if ev.action != "fail" and ev.thread_id is None:
        raise InvalidEvent(f"invalid supervisor event: thread_id: Field required for {ev.action}")
    from zerg.runtime import get_runtime
    from zerg.supervisor import turn

    rt = get_runtime()
    with observability.invocation("supervisor", ev.run_id) as log:
        if ev.action == "fail":
            out = turn.fail(rt, ev.run_id, ev.owner_id, ev.error)
        elif ev.action == "remember":
            from zerg.memory.writes import remember_run

            out = remember_run(rt, ev.run_id, ev.owner_id, ev.thread_id)
        else:
            out = getattr(turn, ev.action)(rt, ev.run_id, ev.owner_id, ev.thread_id)
        log.info(f"supervisor {ev.action} done", extra={"action": ev.action, "result": out})
    return out
