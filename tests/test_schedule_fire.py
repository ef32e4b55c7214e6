"""Firing a schedule (zerg.schedules.firing) as EventBridge Scheduler delivers it, through the ingress
function's ``{"trigger": "schedule", ...}`` event: a check starts a run with trigger ``schedule``
on the run state machine (the local engine here), once per (schedule, scheduled time)."""

from __future__ import annotations

import threading

import pytest

from tests.support.schedules import answer_directly, finished_run, fire_rows, make_schedule
from tests.support.schedules import moto_scheduler as support_moto_scheduler
from tests.support.schedules import runs_of, schedule_row
from tests.support.scripts import assessment_json
from zerg.runs import store as runs

SIX = "2026-11-22T06:00:00Z"


def event(schedule_id, scheduled_time=SIX):
    return {"trigger": "schedule", "schedule_id": schedule_id, "scheduled_time": scheduled_time}


def deliver(ev):
    from functions.events.handler import handler

    return handler(ev, None)


def test_a_scheduler_event_starts_a_run_with_trigger_schedule_that_runs_to_success(runtime_env, llm, pool, owner):
    rt = runtime_env()
    llm.respond_with(answer_directly("Disk usage is at 41%."))
    schedule = make_schedule(rt, owner, cron="0 6 * * *", task="check disk usage")

    out = deliver(event(schedule["id"]))

    assert (out["outcome"], out["duplicate"], out["trigger"]) == ("started", False, "schedule")
    run = finished_run(pool, owner, out["run_id"])
    assert (run["status"], run["trigger"], run["task"], run["result"]) == (
        "success", "schedule", "check disk usage", "Disk usage is at 41%.")
    [fire] = fire_rows(pool, schedule["id"])
    assert (fire["outcome"], fire["source"], fire["run_id"], fire["detail"]) == ("started", "scheduler", run["id"], None)
    assert fire["scheduled_time"].isoformat() == "2026-11-22T06:00:00+00:00"
    row = schedule_row(pool, schedule["id"])
    assert row["last_run_id"] == run["id"] and row["last_fire_at"] == fire["scheduled_time"]


def test_a_duplicate_delivery_of_the_same_scheduled_time_starts_nothing(runtime_env, llm, pool, owner):
    rt = runtime_env()
    llm.respond_with(answer_directly())
    schedule = make_schedule(rt, owner)

    first = deliver(event(schedule["id"]))
    again = deliver(event(schedule["id"]))
    same_instant = deliver(event(schedule["id"], "2026-11-22T07:00:00+01:00"))  # written with an offset

    assert first["duplicate"] is False and first["outcome"] == "started"
    for dup in (again, same_instant):
        assert (dup["duplicate"], dup["outcome"], dup["run_id"]) == (True, "started", first["run_id"])
    assert [r["id"] for r in runs_of(pool, owner)] == [first["run_id"]]
    assert len(fire_rows(pool, schedule["id"])) == 1
    finished_run(pool, owner, first["run_id"])


def test_a_fire_while_the_previous_run_is_still_running_is_skipped_and_recorded(runtime_env, llm, pool, owner):
    from zerg.handler_input import parse_scheduled_time as parse_time
    from zerg.schedules.firing import fire

    rt = runtime_env()
    release = threading.Event()
    llm.respond_with(lambda req: (release.wait(60), {"content": "done at last"})[1])  # the first run waits
    schedule = make_schedule(rt, owner)
    try:
        first = fire(rt, schedule["id"], parse_time("2026-11-22T06:00:00Z"), source="scheduler")
        second = fire(rt, schedule["id"], parse_time("2026-11-22T07:00:00Z"), source="scheduler")
    finally:
        release.set()

    assert first.outcome == "started"
    assert (second.outcome, second.run_id, second.detail) == (
        "skipped", None, f"previous run {first.run_id} still running")
    assert [r["id"] for r in runs_of(pool, owner)] == [first.run_id]
    skipped = fire_rows(pool, schedule["id"])[1]
    assert (skipped["outcome"], skipped["detail"], skipped["run_id"]) == (
        "skipped", f"previous run {first.run_id} still running", None)
    assert finished_run(pool, owner, first.run_id)["status"] == "success"

    third = fire(rt, schedule["id"], parse_time("2026-11-22T08:00:00Z"), source="scheduler")  # the run ended
    assert third.outcome == "started" and third.run_id != first.run_id
    assert schedule_row(pool, schedule["id"])["last_run_id"] == third.run_id
    finished_run(pool, owner, third.run_id)


