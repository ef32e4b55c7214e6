"""Supervisor Lambda: one stateless step of a run (plan, resume, finalize, fail)."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, Field

from zerg.lambda_events import parse_event

logger = Logger(service="zerg-supervisor")


class SupervisorEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action: Literal["plan", "resume", "finalize", "fail"]
    run_id: int = Field(gt=0)
    owner_id: int = Field(gt=0)
    thread_id: int | None = Field(default=None, gt=0)
    error: Any = None  # the run-level Catch's {"Error", "Cause"}, for fail


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    ev = parse_event(SupervisorEvent, event, "supervisor")
    if ev.action != "fail" and ev.thread_id is None:
        from zerg.lambda_events import InvalidEvent

        raise InvalidEvent(f"invalid supervisor event: thread_id: Field required for {ev.action}")
    from zerg import supervisor
    from zerg.runtime import get_runtime

    rt = get_runtime()
    if ev.action == "plan":
        return supervisor.plan(rt, ev.run_id, ev.owner_id, ev.thread_id)
    if ev.action == "resume":
        return supervisor.resume(rt, ev.run_id, ev.owner_id, ev.thread_id)
    if ev.action == "finalize":
        return supervisor.finalize(rt, ev.run_id, ev.owner_id, ev.thread_id)
    return supervisor.fail(rt, ev.run_id, ev.owner_id, ev.error)
