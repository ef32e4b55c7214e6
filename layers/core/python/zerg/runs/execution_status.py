"""AWS: a run's Step Functions execution ended badly (EventBridge "Step Functions Execution Status
Change", FAILED / TIMED_OUT / ABORTED) -> close the run the way the orphan reaper closes one.

The ingress function receives the event (an EventBridge rule on the run state machine, see
``infra/stacks/workflow.py``). Usually the state machine already closed the run itself (its
``FailRun`` state, a user's cancel that stopped the execution): then nothing changes. This path
matters when it could not: the execution hit the state machine's ``TimeoutSeconds`` (the backstop
above the run deadline), was aborted by hand, or ``FailRun`` itself failed.

Invariants:
- The event is parsed first (pydantic); an event of another state machine, or a run whose recorded
  execution is another one, changes nothing. The run id comes from the execution's name
  (``run-{id}``, set by the starter); the owner from the input only for a run whose execution ARN
  was never recorded.
- FAILED -> ``failed``, TIMED_OUT -> ``timeout``, ABORTED -> ``interrupted``, each with one ``error``
  event carrying the partial results; unfinished jobs (running ones too: the execution is over) are
  ``cancelled`` with the reason. Closing is the store's conditional update: a run already closed
  stays as it was, so a redelivered event is harmless. A run closed here gets what follows any
  close (:func:`zerg.runs.closing.after_close`).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from zerg.handler_input import parse_event
from zerg.runs import store as runs

if TYPE_CHECKING:
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)

DETAIL_TYPE = "Step Functions Execution Status Change"
SOURCE = "aws.states"
CLOSING = {"FAILED": "failed", "TIMED_OUT": "timeout", "ABORTED": "interrupted"}
_MESSAGE = {
    "FAILED": "run failed: its execution failed",
    "TIMED_OUT": "run timed out: its execution hit the state machine's TimeoutSeconds (the backstop above the run deadline)",
    "ABORTED": "interrupted: its execution was aborted",
}


class ExecutionDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")
    executionArn: str = Field(min_length=1)  # noqa: N815 (AWS's field names)
    stateMachineArn: str = Field(min_length=1)  # noqa: N815
    name: str = Field(min_length=1)
    status: Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"]
    input: str | None = None
    error: str | None = None
    cause: str | None = None


class ExecutionStatusChange(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    source: Literal["aws.states"]
    detail_type: Literal["Step Functions Execution Status Change"] = Field(alias="detail-type")
    detail: ExecutionDetail


def closing(status: str, error: str | None = None, cause: str | None = None) -> tuple[str, str] | None:
    """(run status, message) for an execution that ended ``status``; None when that needs no closing.
    Shared with the local runtime's sweep (:mod:`zerg.runs.orphans`), which watches its own engine."""
    if status not in CLOSING:
        return None
    why = ": ".join(p for p in (error, (cause or "")[:300]) if p)
    return CLOSING[status], _MESSAGE[status] + (f" ({why})" if why else "")


def is_execution_status_change(event: Any) -> bool:
    return isinstance(event, dict) and event.get("source") == SOURCE and event.get("detail-type") == DETAIL_TYPE


def _run_id(name: str) -> int | None:
    prefix, _, number = name.partition("-")
    return int(number) if prefix == "run" and number.isdigit() else None


def _input_owner(text: str | None) -> int | None:
    try:
        owner = json.loads(text or "").get("owner_id")
    except (ValueError, AttributeError):
        return None
    return owner if isinstance(owner, int) else None


def on_execution_status(rt: "Runtime", event: Any) -> dict[str, Any]:
    """Close the run of an execution that ended FAILED / TIMED_OUT / ABORTED; say what was done."""
    change = parse_event(ExecutionStatusChange, event, "execution status")
    detail = change.detail
    verdict = closing(detail.status, detail.error, detail.cause)
    run_id = _run_id(detail.name)
    ignored = {"run_id": run_id, "closed": False}
    if verdict is None:
        return {**ignored, "reason": f"execution {detail.status.lower()}: nothing to close"}
    if rt.settings.state_machine_arn and detail.stateMachineArn != rt.settings.state_machine_arn:
        return {**ignored, "reason": "another state machine's execution"}
    if run_id is None:
        return {**ignored, "reason": f"execution {detail.name!r} is not a run's"}
    with rt.pool.connection() as conn:
        run = runs.run_of_execution(conn, run_id, detail.executionArn, _input_owner(detail.input))
        if run is None:
            log.warning("execution %s names run %s, which is not that execution's", detail.executionArn, run_id)
            return {**ignored, "reason": "no run of this execution"}
        status, message = verdict
        closed = runs.fail_run(conn, run, status, message, cancel_running=True) is not None
    if closed:  # a background run's inbox item and alerts, a reply's answer: as any closer's
        from zerg.runs.closing import after_close

        after_close(rt, run)
    return {"run_id": run_id, "closed": closed, "status": status if closed else run["status"]}
