"""The scheduler port's contract, run against both implementations: EventBridge Scheduler (moto)
and the local rows the ticker reads. What a port must do: put then describe shows the row's
expression, time zone, state and the fire's input; a second put changes them; once the row is
deleted, delete removes what fires it, and deleting twice is fine."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from zerg.ports import SCHEDULED_TIME, Scheduler
from zerg.schedules import store
from zerg.schedules.expressions import parse_when
from zerg.schedules.scheduler import LocalScheduler

GROUP = "zerg-contract"


@pytest.fixture(params=["local", "eventbridge"])
def port(request: pytest.FixtureRequest, pool) -> Iterator[Scheduler]:
    if request.param == "local":
        yield LocalScheduler(lambda: pool)
        return
    import boto3
    from moto import mock_aws

    from zerg.schedules.eventbridge import EventBridgeScheduler

    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name=GROUP)
        yield EventBridgeScheduler(GROUP, role_arn="arn:aws:iam::123456789012:role/zerg-scheduler",
                                   target_arn="arn:aws:lambda:us-east-1:123456789012:function:zerg-ingress",
                                   dlq_arn="arn:aws:sqs:us-east-1:123456789012:zerg-schedule-dlq", client=client)


def _row(conn, owner_id: int, **expression) -> dict:
    when = parse_when(**expression)
    return store.create(conn, owner_id, kind="check", name="contract", task="check the disks",
                        cron=when.text if when.kind == "cron" else None, rate=when.text if when.kind == "rate" else None,
                        at=when.at_local, expression=when.expression, timezone=when.timezone, enabled=True,
                        channels=None, next_fire_at=when.next_fire(datetime.now(UTC)), limit=100)


def test_a_port_fires_the_row_as_written_follows_its_changes_and_forgets_it_when_deleted(port, pool, owner):
    with pool.connection() as conn:
        row = _row(conn, owner, cron="0 6 * * 1", timezone="Europe/Berlin")
    port.put(row)
    shown = port.describe(row["id"])
    assert shown is not None and shown["name"] == f"zerg-s{row['id']}"
    assert (shown["expression"], shown["timezone"], shown["state"]) == ("cron(0 6 ? * 2 *)", "Europe/Berlin", "ENABLED")
    assert shown["input"] == {"trigger": "schedule", "schedule_id": row["id"], "scheduled_time": SCHEDULED_TIME}

    changed = parse_when(rate="1 hour", timezone="UTC")
    with pool.connection() as conn:
        row = store.update(conn, owner, row["id"], cron=None, rate=changed.text, expression=changed.expression,
                           timezone="UTC", enabled=False, next_fire_at=None)
    port.put(row)
    port.put(row)  # putting the same row again is fine
    shown = port.describe(row["id"])
    assert (shown["expression"], shown["timezone"], shown["state"]) == ("rate(1 hour)", "UTC", "DISABLED")

    with pool.connection() as conn:
        store.delete(conn, owner, row["id"])
    port.delete(row["id"])
    assert port.describe(row["id"]) is None
    port.delete(row["id"])  # deleting what is not there is fine
    assert port.describe(row["id"]) is None
