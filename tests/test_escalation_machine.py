"""``statemachines/escalation.asl.json`` and the escalation starter port, with a scripted supervisor
function: the same contract under moto's Step Functions (``mock_aws``, the StepFunctions starter)
and under the local engine (the local starter).

What this pins down: the execution's name and input, the payload the Repeat step sends (ids only),
the Wait -> Repeat -> IsDone loop ending when the function answers done, a failing Repeat step
recorded through MarkFailed before the execution fails, and StopExecution aborting a waiting one.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.waiting import wait_for

ASL = (Path(__file__).resolve().parents[1] / "statemachines" / "escalation.asl.json").read_text()


class Supervisor:
    """The supervisor function as the escalation machine sees it: answers done after ``repeats``."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.repeats = 2
        self.crash = False
        self.lock = threading.Lock()

    def __call__(self, payload: dict) -> dict:
        with self.lock:
            self.calls.append(payload)
        if payload["action"] == "escalation_failed":
            return {"done": True}
        if self.crash:
            raise RuntimeError("database unreachable")
        mine = [c for c in self.calls if c["action"] == "escalate" and c["escalation_id"] == payload["escalation_id"]]
        return {"done": len(mine) >= self.repeats}

    def called(self, action: str, escalation_id: int) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["action"] == action and c["escalation_id"] == escalation_id]


@pytest.fixture(params=["local", "aws"])
def port(request, monkeypatch):
    """(starter, describe(arn) -> DescribeExecution, the scripted supervisor)."""
    supervisor = Supervisor()
    if request.param == "local":
        from zerg.alerts.escalation_starter import LocalEscalationStarter
        from zerg.local.engine import LocalEngine

        def handler(event, context):
            return supervisor(event)

        engine = LocalEngine(handlers={"supervisor": handler}).start()
        try:
            yield LocalEscalationStarter(lambda: SimpleNamespace(engine=lambda: engine)), engine.describe, supervisor
        finally:
            engine.stop()
        return

    import boto3
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from zerg import config
    from zerg.alerts.escalation_starter import StepFunctionsEscalationStarter

    def invoke(backend, function_name, qualifier, body, headers, response_headers):
        try:
            result = supervisor(json.loads(body))
        except Exception as exc:  # what the Lambda runtime reports for an unhandled error
            response_headers["x-amz-function-error"] = "Unhandled"
            result = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}
        return json.dumps(result).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        region = "us-east-1"
        role = boto3.client("iam", region_name=region).create_role(
            RoleName="escalation", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        arn = boto3.client("lambda", region_name=region).create_function(
            FunctionName="supervisor", Runtime="python3.12", Role=role, Handler="handler.handler",
            Code={"ZipFile": b"x"})["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name=region)
        machine = sfn.create_state_machine(  # moto ignores DefinitionSubstitutions
            name="zerg-escalation", definition=ASL.replace("${SupervisorFunctionArn}", arn), roleArn=role)
        monkeypatch.setenv("ZERG_ESCALATION_STATE_MACHINE_ARN", machine["stateMachineArn"])
        config.get_settings.cache_clear()
        starter = StepFunctionsEscalationStarter(config.get_settings(), client=sfn)
        yield starter, lambda execution_arn: sfn.describe_execution(executionArn=execution_arn), supervisor


def _stopped(starter, arn: str) -> bool:
    try:  # moto cannot stop an execution whose worker thread has not built its environment yet
        starter.stop(arn, "acknowledged")
    except AttributeError:
        return False
    return True


def _ended(describe, arn: str) -> dict:
    deadline = time.monotonic() + 30  # a hang guard, not a measurement
    while (desc := describe(arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"{arn} still running"
        time.sleep(0.05)
    return desc


def test_the_asl_is_valid_for_the_step_functions_parser():
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    program, _ = AmazonStateLanguageParser.parse(ASL.replace("${SupervisorFunctionArn}", "arn:aws:lambda:us-east-1:1:function:s"))
    assert program is not None
    asl = json.loads(ASL)
    assert "QueryLanguage" not in asl and "JSONata" not in ASL  # JSONPath only
    assert asl["TimeoutSeconds"] > 20 * 86400  # above the longest bounded escalation (20 repeats a day apart)


def test_the_escalation_repeats_until_the_function_says_done(port):
    starter, describe, supervisor = port
    arn = starter.start(5, owner_id=1, run_id=9, interval_s=1)
    assert arn.endswith(":esc-5")
    desc = _ended(describe, arn)
    assert desc["status"] == "SUCCEEDED"
    assert json.loads(desc["input"]) == {"owner_id": 1, "run_id": 9, "escalation_id": 5, "interval_s": 1}
    assert supervisor.called("escalate", 5) == [{"action": "escalate", "run_id": 9, "owner_id": 1, "escalation_id": 5}] * 2
    assert supervisor.called("escalation_failed", 5) == []


def test_a_failing_repeat_step_is_recorded_failed_before_the_execution_fails(port):
    starter, describe, supervisor = port
    supervisor.crash = True
    desc = _ended(describe, starter.start(6, owner_id=1, run_id=9, interval_s=0))
    assert desc["status"] == "FAILED" and desc["error"] == "EscalationFailed"
    (failed,) = supervisor.called("escalation_failed", 6)
    assert failed["error"]["Error"] == "RuntimeError" and failed["run_id"] == 9 and failed["owner_id"] == 1
    assert json.loads(failed["error"]["Cause"])["errorMessage"] == "database unreachable"


def test_stopping_a_waiting_escalation_aborts_it_before_any_repeat(port):
    starter, describe, supervisor = port
    arn = starter.start(7, owner_id=1, run_id=9, interval_s=3600)
    wait_for(lambda: _stopped(starter, arn), "the execution's worker to start, so moto can stop it")
    assert _ended(describe, arn)["status"] == "ABORTED"
    assert supervisor.called("escalate", 7) == []
