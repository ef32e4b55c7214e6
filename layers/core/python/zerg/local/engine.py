"""The local engine: the state machines (``statemachines/run.asl.json``, and
``escalation.asl.json`` on first use) executed in-process by moto's Step Functions interpreter
(the LocalStack-derived engine moto ships), with the project's real handlers registered as the
Lambda functions. One engine per process runs every machine.

This is the only module that touches moto internals. It drives a private instance of moto's
Step Functions parser backend (``moto.stepfunctions.parser.models.StepFunctionsParserBackend``)
directly: no ``mock_aws``, no boto3 clients, no IAM, no moto Lambda backend. The seams (all checked by
``tests/test_local_engine.py``):

* ``lambda_eval_utils.boto_client_for(region=, service=, state_credentials=)``: the interpreter
  builds a boto3 Lambda client through it for every ``lambda:invoke`` task and calls
  ``client.invoke(FunctionName=..., Payload=bytes)``. We swap in a client that dispatches to our
  Python handlers and answers like Lambda (an unhandled exception becomes
  ``FunctionError: Unhandled`` with the Lambda error payload). An ``InvocationType: "Event"``
  call runs the handler on a background thread and answers 202 at once; :meth:`LocalEngine.stop`
  waits a bounded time for those threads.
* ``state_task_service_lambda._SUPPORTED_API_PARAM_BINDINGS``: moto passes a ``lambda:invoke``
  task's Parameters to ``client.invoke`` but drops those missing from this list, and moto 5.2.5
  lacks ``InvocationType`` (Step Functions supports it). We add it, so the Remember state's
  asynchronous invocation is asynchronous here too.
* ``ExecutionWorker._get_evaluation_entrypoint(self) -> program``: moto ANTLR-parses the
  definition at create_state_machine and again at every execution (~250 ms cold). We parse once
  per (definition, moto version), cache the pickled program on disk (``compiled_program``), and
  hand every execution a freshly unpickled copy of its machine's program (found by
  ``worker._evaluation_details.state_machine_details.arn``), so executions never share components.
* the module ``...state_task_service_batch``: the task-service factory imports every service
  integration, and the Batch one imports ``moto.batch`` -> ``moto.ec2`` (about 1-2.5 s of
  import: instance-type resources and three ``boto3.Session().get_available_regions`` calls).
  If it is not yet imported we register a stub; a Batch task in the ASL would fail with a
  clear error.

moto is pinned in pyproject.toml. Caveat: there is no ``mock_aws`` any more, so a boto3 call
made by a handler in this process would reach real AWS; the local runtime uses the local
artifact store and local notifier, so handlers make none.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import io
import json
import logging
import os
import pickle
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zerg.config import Settings
from zerg.runs.stepfunctions import execution_input, execution_name
from zerg.wiring import make_store

Handler = Callable[[dict[str, Any], Any], Any]

# How long stopping the engine waits for asynchronous (Event) invocations, e.g. the Remember step
# writing a run's episode after ``zerg run`` printed the answer: its model calls have their own
# timeouts, this bounds the exit should they all be slow. What is not done by then is dropped,
# harmlessly: the Remember step is idempotent and each of its writes is one transaction.
EVENT_WAIT_S = 20.0
# The error a stopped execution's waiting task tokens are answered with (see LocalEngine.stop_execution);
# not "States.*": moto refuses custom error names with that prefix.
STOPPED_ERROR = "Zerg.ExecutionStopped"
WAIT_NOTICE = "saving this run to memory… (Ctrl-C skips)"
REGION = "us-east-1"
ACCOUNT = "123456789012"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/zerg-local"
FUNCTION_KEYS = {"supervisor": "SupervisorFunctionArn", "worker": "WorkerFunctionArn", "summary": "SummaryFunctionArn"}
log = logging.getLogger("zerg.local.engine")

_SVC = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service."
_BATCH_MODULE = _SVC + "state_task_service_batch"


class EngineError(RuntimeError):
    pass


class LambdaContext:
    """The attributes handlers and Powertools read from a Lambda context."""

    def __init__(self, name: str) -> None:
        self.function_name = f"zerg-{name}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:zerg-{name}"
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


def _stub_batch_integration() -> None:
    """Keep moto.batch/moto.ec2 out of the import (the ASL has no Batch task)."""
    if _BATCH_MODULE in sys.modules:
        return
    stub = types.ModuleType(_BATCH_MODULE)

    class StateTaskServiceBatch:  # the factory only instantiates it for "arn:aws:states:::batch:*"
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise EngineError("the local engine does not support Batch tasks")

    stub.StateTaskServiceBatch = StateTaskServiceBatch  # type: ignore[attr-defined]
    sys.modules[_BATCH_MODULE] = stub


def _import_moto() -> None:
    """Import the pieces of moto the engine uses (about 0.6-0.8 s, mostly moto.core + boto3)."""
    if "moto.stepfunctions.parser.models" in sys.modules:
        return
    _stub_batch_integration()
    enabled = gc.isenabled()
    gc.disable()  # the import allocates ~1M objects: collections during it are wasted work
    try:
        import moto.stepfunctions.parser.backend.execution_worker  # noqa: F401
        import moto.stepfunctions.parser.models  # noqa: F401
    finally:
        gc.freeze()  # and never scan them again (saves ~60-90 ms of later gen-2 collections)
        if enabled:
            gc.enable()


def _memo(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return functools.lru_cache(maxsize=512)(parse)


def run_definition() -> str:
    from statemachines import definition as load

    return load("run")


def substitute(definition: str) -> str:
    for name, key in FUNCTION_KEYS.items():  # moto ignores DefinitionSubstitutions
        definition = definition.replace("${%s}" % key, f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}")
    if "${" in definition:
        raise EngineError("unresolved substitution left in the state machine definition")
    return definition


_prewarm_thread: threading.Thread | None = None


def prewarm(definition: str | None = None, cache_dir: Path | None = None) -> None:
    """Import moto and load the compiled ASL in a background thread; ``start`` joins it.

    Call it first thing in a command that will start an engine, so the ~0.7 s of imports
    overlaps the I/O the command does meanwhile (database connect, migrations, start_run).
    Importing needs the GIL, so this only wins what the main thread spends waiting on I/O.
    """
    global _prewarm_thread
    if _prewarm_thread is not None or LocalEngine._active is not None:
        return

    def work() -> None:
        try:
            _import_moto()
            compiled_program(substitute(definition or run_definition()), cache_dir)
        except Exception:  # start() redoes the work and raises
            log.debug("local engine prewarm failed", exc_info=True)

    _prewarm_thread = threading.Thread(target=work, name="zerg-engine-prewarm", daemon=True)
    _prewarm_thread.start()


_programs: dict[str, bytes] = {}
_CACHE_FORMAT = 1  # bump to invalidate cached programs


def compiled_program(definition: str, cache_dir: Path | None = None) -> bytes:
    """moto's evaluation program for ``definition``, pickled.

    ANTLR parsing the ASL costs ~250 ms cold in a fresh process (lexer/parser DFA warm-up), and
    moto would do it twice per process (create_state_machine validation + every execution). The
    program moto's Preprocessor builds is plain picklable objects, so we parse once per
    (definition, moto version), keep the pickle in ``cache_dir`` (the private 0700 data dir:
    a pickle is code, so it lives only where the sandboxed commands cannot write) and unpickle a
    fresh copy per execution. Without ``cache_dir`` the program is kept in memory only.
    """
    from importlib.metadata import version

    key = hashlib.sha256(f"{_CACHE_FORMAT}\0{version('moto')}\0{sys.version_info[:2]}\0{definition}".encode()).hexdigest()[:32]
    path = None if cache_dir is None else cache_dir / f"asl-{key}.pickle"
    cached = _read_cached(path) if path is not None else None
    blob = _programs.get(definition) or cached
    if blob is None:
        from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

        try:
            program, _ = AmazonStateLanguageParser.parse(definition)
        except Exception as exc:  # ASLParserException or a Preprocessor error: an invalid definition
            raise EngineError(f"invalid state machine definition: {exc!r}") from exc
        blob = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
    _programs[definition] = blob
    if path is not None and cached is None:  # missing or damaged: (re)write it
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(blob)
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("could not cache the compiled ASL at %s: %s", path, exc)
    return blob


def _read_cached(path: Path) -> bytes | None:
    """The cached program, or None: a missing, truncated or stale file is a miss, not an error."""
    try:
        blob = path.read_bytes()
        pickle.loads(blob)  # ~2 ms
    except Exception:
        return None
    return blob


class _LambdaClient:
    """What moto's interpreter needs of a boto3 Lambda client: ``invoke``.

    ``InvocationType: "Event"`` (an asynchronous invocation, e.g. the post-run Remember step) is
    honoured like Lambda does: the handler runs on a background thread and the call answers
    ``202`` with no payload at once; its outcome never reaches the execution."""

    def __init__(self, engine: "LocalEngine") -> None:
        self._engine = engine

    def invoke(self, FunctionName: str, Payload: Any = None, InvocationType: str = "RequestResponse",
               **_: Any) -> dict[str, Any]:
        if InvocationType == "Event":
            self._engine._dispatch_event(FunctionName, Payload)
            return {"StatusCode": 202, "Payload": io.BytesIO(b"")}
        body, error = self._engine._dispatch(FunctionName, Payload)
        response: dict[str, Any] = {"StatusCode": 200, "ExecutedVersion": "$LATEST", "Payload": io.BytesIO(body)}
        if error:
            response["FunctionError"] = error
        return response


class LocalEngine:
    """Start once per process; then ``start_execution`` / ``wait`` like Step Functions.

    The run machine is created at :meth:`start`; another machine (``escalation``) when its first
    execution starts (:meth:`start_named`), so a ``zerg run`` never pays for parsing it. ``definition``
    replaces the run machine's definition, ``definitions`` any machine's (tests)."""

    _active: "LocalEngine | None" = None

    def __init__(self, handlers: dict[str, Handler] | None = None, definition: str | None = None,
                 cache_dir: Path | None = None, definitions: dict[str, str] | None = None) -> None:
        from zerg import hosting

        hosting.mark_local_engine()  # handlers run in our threads: never Lambda's kill-all sweep
        self.handlers = handlers or default_handlers()
        self.definitions = dict(definitions or {})
        if definition is not None:
            self.definitions["run"] = definition
        self.definition = self.definitions.setdefault("run", run_definition())
        self.cache_dir = cache_dir
        self._backend: Any = None
        self._patches: list[tuple[Any, str, Any]] = []
        self.machine_arn: str | None = None  # the run machine's
        self._machines: dict[str, str] = {}  # machine name -> state machine arn
        self._programs: dict[str, bytes] = {}  # state machine arn -> its pickled program
        self.handler_seconds = 0.0  # time spent inside our handlers (for benchmarks)
        self._lock = threading.Lock()
        self._events: set[threading.Thread] = set()  # Event invocations still running
        self._stopped: set[str] = set()  # executions stopped by stop_execution

    # --- lifecycle ---------------------------------------------------------------------------
    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def start(self) -> "LocalEngine":
        if LocalEngine._active is not None:
            raise EngineError("a LocalEngine is already running in this process")
        thread = _prewarm_thread
        if thread is not None:
            thread.join()  # whatever it did not finish (or failed at) is redone below, raising here
        _import_moto()
        from moto.stepfunctions.parser.asl.component.common.path import result_path
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_lambda as sfn_lambda,
        )
        from moto.stepfunctions.parser.asl.utils import json_path
        from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        LocalEngine._active = self
        try:
            client = _LambdaClient(self)
            # moto re-parses every JSONPath on every evaluation, and jsonpath_ng builds a PLY
            # parser per parse (~1.7 ms each, ~10 per job). Parsed paths are immutable: memoize.
            self._patch(json_path, "parse", _memo(json_path.parse))
            self._patch(result_path, "parse", _memo(result_path.parse))
            self._patch(lambda_eval_utils, "boto_client_for", lambda *a, **k: client)
            bindings = dict(sfn_lambda._SUPPORTED_API_PARAM_BINDINGS)
            bindings["invoke"] = {*bindings["invoke"], "InvocationType"}
            self._patch(sfn_lambda, "_SUPPORTED_API_PARAM_BINDINGS", bindings)
            programs = self._programs
            self._patch(ExecutionWorker, "_get_evaluation_entrypoint",
                        lambda worker: pickle.loads(programs[worker._evaluation_details.state_machine_details.arn]))
            # A private backend (not the BackendDict, whose first use loads botocore's endpoint
            # data to list regions).
            self._backend = StepFunctionsParserBackend(REGION, ACCOUNT)
            self.machine_arn = self._create_machine("run")
        except Exception:
            self.stop()
            raise
        return self

    def _create_machine(self, name: str) -> str:
        """Create the state machine ``name`` (``zerg-{name}``) in the backend; its arn.
        StepFunctionBackend.create_state_machine: the definition was validated by compiled_program;
        the parser backend's override would ANTLR-parse it again."""
        from moto.stepfunctions.models import StepFunctionBackend

        if name not in self.definitions:
            from statemachines import definition as load

            self.definitions[name] = load(name)
        definition = substitute(self.definitions[name])
        blob = compiled_program(definition, self.cache_dir)
        arn = StepFunctionBackend.create_state_machine(
            self._backend, name=f"zerg-{name}", definition=definition, roleArn=ROLE_ARN).arn
        self._programs[arn] = blob
        self._machines[name] = arn
        return arn

    def machine(self, name: str) -> str:
        """The arn of the state machine ``name``, created on first use."""
        with self._lock:
            if self._backend is None:
                raise EngineError("engine not started")
            return self._machines.get(name) or self._create_machine(name)

    def stop(self, wait_s: float = EVENT_WAIT_S) -> None:
        """Stop the engine: first wait (up to ``wait_s``) for the Event invocations still running,
        so a command that prints its answer and exits still writes the run's memory."""
        self.drain(wait_s)
        while self._patches:
            owner, name, original = self._patches.pop()
            setattr(owner, name, original)
        if self._backend is not None:
            for machine_arn in self._machines.values():  # every machine's: an escalation waiting ends too
                for execution in self._backend.describe_state_machine(machine_arn).executions:
                    if execution.status == "RUNNING":
                        try:  # its thread may not have built its environment yet
                            execution.stop(stop_date=_now(), error="States.Aborted", cause="engine stopped")
                            self._wake_callbacks(execution, "engine stopped")  # a wait on a token ends too
                        except Exception:
                            log.debug("could not stop %s", execution.execution_arn, exc_info=True)
            self._backend = None
            self.machine_arn = None
            self._machines.clear()
            self._programs.clear()
        if LocalEngine._active is self:
            LocalEngine._active = None

    def __enter__(self) -> "LocalEngine":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- Lambda dispatch -------------------------------------------------------------------
    def _dispatch(self, function_name: str, body: Any) -> tuple[bytes, str | None]:
        name = function_name.rsplit(":", 1)[-1]
        handler = self.handlers.get(name)
        if handler is None:
            return json.dumps({"errorType": "ResourceNotFound", "errorMessage": f"no handler {name}"}).encode(), "Unhandled"
        start = time.perf_counter()
        try:
            event = json.loads(body) if body else {}
            result = handler(event, LambdaContext(name))
            return json.dumps(result, default=str).encode(), None
        except Exception as exc:  # what the Lambda runtime reports for an unhandled error
            log.warning("%s handler raised %s: %s", name, type(exc).__name__, exc)
            return json.dumps({
                "errorType": type(exc).__name__,
                "errorMessage": str(exc),
                "stackTrace": traceback.format_exception(exc)[-3:],
            }).encode(), "Unhandled"
        finally:
            with self._lock:
                self.handler_seconds += time.perf_counter() - start

    def _dispatch_event(self, function_name: str, body: Any) -> None:
        """An asynchronous invocation: the handler on its own thread; errors are only logged
        (Lambda would retry and then drop an Event invocation; nothing waits for it)."""

        def work() -> None:
            try:
                _, error = self._dispatch(function_name, body)
                if error:
                    log.warning("asynchronous invocation of %s failed (its result is dropped, as Lambda does)",
                                function_name.rsplit(":", 1)[-1])
            finally:
                with self._lock:
                    self._events.discard(threading.current_thread())

        thread = threading.Thread(target=work, name=f"zerg-event-{function_name.rsplit(':', 1)[-1]}", daemon=True)
        with self._lock:  # started under the lock: drain never sees (and joins) a thread not yet started
            self._events.add(thread)
            thread.start()

    def drain(self, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> bool:
        """Wait for the Event invocations running now (and any they start) to end; False when some
        were still running after ``timeout`` seconds (they go on, as daemon threads). ``on_wait``
        is called once, before waiting, if there is anything to wait for."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                running = next(iter(self._events), None)
            if running is None:
                return True
            if on_wait is not None:
                on_wait, notify = None, on_wait
                notify()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                log.warning("%d asynchronous invocation(s) still running after %.0f s; not waiting for them",
                            len(self._events), timeout)
                return False
            running.join(left)

    # --- executions ------------------------------------------------------------------------
    def start_execution(self, run_id: int, owner_id: int, thread_id: int, max_concurrency: int = 5,
                        approval_timeout_s: int | None = None, traceparent: str | None = None) -> str:
        """Start the run machine for ``run_id`` (``traceparent``: the run's trace context, zerg.tracing)."""
        payload = execution_input(run_id, owner_id, thread_id, max_concurrency, approval_timeout_s, traceparent)
        return self.start_named("run", execution_name(run_id), payload)

    def start_named(self, machine: str, name: str, payload: dict[str, Any]) -> str:
        """StartExecution of the state machine ``machine`` (``run``, ``escalation``): the execution
        arn. The same name with the same input returns that execution, as Step Functions does."""
        arn = self.machine(machine)
        return self._backend.start_execution(arn, name=name, execution_input=json.dumps(payload)).execution_arn

    def describe(self, execution_arn: str) -> dict[str, Any]:
        """The fields of DescribeExecution that callers read (status as a plain str)."""
        execution = self._backend.describe_execution(execution_arn)
        status = str(getattr(execution.status, "value", execution.status))
        desc: dict[str, Any] = {
            "executionArn": execution_arn, "stateMachineArn": execution.state_machine_arn, "name": execution.name,
            "status": status, "startDate": execution.start_date, "input": execution.execution_input,
        }
        if status == "FAILED" and execution_arn in self._stopped:  # see stop_execution
            status = "ABORTED"
            desc["status"] = status
        if status != "RUNNING":
            desc["stopDate"] = execution.stop_date
        if status == "SUCCEEDED" and execution.output is not None:
            desc["output"] = execution.output if isinstance(execution.output, str) else json.dumps(execution.output)
        if execution.error is not None and status != "ABORTED":
            desc["error"] = execution.error
        if execution.cause is not None:
            desc["cause"] = execution.cause
        return desc

    def stop_execution(self, execution_arn: str, cause: str = "cancelled") -> None:
        """StopExecution. moto only flags the program stopped; a task waiting on a token would go on
        waiting (its thread and the execution's RUNNING status) until its timeout, so its token is
        answered with :data:`STOPPED_ERROR` too (the execution then ends; :meth:`describe` reports it
        ABORTED, as Step Functions does)."""
        execution = self._backend.describe_execution(execution_arn)
        deadline = time.monotonic() + 5.0
        while True:
            try:
                execution.stop(stop_date=_now(), error=None, cause=cause)
                break
            except AttributeError:  # moto: its worker thread has not built its environment yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        with self._lock:
            self._stopped.add(execution_arn)
        self._wake_callbacks(execution, cause)

    @staticmethod
    def _wake_callbacks(execution: Any, cause: str) -> None:
        from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeFailure

        pool = execution.exec_worker.env.callback_pool_manager
        for endpoint in list(pool._pool.values()):  # every token of the execution (Map iterations share the pool)
            if endpoint.get_outcome() is None:
                endpoint.notify(CallbackOutcomeFailure(endpoint.callback_id, STOPPED_ERROR, cause))

    # --- callback tasks (zerg.ports.TaskTokens) ----------------------------------------------
    def send_task_success(self, token: str, output: dict[str, Any]) -> None:
        self._token_call("send_task_success", token, json.dumps(output, sort_keys=True))

    def send_task_failure(self, token: str, error: str, cause: str) -> None:
        self._token_call("send_task_failure", token, error, cause)

    def send_task_heartbeat(self, token: str) -> None:
        self._token_call("send_task_heartbeat", token)

    def _token_call(self, name: str, token: str, *args: Any) -> None:
        """moto's SendTask*: it raises InvalidToken, TaskTimedOut or TaskDoesNotExist as Step
        Functions does; each becomes :class:`zerg.ports.TaskTokenGone`. One difference, closed here:
        moto accepts an answer to a token whose task timed out while its execution still runs (the
        token stays in the pool), so a token is first checked against the waits still open."""
        from moto.stepfunctions.parser.api import InvalidToken, TaskDoesNotExist, TaskTimedOut

        from zerg.ports import TaskTokenGone

        if self._backend is None:
            raise EngineError("engine not started")
        if not self._waiting(token):
            raise TaskTokenGone("InvalidToken: nothing waits on this task token")
        try:
            getattr(self._backend, name)(token, *args)
        except (InvalidToken, TaskDoesNotExist, TaskTimedOut) as exc:
            raise TaskTokenGone(f"{type(exc).__name__}: nothing waits on this task token") from exc

    def _waiting(self, token: str) -> bool:
        """Whether a running execution's task still waits on ``token`` (not answered, not timed out)."""
        for machine_arn in list(self._machines.values()):
            for execution in self._backend.describe_state_machine(machine_arn).executions:
                worker = getattr(execution, "exec_worker", None)
                env = getattr(worker, "env", None)
                endpoint = None if env is None else env.callback_pool_manager.get(token)
                if endpoint is not None:
                    return (endpoint.get_outcome() is None and not endpoint._notify_event.is_set()
                            and str(getattr(execution.exec_status, "value", execution.exec_status)) == "RUNNING")
        return False

    def wait(self, execution_arn: str, timeout: float | None = None, poll: float = 0.01) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            desc = self.describe(execution_arn)
            if desc["status"] != "RUNNING":
                return desc
            if deadline is not None and time.monotonic() > deadline:
                raise EngineError(f"execution {execution_arn} still running after {timeout}s")
            time.sleep(poll)


def _now() -> Any:
    import datetime

    return datetime.datetime.now(tz=datetime.timezone.utc)


class LocalStarter:
    """The run starter of a locally hosted runtime: one engine, started on first use and stopped
    by :meth:`close` (``reset_runtime`` calls it).

    Each run it starts is first claimed for this process (``runs.executor``) and kept alive by a
    heartbeat, so an orphan sweep in any process can tell when this one is gone. Closing interrupts
    the runs it was still executing, with the reason, instead of leaving them to the next sweep."""

    def __init__(self, settings: Settings) -> None:
        from zerg.runs.executor import this_process

        self.settings = settings
        self.executor = this_process()
        self._engine: LocalEngine | None = None
        self._heartbeat: Any = None
        self._lock = threading.Lock()
        self._started: dict[int, str] = {}  # run id -> execution arn: starting twice returns the first
        self._causes: dict[str, str] = {}  # execution arn -> why we stopped it (moto does not keep it)
        self._waited = False  # finish_background ran: close does not wait for the Remember step again

    def _pool(self) -> Any:
        from zerg.db import get_pool

        return get_pool(self.settings)

    def engine(self) -> LocalEngine:
        with self._lock:
            if self._engine is None:
                from zerg.runs.executor import Heartbeat

                self._engine = LocalEngine(cache_dir=self.settings.data_dir / "cache").start()
                self._heartbeat = Heartbeat(self._pool(), self.executor).start()
            return self._engine

    def start(self, run_id: int, owner_id: int, thread_id: int, traceparent: str | None = None) -> str:
        from zerg.runs import store as runs

        engine = self.engine()
        with self._lock:
            if run_id not in self._started:
                with self._pool().connection() as conn:
                    runs.claim(conn, run_id, self.executor.token)
                self._started[run_id] = engine.start_execution(
                    run_id, owner_id, thread_id, self.settings.map_concurrency, self.settings.approval_timeout_s,
                    traceparent)
            return self._started[run_id]

    def execution_of(self, run_id: int) -> str | None:
        """The execution this starter started for ``run_id`` (None: not one of ours)."""
        with self._lock:
            return self._started.get(run_id)

    def ended_execution(self, run_id: int) -> dict[str, Any] | None:
        """DescribeExecution of this starter's execution of ``run_id`` once it is no longer running
        (None while it runs, or when it is not ours): what an execution-status event says on AWS."""
        with self._lock:
            arn, engine = self._started.get(run_id), self._engine
        if arn is None or engine is None:
            return None
        desc = engine.describe(arn)
        if desc["status"] == "RUNNING":
            return None
        return {**desc, "cause": desc.get("cause") or self._causes.get(arn)}

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the engine's asynchronous invocations (the Remember step) to end (see
        :meth:`LocalEngine.drain`); True at once when no engine was started."""
        with self._lock:
            engine = self._engine
        return True if engine is None else engine.drain(timeout)

    def finish_background(self, say: Callable[[str], None], timeout: float = EVENT_WAIT_S) -> bool:
        """For a command about to exit (``zerg run``): wait up to ``timeout`` for the asynchronous
        invocations (the run's Remember step), telling ``say`` :data:`WAIT_NOTICE` once if there is
        anything to wait for. Ctrl-C ends the wait. False when something was left running; either
        way :meth:`close` then does not wait again."""
        with self._lock:
            engine, self._waited = self._engine, True
        try:
            return True if engine is None else engine.drain(timeout, lambda: say(WAIT_NOTICE))
        except KeyboardInterrupt:  # skip: the Remember step is idempotent, its writes transactional
            return False

    def stop(self, execution_arn: str, cause: str) -> None:
        self._causes[execution_arn] = cause
        self.engine().stop_execution(execution_arn, cause)

    def send_task_success(self, token: str, output: dict[str, Any]) -> None:
        self.engine().send_task_success(token, output)

    def send_task_failure(self, token: str, error: str, cause: str) -> None:
        self.engine().send_task_failure(token, error, cause)

    def send_task_heartbeat(self, token: str) -> None:
        self.engine().send_task_heartbeat(token)

    def close(self) -> None:
        """Stop the engine (waiting up to :data:`EVENT_WAIT_S` for the Remember step, unless
        :meth:`finish_background` already did) without holding the starter's lock meanwhile."""
        with self._lock:
            engine, self._engine = self._engine, None
            heartbeat, self._heartbeat = self._heartbeat, None
            started, self._started, self._causes = list(self._started), {}, {}
        if engine is not None:
            engine.stop(0.0 if self._waited else EVENT_WAIT_S)
        if heartbeat is not None:
            heartbeat.stop()
        if started:
            self._interrupt(started)

    def _interrupt(self, run_ids: list[int]) -> None:
        """Close the runs this process still executed: their execution stopped with it."""
        from zerg.runs import store as runs
        from zerg.runs.orphans import close_run

        message = (f"interrupted: the process executing the run ({self.executor.describe()}) stopped "
                   "before it finished; partial results kept")
        try:
            pool = self._pool()
            with pool.connection() as conn:
                unfinished = runs.executed_by(conn, self.executor.token, run_ids)
                waiting = [r for r in runs.cancelled_awaiting_workers(conn)
                           if r["id"] in run_ids and r["executor"] == self.executor.token]
            for run in unfinished:
                close_run(pool, make_store(self.settings), run, "interrupted", message)
            for run in waiting:  # cancelled, its workers stopping with this process: end its events
                with pool.connection() as conn:
                    runs.finish_abandoned_cancel(conn, run["owner_id"], run["id"])
        except Exception as exc:  # e.g. the database is away: the next orphan sweep closes them
            log.warning("could not close the runs this process executed: %s: %s", type(exc).__name__, exc)