def test_a_paused_schedule_fire_is_skipped_and_recorded(runtime_env, llm, pool, owner):
    from zerg.schedules import service

    rt = runtime_env()
    schedule = make_schedule(rt, owner)
    service.pause(rt, owner, schedule["id"])

    out = deliver(event(schedule["id"]))

    assert (out["outcome"], out["detail"], out["run_id"]) == ("skipped", "paused", None)
    assert runs_of(pool, owner) == []
    [fire] = fire_rows(pool, schedule["id"])
    assert (fire["outcome"], fire["detail"]) == ("skipped", "paused")
    assert schedule_row(pool, schedule["id"])["next_fire_at"] is None  # still paused


def test_a_late_delivery_for_a_deleted_schedule_does_nothing(runtime_env, llm, pool, owner):
    from zerg.schedules import service

    rt = runtime_env()
    schedule = make_schedule(rt, owner)
    service.delete(rt, owner, schedule["id"])

    out = deliver(event(schedule["id"]))

    assert (out["outcome"], out["run_id"], out["duplicate"]) == ("gone", None, False)
    assert runs_of(pool, owner) == [] and fire_rows(pool, schedule["id"]) == []


@pytest.mark.parametrize("change, field", [
    ({"schedule_id": None}, "schedule_id"),
    ({"schedule_id": 0}, "schedule_id"),
    ({"schedule_id": "seven"}, "schedule_id"),
    ({"scheduled_time": "yesterday at six"}, "scheduled_time"),
    ({"scheduled_time": "2026-11-22T06:00:00"}, "scheduled_time"),  # no zone: which six o'clock?
    ({"scheduled_time": 1795327200}, "scheduled_time"),
    ({"scheduled_time": None}, "scheduled_time"),
    ({"owner_id": 1}, "owner_id"),  # the row says whose it is; an event never does
])
def test_a_bad_schedule_event_is_refused_naming_the_field_and_touches_nothing(runtime_env, pool, owner, change, field):
    from zerg.handler_input import InvalidEvent

    rt = runtime_env()
    schedule = make_schedule(rt, owner)
    ev = {**event(schedule["id"]), **change}
    ev = {k: v for k, v in ev.items() if v is not None}

    with pytest.raises(InvalidEvent, match=rf"invalid schedule event: {field}: "):
        deliver(ev)
    assert fire_rows(pool, schedule["id"]) == [] and runs_of(pool, owner) == []


def test_a_retried_delivery_after_a_crash_between_the_run_row_and_its_execution_starts_that_same_run(
        runtime_env, llm, pool, owner, monkeypatch):
    from zerg.schedules import firing

    rt = runtime_env()
    llm.respond_with(answer_directly())
    schedule = make_schedule(rt, owner)
    complete = firing.complete

    def killed(*args, **kwargs):
        raise RuntimeError("the function was killed between the two phases")

    monkeypatch.setattr(firing, "complete", killed)
    with pytest.raises(RuntimeError, match="killed"):
        deliver(event(schedule["id"]))
    [fire] = fire_rows(pool, schedule["id"])
    [run] = runs_of(pool, owner)
    assert (fire["outcome"], fire["run_id"]) == ("pending", run["id"])
    assert (run["status"], run["execution_arn"], run["executor"]) == ("running", None, None)  # nothing executes it

    monkeypatch.setattr(firing, "complete", complete)
    retry = deliver(event(schedule["id"]))  # Scheduler's (or Lambda's) retry of the same event

    assert (retry["duplicate"], retry["outcome"], retry["run_id"]) == (True, "started", run["id"])
    assert finished_run(pool, owner, run["id"])["status"] == "success"
    assert [r["id"] for r in runs_of(pool, owner)] == [run["id"]]
    assert fire_rows(pool, schedule["id"])[0]["outcome"] == "started"


