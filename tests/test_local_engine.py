"""The one seam into moto's internals, pinned: an upgrade that breaks it fails here, loudly."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import version

import pytest

from zerg.local.engine import LocalEngine


def test_moto_is_the_pinned_version():
    assert version("moto") == "5.2.5", "the local engine integrates with moto internals: re-check local_engine.py"


def test_lambda_simple_backend_invoke_has_the_signature_we_replace():
    from moto.awslambda_simple.models import LambdaSimpleBackend

    params = list(inspect.signature(LambdaSimpleBackend.invoke).parameters)
    assert params == ["self", "function_name", "qualifier", "body", "headers", "response_headers"]


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
        return {"job_id": event["job_id"], "worker_id": "w", "status": "success"}

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
    assert [e["action"] for n, e in calls if n == "supervisor"] == ["plan", "resume", "finalize"]
    failed = [e for n, e in calls if n == "worker" and e.get("action") == "mark_failed"]
    assert len(failed) == 1 and failed[0]["error"]["Error"] == "RuntimeError"
    assert json.loads(failed[0]["error"]["Cause"])["errorMessage"] == "boom"
    assert engine.handler_seconds > 0


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
    assert [e["action"] for n, e in calls if n == "supervisor"] == ["plan", "resume", "finalize"]
