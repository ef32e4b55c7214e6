"""Starting and stopping a run's execution: one port, two implementations.

- :class:`StepFunctionsStarter` (AWS): ``StartExecution`` with the run id as the execution name,
  so a duplicate start is rejected by Step Functions itself.
- ``zerg.local.engine.LocalStarter``: the in-process local engine running the same ASL (only in
  a local install; the Lambda layer does not ship it).

The port is :class:`zerg.ports.RunStarter`, chosen by configuration (:func:`zerg.wiring.make_starter`):
``ZERG_STATE_MACHINE_ARN`` set means Step Functions.
The runtime owns the one starter of a process (``rt.starter``).
"""

from __future__ import annotations

import json
from typing import Any

from zerg.config import Settings

# What Step Functions answers a task token nothing waits on any more (timed out, execution ended, unknown).
TOKEN_GONE = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})


def execution_name(run_id: int) -> str:
    return f"run-{run_id}"


def execution_input(run_id: int, owner_id: int, thread_id: int, max_concurrency: int,
                    approval_timeout_s: int | None = None, traceparent: str | None = None) -> dict[str, Any]:
    """What the run state machine starts with: ids only (Step Functions' 256 KiB limit), how long
    a tool call may wait for the owner's approval (absent: the ASL's default, 1 h) and the run's
    trace context (``""`` while tracing is off: always present, so the ASL's default for an input
    without one, an execution started elsewhere, is never needed here)."""
    payload: dict[str, Any] = {"run_id": run_id, "owner_id": owner_id, "thread_id": thread_id,
                               "max_concurrency": max_concurrency}
    if approval_timeout_s is not None:
        payload["approval_timeout_s"] = approval_timeout_s
    payload["traceparent"] = traceparent or ""
    return payload


class StepFunctionsMachine:
    """The executions of one state machine (runs', escalations'): started by name, stopped by ARN."""

    def __init__(self, state_machine_arn: str | None, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("stepfunctions")
        self.client = client
        self.state_machine_arn = state_machine_arn

    def start_named(self, name: str, payload: dict[str, Any]) -> str:
        # Same name and same input as a running execution: Step Functions returns that execution
        # (idempotent). ExecutionAlreadyExists means a different input reused the name: a real
        # conflict (e.g. a database reset reusing run ids), so it is raised, not papered over.
        return self.client.start_execution(
            stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(payload, sort_keys=True),
        )["executionArn"]

    def stop(self, execution_arn: str, cause: str) -> None:
        self.client.stop_execution(executionArn=execution_arn, cause=cause[:256])

    # --- the task tokens of callback tasks (zerg.ports.TaskTokens) ---
    def send_task_success(self, token: str, output: dict[str, Any]) -> None:
        self._token_call(self.client.send_task_success, taskToken=token, output=json.dumps(output, sort_keys=True))

    def send_task_failure(self, token: str, error: str, cause: str) -> None:
        self._token_call(self.client.send_task_failure, taskToken=token, error=error[:256], cause=cause[:32768])

    def send_task_heartbeat(self, token: str) -> None:
        self._token_call(self.client.send_task_heartbeat, taskToken=token)

    @staticmethod
    def _token_call(call: Any, **kwargs: Any) -> None:
        from botocore.exceptions import ClientError

        from zerg.ports import TaskTokenGone

        try:
            call(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in TOKEN_GONE:
                raise TaskTokenGone(f"{code}: nothing waits on this task token") from exc
            raise


class StepFunctionsStarter(StepFunctionsMachine):
    def __init__(self, settings: Settings, client: Any = None) -> None:
        super().__init__(settings.state_machine_arn, client)
        self.settings = settings

    def start(self, run_id: int, owner_id: int, thread_id: int, traceparent: str | None = None) -> str:
        return self.start_named(execution_name(run_id), execution_input(
            run_id, owner_id, thread_id, self.settings.map_concurrency, self.settings.approval_timeout_s, traceparent))

    def close(self) -> None:
        pass
