"""AWS: EventBridge's "Step Functions Execution Status Change" events reach the ingress handler,
which closes the run of an execution that failed, timed out or was aborted, as the orphan reaper
closes a local one. The events have the shape EventBridge delivers (one per status change)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.factories import make_job, make_run, run_events
from zerg.handler_input import InvalidEvent
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.timestamps import utcnow

REGION, ACCOUNT = "us-east-1", "123456789012"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:zerg-test-run"


def execution_arn(run_id: int) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT}:execution:zerg-test-run:run-{run_id}"


def status_change(run_id: int, owner_id: int, status: str, *, error=None, cause=None, machine=MACHINE,
                  name=None) -> dict:
    """The event as EventBridge delivers it to a Lambda target (default bus, source aws.states)."""
    arn = execution_arn(run_id)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT,
        "time": "2026-05-04T10:15:30Z",
        "region": REGION,
        "resources": [arn],
        "detail": {
            "executionArn": arn,
            "stateMachineArn": machine,
            "name": name or f"run-{run_id}",
            "status": status,
            "startDate": 1777889130000,
            "stopDate": 1777892730000,
            "input": json.dumps({"run_id": run_id, "owner_id": owner_id, "thread_id": 1, "max_concurrency": 5},
                                sort_keys=True),
            "inputDetails": {"included": True},
            "output": None,
            "outputDetails": None,
            "error": error,
            "cause": cause,
            "redriveCount": 0,
            "redriveStatus": "NOT_REDRIVABLE",
            "redriveStatusReason": "Execution is TIMED_OUT and cannot be redriven",
        },
    }


def handle(event):
    from functions.events.handler import handler

    return handler(event, None)


@pytest.fixture
def aws_rt(runtime_env):
    return runtime_env(ZERG_STATE_MACHINE_ARN=MACHINE)


def running_run(pool, owner, *, record_arn=True):
    run_id, _ = make_run(pool, owner, "an AWS run")
    if record_arn:
        with pool.connection() as conn:
            runs.set_execution_arn(conn, run_id, execution_arn(run_id))
    return run_id


@pytest.mark.parametrize(("status", "closed_as", "message"), [
    ("TIMED_OUT", "timeout", "run timed out: its execution hit the state machine's TimeoutSeconds"),
    ("ABORTED", "interrupted", "interrupted: its execution was aborted"),
    ("FAILED", "failed", "run failed: its execution failed"),
])
def test_an_execution_that_ended_badly_closes_its_run_with_the_partial_results(aws_rt, pool, owner, status, closed_as, message):
    run_id = running_run(pool, owner)
    running, queued = make_job(pool, owner, run_id, "running one"), make_job(pool, owner, run_id, "queued one")
    with pool.connection() as conn:
        jobs.mark_started(conn, running, f"w-{run_id}", utcnow())
    out = handle(status_change(run_id, owner, status, error="States.Timeout" if status == "TIMED_OUT" else None))
    assert out == {"run_id": run_id, "closed": True, "status": closed_as}
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, run_id)
        rows = jobs.run_jobs(conn, owner, run_id)
    assert run["status"] == closed_as and run["error"].startswith(message)
    assert [(r["status"], r["error"]) for r in rows] == [("cancelled", run["error"])] * 2  # the execution is over
    kind, payload = run_events(pool, run_id)[-1]
    assert kind == "error"
    assert payload == {"run_id": run_id, "status": closed_as, "message": run["error"], "partial": [
        {"job_id": running, "status": "cancelled", "summary": None},
        {"job_id": queued, "status": "cancelled", "summary": None}]}


def test_a_run_the_state_machine_already_closed_stays_as_it_was(aws_rt, pool, owner):
    run_id = running_run(pool, owner)
    with pool.connection() as conn:
        runs.cancel_run(conn, owner, run_id)  # the cancel stopped the execution: ABORTED follows
    before = run_events(pool, run_id)
    out = handle(status_change(run_id, owner, "ABORTED"))
    assert out == {"run_id": run_id, "closed": False, "status": "cancelled"}
    assert handle(status_change(run_id, owner, "ABORTED"))["closed"] is False  # a redelivery too
    assert run_events(pool, run_id) == before


def test_a_run_whose_arn_was_never_recorded_is_matched_by_the_owner_in_the_input(aws_rt, pool, owner, other_owner):
    run_id = running_run(pool, owner, record_arn=False)
    assert handle(status_change(run_id, other_owner, "TIMED_OUT"))["closed"] is False  # not theirs
    assert handle(status_change(run_id, owner, "TIMED_OUT"))["closed"] is True


def test_events_naming_another_owners_run_or_another_machine_change_nothing(aws_rt, pool, owner, other_owner):
    theirs = running_run(pool, other_owner)
    event = status_change(theirs, owner, "ABORTED")
    event["detail"]["executionArn"] = execution_arn(theirs) + "-forged"  # not the execution the run recorded
    assert handle(event)["closed"] is False
    assert handle(status_change(theirs, other_owner, "ABORTED", machine=MACHINE + "-other"))["closed"] is False
    assert handle(status_change(theirs, other_owner, "SUCCEEDED"))["closed"] is False
    assert handle(status_change(theirs, other_owner, "ABORTED", name="nightly-report"))["closed"] is False
    with pool.connection() as conn:
        assert runs.get_run(conn, other_owner, theirs)["status"] == "running"
    assert [k for k, _ in run_events(pool, theirs)] == []


def test_a_malformed_status_event_is_refused_before_anything_is_touched(aws_rt):
    with pytest.raises(InvalidEvent, match="invalid execution status event: detail.executionArn: Field required"):
        handle({"source": "aws.states", "detail-type": "Step Functions Execution Status Change",
                "detail": {"status": "FAILED", "stateMachineArn": MACHINE, "name": "run-1"}})
    with pytest.raises(InvalidEvent, match="detail-type"):
        handle({"source": "aws.states", "detail-type": "Step Functions State Machine Updated", "detail": {}})
