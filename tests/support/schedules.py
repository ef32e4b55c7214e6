"""Schedules for the firing tests: made through the service (as the API and the CLI make them), and
the rows a test asserts on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from tests.support.factories import unique_name
from tests.support.waiting import wait_for


def make_schedule(rt, owner_id: int, *, now: datetime | None = None, **spec: Any) -> dict[str, Any]:
    """A schedule of the owner (a check every hour unless ``spec`` says otherwise); ``now``: the
    creation time its first fire is computed from (in the past: it is due already)."""
    from zerg.schedules import service
    from zerg.schedules.spec import ScheduleSpec

    body = {"name": unique_name("sched"), "task": "check disk on this machine", **spec}
    if not {"cron", "rate", "at"} & set(body):
        body["rate"] = "1 hour"
    return service.create(rt, owner_id, ScheduleSpec(**body), now=now)


def fire_rows(pool, schedule_id: int) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM schedule_fires WHERE schedule_id = %s ORDER BY id", (schedule_id,)).fetchall()


def schedule_row(pool, schedule_id: int) -> dict[str, Any] | None:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM schedules WHERE id = %s", (schedule_id,)).fetchone()


def runs_of(pool, owner_id: int) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute("SELECT id, status, trigger, task, execution_arn, executor FROM runs "
                            "WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def finished_run(pool, owner_id: int, run_id: int) -> dict[str, Any]:
    """The run once it has ended (waiting for it: a fired schedule's run executes on the engine)."""
    from zerg.runs import store as runs

    def final() -> dict[str, Any] | None:
        with pool.connection() as conn:
            run = runs.get_run(conn, owner_id, run_id)
        return run if run["status"] not in ("queued", "running") else None

    return wait_for(final, f"run {run_id} to end", limit_s=60)


def answer_directly(text: str = "Disk usage is at 41%; nothing to do."):
    """A model that answers every request at once (the supervisor spawns no worker)."""
    return lambda request: {"content": text}


# What the functions get on AWS besides the group (infra.stacks.background), as fake ARNs.
SCHEDULER_SETTINGS = {
    "ZERG_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/zerg-scheduler",
    "ZERG_SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:zerg-ingress",
    "ZERG_SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:zerg-schedule-dlq",
}


@contextmanager
def moto_scheduler(runtime_env, group: str) -> Iterator[tuple[Any, Any]]:
    """Moto's EventBridge Scheduler with ``group``, and the runtime configured for it: (client, runtime)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name=group)
        yield client, runtime_env(ZERG_SCHEDULE_GROUP=group, **SCHEDULER_SETTINGS)


def scheduled(client, schedule_id: int, group: str) -> dict | None:
    """Scheduler's schedule of the row ``schedule_id``, or None when there is none."""
    from botocore.exceptions import ClientError

    try:
        return client.get_schedule(Name=f"zerg-s{schedule_id}", GroupName=group)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ResourceNotFoundException"
        return None
