"""Starting and stopping a run's execution: one port, two implementations.

- :class:`StepFunctionsStarter` (AWS): ``StartExecution`` with the run id as the execution name,
  so a duplicate start is rejected by Step Functions itself.
- :class:`LocalStarter`: the in-process :class:`~zerg.local_engine.LocalEngine` (same ASL).

Chosen by configuration: ``ZERG_STATE_MACHINE_ARN`` set means Step Functions.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from zerg.config import Settings


class RunStarter(Protocol):
    def start(self, run_id: int, owner_id: int, thread_id: int) -> str: ...

    def stop(self, execution_arn: str, cause: str) -> None: ...


def execution_name(run_id: int) -> str:
    return f"run-{run_id}"


class StepFunctionsStarter:
    def __init__(self, settings: Settings, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("stepfunctions")
        self.client = client
        self.settings = settings

    def start(self, run_id: int, owner_id: int, thread_id: int) -> str:
        payload = {"run_id": run_id, "owner_id": owner_id, "thread_id": thread_id,
                   "max_concurrency": self.settings.map_concurrency}
        # Same name and same input as a running execution: Step Functions returns that execution
        # (idempotent). ExecutionAlreadyExists means a different input reused the name: a real
        # conflict (e.g. a database reset reusing run ids), so it is raised, not papered over.
        return self.client.start_execution(
            stateMachineArn=self.settings.state_machine_arn, name=execution_name(run_id),
            input=json.dumps(payload, sort_keys=True),
        )["executionArn"]

    def stop(self, execution_arn: str, cause: str) -> None:
        self.client.stop_execution(executionArn=execution_arn, cause=cause[:256])


class LocalStarter:
    """One local engine per process, started on first use."""

    _engine: Any = None
    _lock = threading.Lock()
    _started: dict[int, str] = {}  # run id -> execution arn: starting twice returns the first

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @classmethod
    def engine(cls) -> Any:
        with cls._lock:
            if cls._engine is None:
                from zerg.local_engine import LocalEngine

                cls._engine = LocalEngine().start()
            return cls._engine

    @classmethod
    def shutdown(cls) -> None:
        with cls._lock:
            if cls._engine is not None:
                cls._engine.stop()
                cls._engine = None
            cls._started.clear()

    def start(self, run_id: int, owner_id: int, thread_id: int) -> str:
        engine = self.engine()
        with self._lock:
            if run_id not in self._started:
                self._started[run_id] = engine.start_execution(run_id, owner_id, thread_id, self.settings.map_concurrency)
            return self._started[run_id]

    def stop(self, execution_arn: str, cause: str) -> None:
        self.engine().stop_execution(execution_arn, cause)


def get_starter(settings: Settings) -> RunStarter:
    return StepFunctionsStarter(settings) if settings.state_machine_arn else LocalStarter(settings)
