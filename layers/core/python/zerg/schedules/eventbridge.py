"""The scheduler port on AWS: one EventBridge Scheduler schedule per ``schedules`` row.

Invariants:
- The schedule of row N is ``zerg-sN`` in ZERG_SCHEDULE_GROUP; its only target is the ingress
  function (ZERG_SCHEDULE_TARGET_ARN) invoked as ZERG_SCHEDULER_ROLE_ARN with the fire's input
  (:func:`zerg.schedules.scheduler.fire_input`), a retry policy, and the dead-letter queue
  ZERG_SCHEDULE_DLQ_ARN. No flexible window: fires are on the minute.
- ``put`` is create-or-replace (UpdateSchedule replaces every field), so a retry after a partial
  failure converges. A rate schedule gets ``StartDate`` = the row's next fire, which anchors
  Scheduler's rate to the same instants as the ticker (see :mod:`zerg.schedules.expressions`).
- A one-off ``at`` schedule keeps ``ActionAfterCompletion`` NONE: the row outlives its fire (it
  shows when it fired), and the schedule is deleted with the row, never behind its back.
- Every provider failure leaves here as :class:`SchedulerUnavailable`, logged with its code.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from zerg.aws_clients import LazyClient
from zerg.ports import SchedulerUnavailable, fire_input, schedule_name

RETRY_POLICY = {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
TIMEOUT_S = 5.0


class EventBridgeScheduler:
    def __init__(self, group: str, *, role_arn: str, target_arn: str, dlq_arn: str, client: Any = None) -> None:
        self.group, self.role_arn, self.target_arn, self.dlq_arn = group, role_arn, target_arn, dlq_arn
        self._client = LazyClient("scheduler", timeout_s=TIMEOUT_S, attempts=3, client=client)

    @property
    def client(self) -> Any:
        return self._client.get()  # built once per runtime (the runtime caches this port)

    def _request(self, row: dict[str, Any]) -> dict[str, Any]:
        target = {"Arn": self.target_arn, "RoleArn": self.role_arn, "Input": json.dumps(fire_input(row["id"])),
                  "RetryPolicy": dict(RETRY_POLICY), "DeadLetterConfig": {"Arn": self.dlq_arn}}
        request: dict[str, Any] = {
            "Name": schedule_name(row["id"]), "GroupName": self.group,
            "ScheduleExpression": row["expression"], "ScheduleExpressionTimezone": row["timezone"],
            "FlexibleTimeWindow": {"Mode": "OFF"}, "State": "ENABLED" if row["enabled"] else "DISABLED",
            "Target": target, "ActionAfterCompletion": "NONE",
            "Description": f"zerg schedule {row['id']} ({row['kind']}) of owner {row['owner_id']}",
        }
        if row.get("rate") and row.get("next_fire_at") and row["next_fire_at"] > datetime.now(UTC):
            request["StartDate"] = row["next_fire_at"]
        return request

    def put(self, row: dict[str, Any]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        request = self._request(row)
        try:
            try:
                self.client.update_schedule(**request)
            except ClientError as exc:
                if _code(exc) != "ResourceNotFoundException":
                    raise
                try:
                    self.client.create_schedule(**request)
                except ClientError as again:
                    if _code(again) != "ConflictException":  # created meanwhile: replace it
                        raise
                    self.client.update_schedule(**request)
        except (ClientError, BotoCoreError) as exc:
            raise _unavailable("put", row["id"], exc) from None

    def delete(self, schedule_id: int) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_schedule(Name=schedule_name(schedule_id), GroupName=self.group)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise _unavailable("delete", schedule_id, exc) from None
        except BotoCoreError as exc:
            raise _unavailable("delete", schedule_id, exc) from None

    def describe(self, schedule_id: int) -> dict[str, Any] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            got = self.client.get_schedule(Name=schedule_name(schedule_id), GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException":
                return None
            raise _unavailable("describe", schedule_id, exc) from None
        except BotoCoreError as exc:
            raise _unavailable("describe", schedule_id, exc) from None
        target = got.get("Target") or {}
        return {"name": got["Name"], "expression": got["ScheduleExpression"],
                "timezone": got.get("ScheduleExpressionTimezone"), "state": got.get("State"),
                "input": json.loads(target.get("Input") or "null"), "target": target.get("Arn"),
                "role": target.get("RoleArn"), "retry_policy": target.get("RetryPolicy"),
                "dead_letter": (target.get("DeadLetterConfig") or {}).get("Arn"),
                "flexible_time_window": got.get("FlexibleTimeWindow"), "start_date": got.get("StartDate"),
                "group": got.get("GroupName")}


def _code(exc: Exception) -> str:
    return getattr(exc, "response", {}).get("Error", {}).get("Code", "")


def _unavailable(action: str, schedule_id: int, exc: Exception) -> SchedulerUnavailable:
    from zerg import observability

    observability.logger().warning("eventbridge scheduler call failed", extra={
        "action": action, "schedule_id": schedule_id, "reason": f"{type(exc).__name__}: {exc}"[:500]})
    return SchedulerUnavailable(f"EventBridge Scheduler refused or did not answer ({_code(exc) or type(exc).__name__})")