def test_a_run_that_cannot_be_started_fails_and_its_fire_is_recorded_failed_with_the_reason(
        runtime_env, pool, owner, monkeypatch):
    rt = runtime_env()

    class Unreachable:
        def start(self, *args):
            raise ConnectionError("step functions unreachable")

        def stop(self, *args):
            pass

        def close(self):
            pass

    monkeypatch.setattr(rt, "starter", Unreachable())
    schedule = make_schedule(rt, owner)

    out = deliver(event(schedule["id"]))

    assert out["outcome"] == "failed" and "could not start the run: ConnectionError" in out["detail"]
    [run] = runs_of(pool, owner)
    assert (run["id"], run["status"]) == (out["run_id"], "failed")
    [fire] = fire_rows(pool, schedule["id"])
    assert (fire["outcome"], fire["detail"], fire["run_id"]) == ("failed", out["detail"], run["id"])


def test_a_schedules_fires_and_the_schedule_of_a_run_are_its_owners_alone(runtime_env, llm, pool, owner, other_owner):
    from tests.support.factories import make_run
    from zerg.schedules import fires

    rt = runtime_env()
    llm.respond_with(answer_directly())
    schedule = make_schedule(rt, owner)
    out = deliver(event(schedule["id"]))
    other_run, _ = make_run(pool, owner, "asked in the chat")

    with pool.connection() as conn:
        assert [f["run_id"] for f in fires.list_for_schedule(conn, owner, schedule["id"], 10)] == [out["run_id"]]
        assert fires.list_for_schedule(conn, other_owner, schedule["id"], 10) == []
        assert fires.schedule_of_run(conn, owner, out["run_id"])["id"] == schedule["id"]
        assert fires.schedule_of_run(conn, other_owner, out["run_id"]) is None
        assert fires.schedule_of_run(conn, owner, other_run) is None  # not a background run
    finished_run(pool, owner, out["run_id"])


# --- zerg schedules run-now | history -------------------------------------------------------------

