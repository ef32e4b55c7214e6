"""Callback tasks (``.waitForTaskToken``) on the local engine: what moto 5.2.5's interpreter does,
pinned (issue 27: an approval's wait is a workflow state, not a process).

Proven here, on minimal machines driven like the run machine (a ``lambda:invoke.waitForTaskToken``
task whose function receives ``$$.Task.Token``), top level and inside an INLINE Map iteration:
SendTaskSuccess resumes with its output; SendTaskFailure is caught with its own error and cause;
``TimeoutSecondsPath`` ends the wait with ``States.Timeout``; ``HeartbeatSeconds`` without a
heartbeat ends it with ``States.Timeout`` too (Step Functions says ``States.HeartbeatTimeout``:
moto differs); SendTaskHeartbeat is accepted by a task with ``HeartbeatSeconds`` only (moto raises InvalidToken
for one without; Step Functions accepts it); an answer to a token nothing waits on any more is
:class:`zerg.ports.TaskTokenGone`; StopExecution while waiting ends the execution ABORTED and its
waiting thread. No sleeps: each test waits for the token to be handed to the function.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.waiting import wait_for
from zerg.local.engine import LocalEngine
from zerg.ports import TaskTokenGone

FN = "arn:aws:lambda:us-east-1:123456789012:function:record"


def _wait_state(**extra):
    return {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": FN, "Payload": {"token.$": "$$.Task.Token", "id.$": "$.id"}},
        "TimeoutSecondsPath": "$.timeout_s", "ResultPath": "$.answer",
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
        "End": True, **extra,
    }


def _flat(**extra):
    return json.dumps({"StartAt": "Wait",
                       "States": {"Wait": _wait_state(**extra), "Caught": {"Type": "Pass", "End": True}}})


def _in_map(**extra):
    return json.dumps({"StartAt": "M", "States": {"M": {
        "Type": "Map", "ItemsPath": "$.ids",
        "ItemSelector": {"id.$": "$$.Map.Item.Value", "timeout_s.$": "$.timeout_s"},
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Wait",
                          "States": {"Wait": _wait_state(**extra), "Caught": {"Type": "Pass", "End": True}}},
        "End": True}}})


class Tokens:
    """The function the wait invokes: records each token it is handed, by id."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}
        self._cond = threading.Condition()

    def handler(self, event, context):
        with self._cond:
            self.tokens[event["id"]] = event["token"]
            self._cond.notify_all()
        return {"recorded": True}  # ignored: a callback task's output is what the token is answered with

    def of(self, key: str, timeout: float = 30.0) -> str:
        with self._cond:
            assert self._cond.wait_for(lambda: key in self.tokens, timeout), f"no token for {key}"
            return self.tokens[key]


@pytest.fixture
def machines():
    tokens = Tokens()
    defs = {"flat": _flat(), "map": _in_map(),
            "beat": _flat(HeartbeatSeconds=30), "missed": _flat(HeartbeatSeconds=1)}
    with LocalEngine(handlers={"record": tokens.handler}, definitions=defs) as engine:
        yield engine, tokens


def _output(desc):
    assert desc["status"] == "SUCCEEDED", desc
    return json.loads(desc["output"])


def test_send_task_success_resumes_with_its_output(machines):
    engine, tokens = machines
    arn = engine.start_named("flat", "ok", {"id": "ok", "timeout_s": 60})
    token = tokens.of("ok")
    assert engine.describe(arn)["status"] == "RUNNING"  # waiting: nothing answered yet
    engine.send_task_success(token, {"decision": "approved"})
    assert _output(engine.wait(arn, timeout=30))["answer"] == {"decision": "approved"}
    with pytest.raises(TaskTokenGone):  # single use: the wait is over
        engine.send_task_success(token, {"decision": "approved"})


