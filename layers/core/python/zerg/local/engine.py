"""The local engine: ``statemachines/run.asl.json`` executed in-process by moto's Step Functions
interpreter (the LocalStack-derived engine moto ships), with the project's real handlers
registered as the Lambda functions.

This is the only module that touches moto internals. The integration point is
``moto.awslambda_simple.models.LambdaSimpleBackend.invoke(self, function_name, qualifier, body,
headers, response_headers)``: with ``lambda.use_docker = False`` moto routes every Lambda
invoke there, and we dispatch it to our Python handlers (an unhandled exception becomes the
``x-amz-function-error: Unhandled`` response a real Lambda gives). moto is pinned in
pyproject.toml; ``tests/test_local_engine.py`` fails loudly if an upgrade breaks this seam.

Caveat: while the engine runs, moto's mock is active for the whole process, so boto3 calls made
in this process go to moto. The local runtime uses the local artifact store and local notifier,
so nothing real is reached through boto3 here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from zerg.config import Settings
from zerg.runs.starter import execution_input, execution_name

Handler = Callable[[dict[str, Any], Any], Any]

REGION = "us-east-1"
FUNCTION_KEYS = {"supervisor": "SupervisorFunctionArn", "worker": "WorkerFunctionArn", "summary": "SummaryFunctionArn"}
log = logging.getLogger("zerg.local_engine")


class EngineError(RuntimeError):
    pass


class LambdaContext:
    """The attributes handlers and Powertools read from a Lambda context."""

    def __init__(self, name: str) -> None:
        self.function_name = f"zerg-{name}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:zerg-{name}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = "local"
        self.log_group_name = f"/aws/lambda/zerg-{name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def default_handlers() -> dict[str, Handler]:
    from functions.summary.handler import handler as summary
    from functions.supervisor.handler import handler as supervisor
    from functions.worker.handler import handler as worker

    return {"supervisor": supervisor, "worker": worker, "summary": summary}


class LocalEngine:
    """Start once per process; then ``start_execution`` / ``wait`` like Step Functions."""

    _active: "LocalEngine | None" = None

    def __init__(self, handlers: dict[str, Handler] | None = None, definition: str | None = None) -> None:
        self.handlers = handlers or default_handlers()
        if definition is None:
            from statemachines import definition as load

            definition = load("run")
        self.definition = definition
        self._mock: Any = None
        self._original_invoke: Any = None
        self._sfn: Any = None
        self.machine_arn: str | None = None
        self.handler_seconds = 0.0  # time spent inside our handlers (for benchmarks)
        self._lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "LocalEngine":
        import boto3
        from moto import mock_aws
        from moto.awslambda_simple.models import LambdaSimpleBackend

        if LocalEngine._active is not None:
            raise EngineError("a LocalEngine is already running in this process")
        self._mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}})
        self._mock.start()
        self._original_invoke = LambdaSimpleBackend.invoke
        engine = self

        def invoke(backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any) -> bytes:
            return engine._dispatch(function_name, body, response_headers)

        LambdaSimpleBackend.invoke = invoke
        LocalEngine._active = self
        try:
            iam = boto3.client("iam", region_name=REGION)
            role = iam.create_role(RoleName="zerg-local", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            lam = boto3.client("lambda", region_name=REGION)
            definition = self.definition
            for name, key in FUNCTION_KEYS.items():
                arn = lam.create_function(
                    FunctionName=name, Runtime="python3.12", Role=role, Handler="handler.handler",
                    Code={"ZipFile": b"in-process"},
                )["FunctionArn"]
                definition = definition.replace("${%s}" % key, arn)  # moto ignores DefinitionSubstitutions
            if "${" in definition:
                raise EngineError("unresolved substitution left in the state machine definition")
            self._sfn = boto3.client("stepfunctions", region_name=REGION)
            self.machine_arn = self._sfn.create_state_machine(
                name="zerg-run", definition=definition, roleArn=role)["stateMachineArn"]
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        from moto.awslambda_simple.models import LambdaSimpleBackend

        if self._original_invoke is not None:
            LambdaSimpleBackend.invoke = self._original_invoke
            self._original_invoke = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if LocalEngine._active is self:
            LocalEngine._active = None

    def __enter__(self) -> "LocalEngine":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- Lambda dispatch -------------------------------------------------------------------
    def _dispatch(self, function_name: str, body: Any, response_headers: dict[str, str]) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        handler = self.handlers.get(name)
        if handler is None:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": "ResourceNotFound", "errorMessage": f"no handler {name}"}).encode()
        start = time.perf_counter()
        try:
            event = json.loads(body) if body else {}
            result = handler(event, LambdaContext(name))
            return json.dumps(result, default=str).encode()
        except Exception as exc:  # what the Lambda runtime reports for an unhandled error
            log.warning("%s handler raised %s: %s", name, type(exc).__name__, exc)
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({
                "errorType": type(exc).__name__,
                "errorMessage": str(exc),
                "stackTrace": traceback.format_exception(exc)[-3:],
            }).encode()
        finally:
            with self._lock:
                self.handler_seconds += time.perf_counter() - start

    # --- executions ------------------------------------------------------------------------
    def start_execution(self, run_id: int, owner_id: int, thread_id: int, max_concurrency: int = 5) -> str:
        if self._sfn is None:
            raise EngineError("engine not started")
        payload = execution_input(run_id, owner_id, thread_id, max_concurrency)
        return self._sfn.start_execution(
            stateMachineArn=self.machine_arn, name=execution_name(run_id), input=json.dumps(payload))["executionArn"]

    def describe(self, execution_arn: str) -> dict[str, Any]:
        return self._sfn.describe_execution(executionArn=execution_arn)

    def stop_execution(self, execution_arn: str, cause: str = "cancelled") -> None:
        self._sfn.stop_execution(executionArn=execution_arn, cause=cause)

    def wait(self, execution_arn: str, timeout: float | None = None, poll: float = 0.05) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            desc = self.describe(execution_arn)
            if desc["status"] != "RUNNING":
                return desc
            if deadline is not None and time.monotonic() > deadline:
                raise EngineError(f"execution {execution_arn} still running after {timeout}s")
            time.sleep(poll)


class LocalStarter:
    """The run starter of a locally hosted runtime: one engine, started on first use and stopped
    by :meth:`close` (``reset_runtime`` calls it)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._engine: LocalEngine | None = None
        self._lock = threading.Lock()
        self._started: dict[int, str] = {}  # run id -> execution arn: starting twice returns the first

    def engine(self) -> LocalEngine:
        with self._lock:
            if self._engine is None:
                self._engine = LocalEngine().start()
            return self._engine

    def start(self, run_id: int, owner_id: int, thread_id: int) -> str:
        engine = self.engine()
        with self._lock:
            if run_id not in self._started:
                self._started[run_id] = engine.start_execution(run_id, owner_id, thread_id, self.settings.map_concurrency)
            return self._started[run_id]

    def stop(self, execution_arn: str, cause: str) -> None:
        self.engine().stop_execution(execution_arn, cause)

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.stop()
                self._engine = None
            self._started.clear()