def test_run_now_fires_the_schedule_as_the_ticker_would_waits_for_the_run_and_prints_its_answer(
        runtime_env, llm, pool, alice, capsys):
    from zerg.cli.main import main

    rt = runtime_env()
    llm.respond_with(answer_directly(assessment_json("warning", "Disk usage is at 91%")))
    schedule = make_schedule(rt, alice.owner_id, cron="0 6 * * *")

    assert main(["schedules", "run-now", schedule["name"], "--owner", alice.name]) == 0

    out = capsys.readouterr().out
    [fire] = fire_rows(pool, schedule["id"])
    assert (fire["source"], fire["outcome"]) == ("run-now", "started")
    assert f"fired schedule {schedule['id']} {schedule['name']!r} (check): started, run {fire['run_id']}" in out
    assert "Disk usage is at 91%" in out and f"run {fire['run_id']}: success" in out
    assert "inbox: warning: Disk usage is at 91%" in out  # the run's inbox item, read from the inbox
    with pool.connection() as conn:
        assert runs.get_run(conn, alice.owner_id, fire["run_id"])["trigger"] == "schedule"

    assert main(["schedules", "history", str(schedule["id"]), "--owner", alice.name]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SCHEDULED", "SOURCE", "OUTCOME", "RUN", "DETAIL"]
    assert lines[1].split()[-3:] == ["run-now", "started", str(fire["run_id"])]


def test_run_now_of_a_paused_schedule_records_the_skip_and_exits_1(runtime_env, pool, alice, capsys):
    from zerg.cli.main import main
    from zerg.schedules import service

    rt = runtime_env()
    schedule = make_schedule(rt, alice.owner_id)
    service.pause(rt, alice.owner_id, schedule["id"])

    assert main(["schedules", "run-now", schedule["name"], "--owner", alice.name]) == 1

    assert "skipped (paused)" in capsys.readouterr().out
    assert main(["schedules", "history", schedule["name"], "--owner", alice.name]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-3:] == ["skipped", "-", "paused"]
    assert runs_of(pool, alice.owner_id) == []


def test_another_owner_can_neither_see_the_history_of_a_schedule_nor_fire_it(runtime_env, pool, alice, bob, capsys):
    from zerg.cli.main import main

    rt = runtime_env()
    schedule = make_schedule(rt, alice.owner_id)
    assert main(["schedules", "run-now", schedule["name"], "--owner", alice.name]) in (0, 1)
    capsys.readouterr()

    for ref in (schedule["name"], str(schedule["id"])):
        assert main(["schedules", "history", ref, "--owner", bob.name]) == 1
        assert main(["schedules", "run-now", ref, "--owner", bob.name]) == 1
        captured = capsys.readouterr()
        assert "no schedule named" in captured.err and captured.out == ""
    assert len(fire_rows(pool, schedule["id"])) == 1 and runs_of(pool, bob.owner_id) == []


# --- recovery on AWS: the "schedules" housekeeping task, and a fire behind a run that never started ---

def crash_between_the_phases(monkeypatch, schedule_id, scheduled_time=SIX):
    """Deliver a fire whose process dies after phase 1: its run row is written, its execution never starts."""
    from zerg.schedules import firing

    complete = firing.complete

    def killed(*args, **kwargs):
        raise RuntimeError("the function was killed between the two phases")

    monkeypatch.setattr(firing, "complete", killed)
    with pytest.raises(RuntimeError, match="killed"):
        deliver(event(schedule_id, scheduled_time))
    monkeypatch.setattr(firing, "complete", complete)


def age(pool, fire_id, run_id, minutes=10):
    """The crash happened ``minutes`` ago (past PENDING_GRACE_S)."""
    with pool.connection() as conn:
        conn.execute("UPDATE schedule_fires SET fired_at = fired_at - make_interval(mins => %s) WHERE id = %s",
                     (minutes, fire_id))
        conn.execute("UPDATE runs SET created_at = created_at - make_interval(mins => %s) WHERE id = %s",
                     (minutes, run_id))


def test_the_housekeeping_event_schedules_finishes_a_fire_its_process_left_pending(
        runtime_env, llm, pool, owner, monkeypatch):
    rt = runtime_env()
    llm.respond_with(answer_directly("Disk usage is at 41%."))
    schedule = make_schedule(rt, owner)
    crash_between_the_phases(monkeypatch, schedule["id"])
    [fire] = fire_rows(pool, schedule["id"])
    age(pool, fire["id"], fire["run_id"])

    out = deliver({"trigger": "housekeeping", "task": "schedules"})

    assert out["task"] == "schedules" and out["result"]["recovered"] >= 1  # other tests' leftovers may be swept too
    assert fire_rows(pool, schedule["id"])[0]["outcome"] == "started"
    assert finished_run(pool, owner, fire["run_id"])["status"] == "success"
    assert [r["id"] for r in runs_of(pool, owner)] == [fire["run_id"]]  # the same run, never a second one


def test_a_schedule_whose_previous_run_never_started_is_not_skipped_forever(runtime_env, llm, pool, owner, monkeypatch):
    rt = runtime_env()
    release = threading.Event()
    llm.respond_with(lambda req: (release.wait(60), {"content": "done at last"})[1])  # runs wait until released
    schedule = make_schedule(rt, owner)
    crash_between_the_phases(monkeypatch, schedule["id"])
    [stuck] = fire_rows(pool, schedule["id"])
    age(pool, stuck["id"], stuck["run_id"])
    try:
        # The next fire completes the stuck fire first: the run starts, so this fire waits behind a real run.
        second = deliver(event(schedule["id"], "2026-11-22T07:00:00Z"))
        assert (second["outcome"], second["detail"]) == ("skipped", f"previous run {stuck['run_id']} still running")
        assert fire_rows(pool, schedule["id"])[0]["outcome"] == "started"
        assert runs_of(pool, owner)[0]["execution_arn"] is not None
    finally:
        release.set()
    assert finished_run(pool, owner, stuck["run_id"])["status"] == "success"

    third = deliver(event(schedule["id"], "2026-11-22T08:00:00Z"))
    assert third["outcome"] == "started" and third["run_id"] != stuck["run_id"]
    finished_run(pool, owner, third["run_id"])


def test_a_run_that_never_started_and_cannot_start_lets_the_next_fire_start_a_new_run(
        runtime_env, llm, pool, owner, monkeypatch):
    rt = runtime_env()
    llm.respond_with(answer_directly())
    schedule = make_schedule(rt, owner)
    crash_between_the_phases(monkeypatch, schedule["id"])
    [stuck] = fire_rows(pool, schedule["id"])
    age(pool, stuck["id"], stuck["run_id"])
    start, calls = rt.starter.start, []

    def start_fails_once(*args):  # the stuck run's start fails; the new run's succeeds
        calls.append(args)
        if len(calls) == 1:
            raise ConnectionError("step functions unreachable")
        return start(*args)

    monkeypatch.setattr(rt.starter, "start", start_fails_once)

    second = deliver(event(schedule["id"], "2026-11-22T07:00:00Z"))

    first_fire = fire_rows(pool, schedule["id"])[0]
    assert first_fire["outcome"] == "failed" and "could not start the run" in first_fire["detail"]
    assert second["outcome"] == "started" and second["run_id"] != stuck["run_id"]
    assert finished_run(pool, owner, second["run_id"])["status"] == "success"


# --- a delivery for a row that is gone: the Scheduler schedule goes too ----------------------------

@pytest.fixture
def moto_scheduler(runtime_env):
    """Moto's EventBridge Scheduler with a group, and the runtime configured for it."""
    with support_moto_scheduler(runtime_env, "zerg-fire-test") as (_, rt):
        yield rt


def test_a_scheduler_delivery_for_a_row_that_is_gone_deletes_the_scheduler_schedule(moto_scheduler, pool, owner):
    from zerg.schedules import store

    rt = moto_scheduler
    schedule = make_schedule(rt, owner)
    assert rt.scheduler.describe(schedule["id"]) is not None
    with pool.connection() as conn:  # the row went without its port call (its commit failed after it, say)
        store.delete(conn, owner, schedule["id"])

    out = deliver(event(schedule["id"]))

    assert (out["outcome"], out["run_id"]) == ("gone", None)
    assert rt.scheduler.describe(schedule["id"]) is None
    assert runs_of(pool, owner) == [] and fire_rows(pool, schedule["id"]) == []


def test_a_gone_rows_scheduler_schedule_that_cannot_be_deleted_still_fires_nothing(moto_scheduler, pool, owner,
                                                                                  monkeypatch):
    from zerg.ports import SchedulerUnavailable
    from zerg.schedules import store

    rt = moto_scheduler
    schedule = make_schedule(rt, owner)
    with pool.connection() as conn:
        store.delete(conn, owner, schedule["id"])

    def unavailable(schedule_id):
        raise SchedulerUnavailable("EventBridge Scheduler did not answer")

    monkeypatch.setattr(rt.scheduler, "delete", unavailable)
    out = deliver(event(schedule["id"]))

    assert out["outcome"] == "gone" and runs_of(pool, owner) == []


def test_the_housekeeping_event_schedules_prunes_one_offs_fired_over_a_week_ago_with_their_scheduler_schedules(
        moto_scheduler, pool, owner):
    from datetime import UTC, datetime, timedelta

    from zerg.schedules import store

    rt = moto_scheduler
    at = f"{datetime.now(UTC) + timedelta(days=1):%Y-%m-%d}T09:00"
    old, recent, pending = (make_schedule(rt, owner, kind="reminder", at=at, timezone="UTC") for _ in range(3))
    with pool.connection() as conn:  # what their fires wrote: the last fire, no next one
        store.advance(conn, old["id"], fired_at=datetime.now(UTC) - timedelta(days=8), next_fire_at=None)
        store.advance(conn, recent["id"], fired_at=datetime.now(UTC) - timedelta(days=6), next_fire_at=None)

    out = deliver({"trigger": "housekeeping", "task": "schedules"})

    assert out["result"]["pruned"] >= 1 and out["result"]["prune_errors"] == 0
    assert schedule_row(pool, old["id"]) is None and rt.scheduler.describe(old["id"]) is None
    for kept in (recent, pending):  # fired less than a week ago (its owner may still look), or yet to fire
        assert schedule_row(pool, kept["id"]) is not None and rt.scheduler.describe(kept["id"]) is not None


def test_zerg_serves_housekeeping_prunes_fired_one_offs_too(runtime_env, pool, owner):
    from datetime import UTC, datetime, timedelta

    from zerg.local.housekeeping import default_tasks
    from zerg.schedules import store

    rt = runtime_env()
    at = f"{datetime.now(UTC) + timedelta(days=1):%Y-%m-%d}T09:00"
    old = make_schedule(rt, owner, kind="reminder", at=at, timezone="UTC")
    with pool.connection() as conn:
        store.advance(conn, old["id"], fired_at=datetime.now(UTC) - timedelta(days=8), next_fire_at=None)

    {t.name: t for t in default_tasks(rt)}["schedules-prune"].run()

    assert schedule_row(pool, old["id"]) is None