def test_send_task_failure_is_caught_with_its_error_and_cause(machines):
    engine, tokens = machines
    arn = engine.start_named("flat", "no", {"id": "no", "timeout_s": 60})
    engine.send_task_failure(tokens.of("no"), "Zerg.Denied", "denied by the owner")
    assert _output(engine.wait(arn, timeout=30))["error"] == {"Error": "Zerg.Denied", "Cause": "denied by the owner"}


def test_each_map_iteration_waits_on_its_own_token(machines):
    engine, tokens = machines
    arn = engine.start_named("map", "two", {"ids": ["a", "b"], "timeout_s": 60})
    a, b = tokens.of("a"), tokens.of("b")
    assert a != b
    engine.send_task_failure(b, "Zerg.Denied", "no")
    engine.send_task_success(a, {"decision": "approved"})
    first, second = _output(engine.wait(arn, timeout=30))
    assert first["answer"] == {"decision": "approved"} and second["error"]["Error"] == "Zerg.Denied"


def test_timeout_seconds_path_ends_the_wait_with_states_timeout_and_the_token_is_gone(machines):
    engine, tokens = machines
    started = time.monotonic()
    arn = engine.start_named("map", "late", {"ids": ["late"], "timeout_s": 1})
    token = tokens.of("late")
    (item,) = _output(engine.wait(arn, timeout=30))
    assert item["error"]["Error"] == "States.Timeout"
    assert time.monotonic() - started >= 1.0  # the timeout, read from the input, ended it
    with pytest.raises(TaskTokenGone):  # the owner answering after the timeout
        engine.send_task_success(token, {"decision": "approved"})


def test_a_heartbeat_is_accepted_only_by_a_task_with_heartbeat_seconds(machines):
    engine, tokens = machines
    arn = engine.start_named("beat", "alive", {"id": "alive", "timeout_s": 60})
    token = tokens.of("alive")

    def beat() -> bool:  # moto sets the task's heartbeat up only after its function returned the token
        try:
            engine.send_task_heartbeat(token)
            return True
        except TaskTokenGone:
            return False

    wait_for(beat, "the task to accept a heartbeat", limit_s=30)
    engine.send_task_success(token, {"decision": "approved"})
    assert _output(engine.wait(arn, timeout=30))["answer"] == {"decision": "approved"}
    plain = engine.start_named("flat", "plain", {"id": "plain", "timeout_s": 60})
    with pytest.raises(TaskTokenGone):  # moto: InvalidToken; Step Functions accepts it
        engine.send_task_heartbeat(tokens.of("plain"))
    engine.send_task_success(tokens.of("plain"), {})
    engine.wait(plain, timeout=30)


def test_a_missed_heartbeat_ends_the_wait_as_states_timeout(machines):
    engine, tokens = machines
    arn = engine.start_named("missed", "missed", {"id": "missed", "timeout_s": 60})
    tokens.of("missed")
    assert _output(engine.wait(arn, timeout=30))["error"]["Error"] == "States.Timeout"  # AWS: States.HeartbeatTimeout


def test_an_unknown_token_is_gone():
    with LocalEngine(handlers={}, definitions={"flat": _flat()}) as engine:
        with pytest.raises(TaskTokenGone):
            engine.send_task_success("not-a-token", {})
        with pytest.raises(TaskTokenGone):
            engine.send_task_failure("not-a-token", "Zerg.Denied", "no")


@pytest.mark.parametrize("machine", ["flat", "map"])
def test_stopping_an_execution_that_waits_aborts_it_and_ends_the_wait(machines, machine):
    engine, tokens = machines
    arn = engine.start_named(machine, f"stop-{machine}", {"id": machine, "ids": [machine], "timeout_s": 3600})
    token = tokens.of(machine)
    engine.stop_execution(arn, "cancelled by the user")
    desc = engine.wait(arn, timeout=30)  # not the 3600 s timeout: the wait was ended
    assert desc["status"] == "ABORTED" and "error" not in desc
    with pytest.raises(TaskTokenGone):
        engine.send_task_success(token, {"decision": "approved"})
    assert not [t for t in threading.enumerate() if t.name.startswith("WaitForTaskToken")]


