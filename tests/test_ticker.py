"""The local ticker (zerg.schedules.ticker): ``zerg serve``'s housekeeping fires due schedules over
the same rows Scheduler's schedules follow on AWS; after downtime only the latest missed fire
runs; two tickers on one database start one run."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.schedules import answer_directly, finished_run, fire_rows, make_schedule, runs_of, schedule_row
from tests.support.scripts import background_script
from tests.support.waiting import wait_for


def hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def test_a_due_schedule_fired_by_zerg_serves_ticker_runs_the_run_state_machine_and_lands_in_the_inbox_with_severity(
        runtime_env, llm, pool, owner):
    from zerg.alerts import inbox
    from zerg.local.housekeeping import Housekeeping, default_tasks

    rt = runtime_env(ZERG_TICK_S="0.1")
    llm.respond_with(background_script(["Check the services"], "warning", "nginx answers in 2.3 s", "5 of 6 fast",
                                       commands={"Check the services": "echo nginx 2.3s"}))
    now = datetime.now(UTC)
    schedule = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1), task="check the services")
    due_at = schedule_row(pool, schedule["id"])["next_fire_at"]
    assert due_at <= now

    def inbox_item(run_id: int) -> dict | None:  # written by the run's last step, just after it closes
        with pool.connection() as conn:
            return inbox.get(conn, owner, run_id)

    tasks = [t for t in default_tasks(rt) if t.name == "schedules"]
    with Housekeeping(tasks):
        fire = wait_for(lambda: [f for f in fire_rows(pool, schedule["id"]) if f["outcome"] != "pending"],
                        "the ticker to fire the schedule")[0]
        run = finished_run(pool, owner, fire["run_id"])
        item = wait_for(lambda: inbox_item(run["id"]), "the run's inbox item", limit_s=60)

    assert (fire["outcome"], fire["source"], fire["scheduled_time"]) == ("started", "ticker", due_at)
    assert (run["status"], run["trigger"], run["task"]) == ("success", "schedule", "check the services")
    assert (item["severity"], item["headline"], item["details"], item["assessed_by"]) == (
        "warning", "nginx answers in 2.3 s", "5 of 6 fast", "model")
    assert (item["schedule_id"], item["schedule_name"], item["acknowledged_at"]) == (
        schedule["id"], schedule["name"], None)
    worker_saw = [r for r in llm.requests if "container_exec" in {t["function"]["name"] for t in r.get("tools") or []}]
    assert worker_saw  # the supervisor's worker ran: the whole run state machine, not a shortcut
    row = schedule_row(pool, schedule["id"])
    assert row["last_run_id"] == run["id"] and row["next_fire_at"] > now  # not due again until its next hour
    assert len(fire_rows(pool, schedule["id"])) == 1


def test_zerg_serve_ticks_only_when_schedules_are_local(runtime_env, monkeypatch):
    from zerg.local.housekeeping import default_tasks

    task = {t.name: t for t in default_tasks(runtime_env(ZERG_TICK_S="7"))}["schedules"]
    assert (task.interval_s, task.first_delay_s) == (7.0, 0.0)  # at once: fires missed while stopped
    aws = runtime_env(ZERG_SCHEDULE_GROUP="zerg", ZERG_SCHEDULER_ROLE_ARN="arn:aws:iam::123456789012:role/s",
                      ZERG_SCHEDULE_TARGET_ARN="arn:aws:lambda:us-east-1:123456789012:function:ingress",
                      ZERG_SCHEDULE_DLQ_ARN="arn:aws:sqs:us-east-1:123456789012:schedule-dlq")
    assert "schedules" not in {t.name for t in default_tasks(aws)}  # EventBridge Scheduler fires them


def test_after_downtime_only_the_latest_missed_fire_runs_and_the_passed_over_ones_are_recorded(
        runtime_env, llm, pool, owner):
    from zerg.schedules.ticker import tick

    rt = runtime_env()
    llm.respond_with(answer_directly())
    now = datetime.now(UTC)
    schedule = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=5))  # stopped for 5 hours

    counts = tick(rt, now)

    assert counts["due"] >= 1 and counts["started"] >= 1
    [fire] = fire_rows(pool, schedule["id"])
    assert fire["scheduled_time"] == hour(now)  # the latest fire time, not the first missed one
    assert fire["detail"] == "4 earlier fire(s) missed while nothing was firing; only this latest one ran"
    assert [r["id"] for r in runs_of(pool, owner)] == [fire["run_id"]]
    assert schedule_row(pool, schedule["id"])["next_fire_at"] == hour(now) + timedelta(hours=1)
    assert tick(rt, now)["due"] == 0  # nothing fires twice
    finished_run(pool, owner, fire["run_id"])


def test_a_ticker_that_read_the_row_before_another_fired_it_starts_nothing(runtime_env, llm, pool, owner, monkeypatch):
    from zerg.schedules import store, ticker

    rt = runtime_env()
    llm.respond_with(answer_directly())
    now = datetime.now(UTC)
    schedule = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1))
    with pool.connection() as conn:
        stale = [r for r in store.due(conn, now, 1000) if r["id"] == schedule["id"]]

    first = ticker.tick(rt, now)
    monkeypatch.setattr(store, "due", lambda conn, at, limit: stale)  # what a second ticker read meanwhile
    second = ticker.tick(rt, now)

    second.pop("recovered", None)  # the sweep may complete another test's stale fire in the shared database
    assert first["started"] >= 1 and second == {"due": 1, "duplicates": 1}
    [fire] = fire_rows(pool, schedule["id"])
    assert [r["id"] for r in runs_of(pool, owner)] == [fire["run_id"]]
    finished_run(pool, owner, fire["run_id"])


def test_two_tickers_at_once_on_one_database_start_one_run(runtime_env, llm, pool, owner, monkeypatch):
    from zerg.schedules import store, ticker

    rt = runtime_env()
    llm.respond_with(answer_directly())
    now = datetime.now(UTC)
    schedule = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1))
    read = store.due
    both_read = threading.Barrier(2, timeout=30)

    def due_then_wait(conn, at, limit):  # both tickers see the schedule due before either fires it
        rows = [r for r in read(conn, at, limit) if r["id"] == schedule["id"]]
        both_read.wait()
        return rows

    monkeypatch.setattr(store, "due", due_then_wait)
    results: list[dict] = []
    threads = [threading.Thread(target=lambda: results.append(ticker.tick(rt, now))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sorted(r.get("started", 0) for r in results) == [0, 1]
    assert sorted(r.get("duplicates", 0) for r in results) == [0, 1]
    [fire] = fire_rows(pool, schedule["id"])
    assert [r["id"] for r in runs_of(pool, owner)] == [fire["run_id"]]
    finished_run(pool, owner, fire["run_id"])


def test_a_one_off_at_schedule_fires_once_then_has_no_next_fire(runtime_env, llm, pool, owner):
    from zerg.schedules.ticker import tick

    rt = runtime_env()
    llm.respond_with(answer_directly())
    at = hour(datetime.now(UTC)) + timedelta(hours=2)
    schedule = make_schedule(rt, owner, at=at.strftime("%Y-%m-%dT%H:%M"), timezone="UTC")

    tick(rt, at - timedelta(minutes=1))
    assert fire_rows(pool, schedule["id"]) == []  # not yet
    tick(rt, at + timedelta(seconds=5))
    tick(rt, at + timedelta(hours=1))

    [fire] = fire_rows(pool, schedule["id"])
    assert (fire["scheduled_time"], fire["outcome"]) == (at, "started")
    row = schedule_row(pool, schedule["id"])
    assert row["next_fire_at"] is None and row["last_run_id"] == fire["run_id"]
    finished_run(pool, owner, fire["run_id"])


def test_the_ticker_completes_a_fire_whose_process_stopped_between_the_run_row_and_its_execution(
        runtime_env, llm, pool, owner, monkeypatch):
    from zerg.schedules import firing
    from zerg.schedules.ticker import tick

    rt = runtime_env()
    llm.respond_with(answer_directly())
    now = datetime.now(UTC)
    schedule = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1))
    complete = firing.complete

    def killed(rt, fire_id, fired, **kwargs):  # only this test's schedule: the session's database is shared,
        if fired["id"] != schedule["id"]:  # and another test's stale fire may be recovered by the same tick
            return complete(rt, fire_id, fired, **kwargs)
        raise RuntimeError("zerg serve was killed between the two phases")

    monkeypatch.setattr(firing, "complete", killed)
    assert tick(rt, now)["errors"] == 1
    [fire] = fire_rows(pool, schedule["id"])
    assert fire["outcome"] == "pending"

    monkeypatch.setattr(firing, "complete", complete)
    tick(rt, now)  # younger than the grace: its process may still be at it
    assert [f["outcome"] for f in fire_rows(pool, schedule["id"])] == ["pending"]
    monkeypatch.setattr(firing, "PENDING_GRACE_S", 0.0)
    # At least ours: other tests of this session's database may have left stale fires of their own.
    assert tick(rt, now)["recovered"] >= 1

    [fire] = fire_rows(pool, schedule["id"])
    assert fire["outcome"] == "started"
    assert finished_run(pool, owner, fire["run_id"])["status"] == "success"
    assert [r["id"] for r in runs_of(pool, owner)] == [fire["run_id"]]


def test_one_schedule_that_fails_to_fire_does_not_stop_the_others(runtime_env, llm, pool, owner, monkeypatch):
    from zerg.schedules import ticker

    rt = runtime_env()
    llm.respond_with(answer_directly())
    now = datetime.now(UTC)
    broken = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1))
    fine = make_schedule(rt, owner, rate="1 hour", now=now - timedelta(hours=1))
    real = ticker.fire

    def fire(rt, schedule_id, *args, **kwargs):
        if schedule_id == broken["id"]:
            raise ConnectionError("lost the database for a moment")
        return real(rt, schedule_id, *args, **kwargs)

    monkeypatch.setattr(ticker, "fire", fire)
    counts = ticker.tick(rt, now)

    assert counts["errors"] == 1 and counts["started"] >= 1
    assert fire_rows(pool, broken["id"]) == []
    [fired] = fire_rows(pool, fine["id"])
    finished_run(pool, owner, fired["run_id"])


@pytest.fixture(autouse=True)
def _only_this_tests_schedules(pool):
    """The tests share a database: a schedule another test left due must not be fired here (nor
    this test's by another): disable every schedule before each test."""
    with pool.connection() as conn:
        conn.execute("UPDATE schedules SET enabled = false, next_fire_at = NULL")
