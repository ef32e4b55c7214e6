"""``statemachines/run.asl.json`` executed by moto's Step Functions interpreter (the same engine
the local runtime uses), with small fakes standing in for the three functions.

What this pins down: the payload each function receives (ids only), the Plan -> Map -> Resume
loop, MaxConcurrencyPath (and its default), one crashed worker becoming ``mark_failed`` while
the Map goes on, a failed summary being ignored, transient Lambda errors being retried, and a
run-level failure calling the supervisor's ``fail`` action before the execution fails.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

ASL = (Path(__file__).resolve().parents[2] / "statemachines" / "run.asl.json").read_text()
FUNCTIONS = {"SupervisorFunctionArn": "supervisor", "WorkerFunctionArn": "worker",
             "SummaryFunctionArn": "summary"}
RUN = {"run_id": 7, "owner_id": 1, "thread_id": 3}


class Fakes:
    """Scripted functions; records every invocation and the Map's peak concurrency."""

    def __init__(self, plan_jobs=(1, 2, 3), second_round=(10, 11), crash_plan=False,
                 throttle_summary_once=False, hold=1, crash_remember=False, remember_error=None):
        self.calls: list[tuple[str, dict]] = []
        self.invocation_types: list[tuple[str | None, str | None]] = []
        self.crash_remember, self.remember_error = crash_remember, remember_error
        self.plan_jobs, self.second_round = list(plan_jobs), list(second_round)
        self.crash_plan, self.throttle_summary_once = crash_plan, throttle_summary_once
        self.rounds = 0
        self.active = self.peak = 0
        # Each worker waits until `hold` workers run at once (or its round has no one left to
        # start), so the peak reaches the Map's limit regardless of thread timing.
        self.hold = hold
        self.unstarted = [set(self.plan_jobs), set(self.second_round)]
        self.lock = threading.Condition()

    def supervisor(self, p):
        if p["action"] == "plan":
            if self.crash_plan:
                raise RuntimeError("planner exploded")
            return {"jobs": self.plan_jobs, "done": not self.plan_jobs}
        if p["action"] == "remember" and self.crash_remember:
            raise RuntimeError("episode writer exploded")
        if p["action"] == "resume":
            self.rounds += 1
            more = self.second_round if self.rounds == 1 else []
            return {"jobs": more, "done": not more}
        return {"ok": True}

    def worker(self, p):
        if p.get("action") == "mark_failed":
            return {"ok": True}
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            round_jobs = next(r for r in self.unstarted if p["job_id"] in r)
            round_jobs.discard(p["job_id"])
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.active >= self.hold or not round_jobs, timeout=120)  # a hang guard
        time.sleep(0.02)
        with self.lock:
            self.active -= 1
        if p["job_id"] == 2:
            raise ValueError("worker 2 crashed")
        return {"job_id": p["job_id"], "worker_id": f"w-{p['job_id']}", "status": "success", "approval_id": None,
                "approval_timeout_s": None}

    def summary(self, p):
        if p["job_id"] == 3:
            raise ValueError("summary 3 failed")
        return {"summary": "ok"}

    def invoke(self, backend, function_name, qualifier, body, headers, response_headers):
        from moto.core.exceptions import JsonRESTError

        name = function_name.rsplit(":", 1)[-1]
        payload = json.loads(body)
        if name == "summary" and self.throttle_summary_once:
            self.throttle_summary_once = False
            raise JsonRESTError("TooManyRequestsException", "Rate exceeded")
        with self.lock:
            self.calls.append((name, payload))
            self.invocation_types.append((payload.get("action"), headers.get("X-Amz-Invocation-Type")))
        if name == "supervisor" and payload["action"] == "remember" and self.remember_error:
            raise JsonRESTError(self.remember_error, "cannot queue it")
        try:
            result = getattr(self, name)(payload)
        except Exception as exc:  # what the Lambda runtime reports for an unhandled error
            response_headers["x-amz-function-error"] = "Unhandled"
            result = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}
        return json.dumps(result).encode()

    def called(self, name, action=None):
        return [p for n, p in self.calls if n == name and (action is None or p.get("action") == action)]


