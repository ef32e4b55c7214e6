"""The one seam into moto's internals, pinned: an upgrade that breaks it fails here, loudly."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import version

import pytest

from zerg.local.engine import LocalEngine


def test_moto_is_the_pinned_version():
    assert version("moto") == "5.2.5", "the local engine integrates with moto internals: re-check local_engine.py"


def test_the_moto_seams_the_engine_patches_are_still_there():
    import importlib.util
    from pathlib import Path

    from moto.stepfunctions.models import StepFunctionBackend
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.utils import json_path
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    assert list(inspect.signature(lambda_eval_utils.boto_client_for).parameters) == ["region", "service", "state_credentials"]
    assert list(inspect.signature(ExecutionWorker._get_evaluation_entrypoint).parameters) == ["self"]
    from moto.stepfunctions.parser.asl.eval.evaluation_details import StateMachineDetails

    # the patched entry point finds its machine's program by worker._evaluation_details.state_machine_details.arn
    assert "arn" in inspect.signature(StateMachineDetails.__init__).parameters
    assert "state_machine_details" in inspect.signature(
        __import__("moto.stepfunctions.parser.asl.eval.evaluation_details", fromlist=["EvaluationDetails"])
        .EvaluationDetails.__init__).parameters
    assert list(inspect.signature(StepFunctionBackend.create_state_machine).parameters)[:4] == ["self", "name", "definition", "roleArn"]
    assert json_path.parse.__module__.startswith("jsonpath_ng") and result_path.parse.__module__.startswith("jsonpath_ng")
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_lambda

    assert {"FunctionName", "Payload"} <= state_task_service_lambda._SUPPORTED_API_PARAM_BINDINGS["invoke"]
    service = importlib.util.find_spec("moto.stepfunctions.parser.asl.component.state.exec.state_task.service")
    assert any((Path(p) / "state_task_service_batch.py").is_file() for p in service.submodule_search_locations)


def _handlers(calls):
    def supervisor(event, context):
        calls.append(("supervisor", event))
        if event["action"] == "plan":
            return {"jobs": [1, 2], "done": False}
        if event["action"] == "resume":
            return {"jobs": [], "done": True}
        return {"ok": True}

    def worker(event, context):
        calls.append(("worker", event))
        if event.get("action") == "mark_failed":
            return {"ok": True}
        if event["job_id"] == 2:
            raise RuntimeError("boom")
        return {"job_id": event["job_id"], "worker_id": "w", "status": "success", "approval_id": None,
                "approval_timeout_s": None}

    def summary(event, context):
        calls.append(("summary", event))
        assert context.function_name == "zerg-summary"
        return {}

    return {"supervisor": supervisor, "worker": worker, "summary": summary}


def test_the_real_asl_runs_and_exceptions_become_lambda_errors():
    calls: list = []
    with LocalEngine(handlers=_handlers(calls)) as engine:
        desc = engine.wait(engine.start_execution(9, 1, 3, max_concurrency=2), timeout=30)
    assert desc["status"] == "SUCCEEDED"
    assert [e["action"] for n, e in calls if n == "supervisor"] == ["plan", "resume", "finalize", "remember"]
    failed = [e for n, e in calls if n == "worker" and e.get("action") == "mark_failed"]
    assert len(failed) == 1 and failed[0]["error"]["Error"] == "RuntimeError"
    assert json.loads(failed[0]["error"]["Cause"])["errorMessage"] == "boom"
    assert engine.handler_seconds > 0


def test_an_event_invocation_answers_at_once_and_stopping_the_engine_waits_for_it():
    import threading

    calls: list = []
    handlers = _handlers(calls)
    plain, started, release = handlers["supervisor"], threading.Event(), threading.Event()

    def supervisor(event, context):
        if event["action"] != "remember":
            return plain(event, context)
        started.set()
        assert release.wait(30)
        calls.append(("remembered", event))
        return {"episode": "written"}

    handlers["supervisor"] = supervisor
    with LocalEngine(handlers=handlers) as engine:
        desc = engine.wait(engine.start_execution(9, 1, 3), timeout=30)
        # The execution ended while the remember handler was still blocked: it did not wait for it.
        assert desc["status"] == "SUCCEEDED" and started.wait(60)
        assert not any(n == "remembered" for n, _ in calls)
        assert engine.drain(timeout=0.01) is False
        release.set()
    assert ("remembered", {"action": "remember", "run_id": 9, "owner_id": 1, "thread_id": 3, "traceparent": ""}) in calls


def test_a_failing_event_invocation_never_fails_the_execution(caplog):
    calls: list = []
    handlers = _handlers(calls)
    plain = handlers["supervisor"]

    def supervisor(event, context):
        if event["action"] == "remember":
            raise RuntimeError("episode writer exploded")
        return plain(event, context)

    handlers["supervisor"] = supervisor
    with LocalEngine(handlers=handlers) as engine:
        assert engine.wait(engine.start_execution(9, 1, 3), timeout=30)["status"] == "SUCCEEDED"
        assert engine.drain(timeout=30)
    assert "asynchronous invocation of supervisor failed" in caplog.text


def test_only_one_engine_per_process():
    with LocalEngine(handlers=_handlers([])):
        with pytest.raises(RuntimeError, match="already running"):
            LocalEngine(handlers=_handlers([])).start()


def test_a_crash_while_recording_a_crash_still_does_not_fail_the_run():
    calls: list = []
    handlers = _handlers(calls)

    def worker(event, context):
        calls.append(("worker", event))
        raise RuntimeError("database unreachable")  # the run and the mark_failed call both fail

    handlers["worker"] = worker
    with LocalEngine(handlers=handlers) as engine:
        desc = engine.wait(engine.start_execution(10, 1, 3), timeout=30)
    assert desc["status"] == "SUCCEEDED"
    assert [e["action"] for n, e in calls if n == "supervisor"] == ["plan", "resume", "finalize", "remember"]


def test_failed_and_aborted_executions_and_a_run_with_no_jobs():
    import threading

    calls: list = []
    handlers = _handlers(calls)
    handlers["supervisor"] = lambda e, c: {"jobs": [], "done": True} if e["action"] == "plan" else {"ok": True}
    with LocalEngine(handlers=handlers) as engine:
        assert engine.wait(engine.start_execution(1, 1, 1), timeout=60)["status"] == "SUCCEEDED"

        def failing(event, context):
            raise ValueError("nope")

        handlers["supervisor"] = lambda e, c: failing(e, c) if e["action"] == "plan" else {"ok": True}
        desc = engine.wait(engine.start_execution(2, 1, 1), timeout=60)
        assert desc["status"] == "FAILED" and desc["error"] == "RunFailed", desc

        planning, release = threading.Event(), threading.Event()  # stopped while its first step runs
        handlers["supervisor"] = lambda e, c: (planning.set(), release.wait(60)) and {"jobs": [], "done": True}
        arn = engine.start_execution(3, 1, 1)
        assert planning.wait(60), "the execution never reached its first step"
        engine.stop_execution(arn, "cancelled by the user")
        release.set()
        assert engine.wait(arn, timeout=60)["status"] == "ABORTED"


def test_an_invalid_definition_is_refused_and_leaves_no_engine_behind():
    from zerg.local.engine import EngineError

    with pytest.raises(EngineError, match="invalid state machine definition"):
        LocalEngine(handlers=_handlers([]), definition='{"StartAt": "X", "States": {"X": {"Type": "Nope"}}}').start()
    assert LocalEngine._active is None


def test_the_compiled_definition_is_cached_in_the_private_data_dir(tmp_path):
    with LocalEngine(handlers=_handlers([]), cache_dir=tmp_path / "cache") as engine:
        assert engine.wait(engine.start_execution(4, 1, 1), timeout=30)["status"] == "SUCCEEDED"
    cached = list((tmp_path / "cache").glob("asl-*.pickle"))
    assert len(cached) == 1
    good = cached[0].read_bytes()
    cached[0].write_bytes(b"not a pickle")  # a damaged cache is a miss, never an error, and is rewritten
    with LocalEngine(handlers=_handlers([]), cache_dir=tmp_path / "cache") as engine:
        assert engine.wait(engine.start_execution(5, 1, 1), timeout=30)["status"] == "SUCCEEDED"
    assert cached[0].read_bytes() == good


def test_one_engine_runs_the_run_machine_and_the_escalation_machine_side_by_side():
    """The escalation machine is created on first use, next to the run machine, and each execution
    gets its own machine's program; stopping the engine aborts a waiting escalation too."""
    calls: list = []
    handlers = _handlers(calls)
    plain, repeats = handlers["supervisor"], []

    def supervisor(event, context):
        if event["action"] == "escalate":
            repeats.append(event)
            return {"done": len(repeats) >= 2}
        return plain(event, context)

    handlers["supervisor"] = supervisor
    with LocalEngine(handlers=handlers) as engine:
        esc = engine.start_named("escalation", "esc-5", {"owner_id": 1, "run_id": 9, "escalation_id": 5, "interval_s": 0})
        run = engine.start_execution(9, 1, 3)
        assert engine.wait(esc, timeout=30)["status"] == "SUCCEEDED"
        assert engine.wait(run, timeout=30)["status"] == "SUCCEEDED"
        assert engine.describe(esc)["stateMachineArn"].endswith(":zerg-escalation")
        assert engine.describe(run)["stateMachineArn"] == engine.machine_arn
        waiting_input = {"owner_id": 1, "run_id": 9, "escalation_id": 6, "interval_s": 3600}
        waiting = engine.start_named("escalation", "esc-6", waiting_input)
        assert engine.start_named("escalation", "esc-6", waiting_input) == waiting  # running, same input: the same one
    assert repeats == [{"action": "escalate", "run_id": 9, "owner_id": 1, "escalation_id": 5}] * 2
    assert [e["action"] for n, e in calls if n == "supervisor"] == ["plan", "resume", "finalize", "remember"]
    assert waiting.endswith(":esc-6")  # and the engine stopped without waiting an hour for it