def test_the_moto_seam_stop_execution_reaches_is_still_there():
    """stop_execution answers the waiting tokens through the execution's callback pool (private)."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint, CallbackPoolManager

    pool = CallbackPoolManager(activity_store={})
    endpoint = pool.add("t")
    assert pool._pool == {"t": endpoint} and isinstance(endpoint, CallbackEndpoint)
    assert endpoint.get_outcome() is None and not endpoint._notify_event.is_set()


@pytest.mark.parametrize("code", ["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"])
def test_step_functions_answers_that_nothing_waits_become_task_token_gone(code):
    import boto3
    from botocore.stub import Stubber

    from zerg.runs.stepfunctions import StepFunctionsMachine

    client = boto3.client("stepfunctions", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    machine = StepFunctionsMachine("arn:aws:states:us-east-1:123456789012:stateMachine:zerg-run", client)
    with Stubber(client) as stub:
        stub.add_client_error("send_task_success", service_error_code=code)
        stub.add_client_error("send_task_failure", service_error_code="ThrottlingException")
        stub.add_response("send_task_heartbeat", {}, {"taskToken": "t"})
        with pytest.raises(TaskTokenGone):
            machine.send_task_success("t", {"decision": "approved"})
        with pytest.raises(Exception) as other:  # anything else is not "gone": it propagates
            machine.send_task_failure("t", "Zerg.Denied", "no")
        assert not isinstance(other.value, TaskTokenGone)
        machine.send_task_heartbeat("t")


def test_the_step_functions_adapter_answers_tokens_on_moto_step_functions(monkeypatch):
    """The AWS side of the port: boto3 against moto's Step Functions (``mock_aws`` executing the
    machine), answered through StepFunctionsMachine; "nothing waits" is TaskTokenGone there too."""
    import boto3
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from zerg.runs.stepfunctions import StepFunctionsMachine

    tokens = Tokens()

    def invoke(backend, function_name, qualifier, body, headers, response_headers):
        return json.dumps(tokens.handler(json.loads(body), None)).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        region = "us-east-1"
        role = boto3.client("iam", region_name=region).create_role(
            RoleName="run", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        fn = boto3.client("lambda", region_name=region).create_function(
            FunctionName="record", Runtime="python3.12", Role=role, Handler="handler.handler",
            Code={"ZipFile": b"x"})["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name=region)
        arn = sfn.create_state_machine(name="zerg-run", definition=_in_map().replace(FN, fn),
                                       roleArn=role)["stateMachineArn"]
        machine = StepFunctionsMachine(arn, client=sfn)

        def ended(execution_arn):
            deadline = time.monotonic() + 30  # a hang guard, not a measurement
            while (desc := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
                assert time.monotonic() < deadline, f"{execution_arn} still running"
                time.sleep(0.05)
            return desc

        run = machine.start_named("run-1", {"ids": ["a", "b"], "timeout_s": 60})
        machine.send_task_success(tokens.of("a"), {"decision": "approved"})
        machine.send_task_failure(tokens.of("b"), "Zerg.Denied", "denied by the owner")
        first, second = json.loads(ended(run)["output"])
        assert first["answer"] == {"decision": "approved"}
        # moto's API layer drops SendTaskFailure's cause (Step Functions keeps it): the resume reads
        # the decision from the database, never from the cause.
        assert second["error"]["Error"] == "Zerg.Denied" and second["error"]["Cause"] in (None, "denied by the owner")
        with pytest.raises(TaskTokenGone):
            machine.send_task_success(tokens.of("a"), {"decision": "approved"})
        with pytest.raises(TaskTokenGone):
            machine.send_task_failure("not-a-token", "Zerg.Denied", "no")