@pytest.fixture
def execute(monkeypatch):
    import boto3
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend

    def run(fakes: Fakes, execution_input: dict) -> dict:
        monkeypatch.setattr(LambdaSimpleBackend, "invoke",
                            lambda backend, *args: fakes.invoke(backend, *args))
        # moto 5.2.5 drops a lambda:invoke task's InvocationType (Step Functions passes it): let
        # it through, as the local engine does, so the Remember state is asked for what AWS does.
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_lambda as sfn_lambda)
        bindings = sfn_lambda._SUPPORTED_API_PARAM_BINDINGS
        monkeypatch.setitem(bindings, "invoke", {*bindings["invoke"], "InvocationType"})
        config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        with mock_aws(config=config):
            region = "us-east-1"
            role = boto3.client("iam", region_name=region).create_role(
                RoleName="run", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            lam = boto3.client("lambda", region_name=region)
            definition = ASL
            for placeholder, name in FUNCTIONS.items():  # moto ignores DefinitionSubstitutions
                arn = lam.create_function(FunctionName=name, Runtime="python3.12", Role=role,
                                          Handler="handler.handler", Code={"ZipFile": b"x"})["FunctionArn"]
                definition = definition.replace("${%s}" % placeholder, arn)
            sfn = boto3.client("stepfunctions", region_name=region)
            machine = sfn.create_state_machine(name="run", definition=definition, roleArn=role)
            execution = sfn.start_execution(stateMachineArn=machine["stateMachineArn"],
                                            name="run-7", input=json.dumps(execution_input))
            return wait_for(lambda: (desc := sfn.describe_execution(executionArn=execution["executionArn"]))["status"]
                            != "RUNNING" and desc, "the execution to finish", limit_s=180)

    return run


def test_rounds_fan_out_and_a_crashed_worker_becomes_a_failed_job(execute):
    fakes = Fakes(hold=2)
    desc = execute(fakes, {**RUN, "max_concurrency": 2})
    assert desc["status"] == "SUCCEEDED"
    assert [p["action"] for p in fakes.called("supervisor")] == ["plan", "resume", "resume", "finalize", "remember"]
    # no traceparent in the input (tracing off): every step gets an empty one
    assert all(p == {"action": p["action"], **RUN, "traceparent": ""} for p in fakes.called("supervisor"))
    work = [p for p in fakes.called("worker") if "action" not in p]
    assert sorted(p["job_id"] for p in work) == [1, 2, 3, 10, 11]
    assert all(set(p) == {"job_id", "run_id", "owner_id", "approval_timeout_s", "traceparent"} for p in work)
    (failed,) = fakes.called("worker", "mark_failed")
    assert {k: failed[k] for k in ("job_id", "run_id", "owner_id")} == {"job_id": 2, "run_id": 7, "owner_id": 1}
    assert failed["error"]["Error"] == "ValueError"
    assert json.loads(failed["error"]["Cause"])["errorMessage"] == "worker 2 crashed"
    # Summary runs only after a successful worker; its own failure (job 3) is ignored.
    assert sorted(p["job_id"] for p in fakes.called("summary")) == [1, 3, 10, 11]
    assert fakes.peak == 2
    assert len(desc["output"]) < 512, "state holds ids only"


def test_the_runs_traceparent_reaches_every_step_and_every_map_item(execute):
    traceparent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    fakes = Fakes(hold=2)
    assert execute(fakes, {**RUN, "max_concurrency": 2, "traceparent": traceparent})["status"] == "SUCCEEDED"
    steps = fakes.called("supervisor") + fakes.called("worker") + fakes.called("summary")
    assert {p["action"] for p in fakes.called("supervisor")} == {"plan", "resume", "finalize", "remember"}
    assert fakes.called("worker", "mark_failed") and len(fakes.called("summary")) == 4
    assert {p.get("traceparent") for p in steps} == {traceparent}  # the crashed worker's mark_failed too


def test_max_concurrency_defaults_to_five(execute):
    fakes = Fakes(plan_jobs=range(20, 32), second_round=(), hold=5)
    assert execute(fakes, RUN)["status"] == "SUCCEEDED"
    assert fakes.peak == 5


def test_plan_done_at_once_goes_straight_to_finalize(execute):
    fakes = Fakes(plan_jobs=())
    assert execute(fakes, {**RUN, "max_concurrency": 3})["status"] == "SUCCEEDED"
    assert [p["action"] for p in fakes.called("supervisor")] == ["plan", "finalize", "remember"]
    assert fakes.called("worker") == []


def test_transient_lambda_errors_are_retried(execute):
    fakes = Fakes(plan_jobs=(1,), second_round=(), throttle_summary_once=True)
    assert execute(fakes, {**RUN, "max_concurrency": 1})["status"] == "SUCCEEDED"
    assert [p["job_id"] for p in fakes.called("summary")] == [1]


def test_remember_is_an_event_invocation_after_finalize_and_never_fails_the_run(execute):
    fakes = Fakes(plan_jobs=())
    assert execute(fakes, RUN)["status"] == "SUCCEEDED"
    assert fakes.invocation_types[-2:] == [("finalize", None), ("remember", "Event")]
    for broken in (Fakes(plan_jobs=(), crash_remember=True),  # the function failed
                   Fakes(plan_jobs=(), remember_error="TooManyRequestsException"),  # retried, then caught
                   Fakes(plan_jobs=(), remember_error="ResourceNotFoundException")):  # could not even be queued
        desc = execute(broken, RUN)
        assert desc["status"] == "SUCCEEDED", desc
        assert [p["action"] for p in broken.called("supervisor")][:2] == ["plan", "finalize"]
        assert len(desc["output"]) < 512


def test_run_failure_reports_to_the_supervisor_then_fails(execute):
    fakes = Fakes(crash_plan=True)
    desc = execute(fakes, {**RUN, "max_concurrency": 5})
    assert desc["status"] == "FAILED" and desc["error"] == "RunFailed"
    (fail,) = fakes.called("supervisor", "fail")
    assert fakes.called("supervisor", "remember") == []  # only a finalized run is remembered
    assert {k: fail[k] for k in RUN} == RUN
    assert fail["error"]["Error"] == "RuntimeError"
    assert "planner exploded" in fail["error"]["Cause"]
