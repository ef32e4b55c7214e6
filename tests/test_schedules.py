"""Schedules below the API: the service keeps next_fire_at and the port in step, the store's system
reads (due, get_for_fire, advance), the settings EventBridge needs, and ``zerg schedules``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from zerg.cli.main import main
from zerg.config import ConfigError, load_settings
from zerg.schedules import service, store
from zerg.schedules.spec import SchedulePatch, ScheduleSpec


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def spec(**fields) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"name": "health", "task": "check the disks", **fields})


def test_the_time_zone_defaults_to_the_owners_notification_policy_else_utc(rt, owner, other_owner, pool):
    with pool.connection() as conn:
        conn.execute("INSERT INTO notification_policies (owner_id, timezone) VALUES (%s, 'Asia/Tokyo')", (owner,))
    assert service.create(rt, owner, spec(cron="0 6 * * *"))["timezone"] == "Asia/Tokyo"
    assert service.create(rt, other_owner, spec(cron="0 6 * * *"))["timezone"] == "UTC"
    given = service.create(rt, owner, spec(name="given", cron="0 6 * * *", timezone="Europe/Berlin"))
    assert given["timezone"] == "Europe/Berlin"
    assert given["next_fire_at"].astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") == "06:00"


def test_pausing_clears_the_next_fire_and_resuming_computes_it_from_now(rt, owner):
    created = service.create(rt, owner, spec(rate="1 hour"))
    assert created["next_fire_at"] > datetime.now(UTC) and created["next_fire_at"].minute == 0
    paused = service.pause(rt, owner, created["id"])
    assert (paused["enabled"], paused["next_fire_at"]) == (False, None)
    assert rt.scheduler.describe(created["id"])["state"] == "DISABLED"  # the local port reads the row
    assert service.pause(rt, owner, created["id"]) == paused  # pausing twice changes nothing
    resumed = service.resume(rt, owner, created["id"])
    assert resumed["enabled"] and resumed["next_fire_at"] == created["next_fire_at"]
    assert rt.scheduler.describe(created["id"])["state"] == "ENABLED"
    created_paused = service.create(rt, owner, spec(name="later", cron="0 6 * * *", enabled=False))
    assert created_paused["next_fire_at"] is None


def test_a_change_that_does_not_touch_the_timing_keeps_a_due_fire(rt, owner, pool):
    created = service.create(rt, owner, spec(cron="*/5 * * * *"))
    due_at = datetime.now(UTC) - timedelta(minutes=1)
    with pool.connection() as conn:  # the ticker has not reached it yet
        store.update(conn, owner, created["id"], next_fire_at=due_at)
    renamed = service.update(rt, owner, created["id"], SchedulePatch(name="disks", task="check only the disks",
                                                                     channels={"critical": ["sms"]}))
    assert (renamed["name"], renamed["task"], renamed["channels"]) == ("disks", "check only the disks", {"critical": ["sms"]})
    assert renamed["next_fire_at"] == due_at
    retimed = service.update(rt, owner, created["id"], SchedulePatch(cron="0 6 * * *"))
    assert retimed["next_fire_at"] > datetime.now(UTC) and retimed["expression"] == "cron(0 6 * * ? *)"
    cleared = service.update(rt, owner, created["id"], SchedulePatch(channels=None))
    assert cleared["channels"] is None and cleared["next_fire_at"] == retimed["next_fire_at"]


def test_moving_a_pending_one_off_into_the_past_by_its_zone_is_refused(rt, owner):
    soon = datetime.now(ZoneInfo("Pacific/Pago_Pago")) + timedelta(hours=5)  # UTC-11
    created = service.create(rt, owner, spec(kind="reminder", at=f"{soon:%Y-%m-%dT%H:%M}", timezone="Pacific/Pago_Pago"))
    # The same wall time at UTC+14 was 20 hours ago; at UTC-9 (Anchorage) it is 3 hours ahead.
    with pytest.raises(service.ScheduleError, match=r"^at: .* in Pacific/Kiritimati is in the past"):
        service.update(rt, owner, created["id"], SchedulePatch(timezone="Pacific/Kiritimati"))
    assert service.get(rt, owner, created["id"]) == created
    later = service.update(rt, owner, created["id"], SchedulePatch(timezone="America/Anchorage"))
    assert later["at"] == created["at"] and later["next_fire_at"] < created["next_fire_at"]


def test_an_owner_has_at_most_100_schedules(rt, owner, other_owner):
    for n in range(service.MAX_PER_OWNER):
        service.create(rt, owner, spec(name=f"s{n}", rate="1 day"))
    with pytest.raises(service.ScheduleConflict, match="an owner has at most 100 schedules; delete one first"):
        service.create(rt, owner, spec(name="one more", rate="1 day"))
    assert service.create(rt, other_owner, spec(name="one more", rate="1 day"))["name"] == "one more"


def fire_one_off(pool, schedule: dict, fired_at: datetime) -> None:
    """What a fire of a one-off writes: its last fire, and no next one."""
    with pool.connection() as conn:
        store.advance(conn, schedule["id"], fired_at=fired_at, next_fire_at=None)


def tomorrow_at_nine() -> str:
    return f"{datetime.now(UTC) + timedelta(days=1):%Y-%m-%d}T09:00"


def test_a_fired_one_off_does_not_count_toward_the_limit(rt, owner, pool):
    for n in range(service.MAX_PER_OWNER - 1):
        service.create(rt, owner, spec(name=f"s{n}", rate="1 day"))
    reminder = service.create(rt, owner, spec(name="renew", kind="reminder", at=tomorrow_at_nine(), timezone="UTC"))
    with pytest.raises(service.ScheduleConflict, match="at most 100 schedules"):  # pending: it counts
        service.create(rt, owner, spec(name="one more", rate="1 day"))
    fire_one_off(pool, reminder, datetime.now(UTC))

    service.create(rt, owner, spec(name="one more", rate="1 day"))  # the fired reminder no longer counts
    with pytest.raises(service.ScheduleConflict, match="at most 100 schedules"):
        service.create(rt, owner, spec(name="and another", rate="1 day"))
    with pool.connection() as conn:
        assert store.count_for_owner(conn, owner) == service.MAX_PER_OWNER


def test_two_concurrent_creates_at_the_limit_do_not_both_pass_it(rt, owner, pool):
    import threading

    from tests.support.waiting import wait_for

    for n in range(service.MAX_PER_OWNER - 1):
        service.create(rt, owner, spec(name=f"s{n}", rate="1 day"))
    in_put, release = threading.Event(), threading.Event()
    put = rt.scheduler.put

    def first_put_waits(row):  # the first create holds its transaction open between insert and commit
        if not in_put.is_set():
            in_put.set()
            release.wait(30)
        put(row)

    rt.scheduler.put = first_put_waits
    outcomes: dict[str, str] = {}

    def create(name: str) -> None:
        try:
            service.create(rt, owner, spec(name=name, rate="1 day"))
            outcomes[name] = "created"
        except service.ScheduleConflict:
            outcomes[name] = "refused"

    first = threading.Thread(target=create, args=("first",))
    first.start()
    assert in_put.wait(30)
    second = threading.Thread(target=create, args=("second",))
    second.start()

    def second_done_or_waiting() -> bool:
        with pool.connection() as conn:
            waiting = conn.execute("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                                   ).fetchone()["n"]
        return "second" in outcomes or waiting > 0

    wait_for(second_done_or_waiting, "the second create to finish or wait for the first")
    release.set()
    first.join(30)
    second.join(30)
    assert outcomes == {"first": "created", "second": "refused"}
    assert len(service.list_schedules(rt, owner)) == service.MAX_PER_OWNER


def test_a_name_or_an_id_finds_only_the_owners_schedule(rt, owner, other_owner):
    created = service.create(rt, owner, spec(rate="1 hour"))
    assert service.find(rt, owner, "health") == created == service.find(rt, owner, str(created["id"]))
    for ref in ("health", str(created["id"])):
        with pytest.raises(service.ScheduleNotFound):
            service.find(rt, other_owner, ref)


# --- the store's system reads and the fire's bookkeeping ----------------------------------------

def test_the_due_read_finds_enabled_due_schedules_of_every_owner_earliest_first(rt, owner, other_owner, pool):
    now = datetime(2001, 1, 1, tzinfo=UTC)  # earlier than any other test's schedules in this database
    mine = service.create(rt, owner, spec(name="mine", rate="1 hour"))
    theirs = service.create(rt, other_owner, spec(name="theirs", rate="1 hour"))
    future = service.create(rt, owner, spec(name="future", rate="1 hour"))
    paused = service.create(rt, owner, spec(name="paused", rate="1 hour", enabled=False))
    try:
        with pool.connection() as conn:
            store.update(conn, owner, mine["id"], next_fire_at=now - timedelta(minutes=1))
            store.update(conn, other_owner, theirs["id"], next_fire_at=now - timedelta(minutes=2))
            store.update(conn, owner, future["id"], next_fire_at=now + timedelta(minutes=1))
            assert [r["id"] for r in store.due(conn, now, 10)] == [theirs["id"], mine["id"]]
            assert [r["id"] for r in store.due(conn, now, 1)] == [theirs["id"]]
            assert [r["id"] for r in store.due(conn, now - timedelta(seconds=90), 10)] == [theirs["id"]]
            assert paused["id"] not in {r["id"] for r in store.due(conn, datetime.now(UTC) + timedelta(days=400), 10_000)}
    finally:  # a ticker elsewhere in the session must not find these long-due rows
        for who, schedule in ((owner, mine), (other_owner, theirs), (owner, future), (owner, paused)):
            service.delete(rt, who, schedule["id"])


def test_a_fire_is_recorded_by_id_alone_and_a_pause_meanwhile_wins(rt, owner, pool):
    created = service.create(rt, owner, spec(rate="1 hour"))
    with pool.connection() as conn:
        row = store.get_for_fire(conn, created["id"])
        assert row["owner_id"] == owner
        fired_at, after = created["next_fire_at"], created["next_fire_at"] + timedelta(hours=1)
        advanced = store.advance(conn, created["id"], fired_at=fired_at, next_fire_at=after)
    assert (advanced["last_fire_at"], advanced["next_fire_at"]) == (fired_at, after)
    assert advanced["updated_at"] == row["updated_at"]  # a fire is not the owner's change
    service.pause(rt, owner, created["id"])
    with pool.connection() as conn:
        late = store.advance(conn, created["id"], fired_at=after, next_fire_at=after + timedelta(hours=1))
    assert (late["enabled"], late["next_fire_at"], late["last_fire_at"]) == (False, None, after)


@pytest.mark.parametrize("missing", ["ZERG_SCHEDULER_ROLE_ARN", "ZERG_SCHEDULE_TARGET_ARN", "ZERG_SCHEDULE_DLQ_ARN"])
def test_schedules_on_eventbridge_need_the_role_the_target_and_the_dlq(missing):
    complete = {"ZERG_SCHEDULE_GROUP": "zerg", "ZERG_SCHEDULER_ROLE_ARN": "arn:r", "ZERG_SCHEDULE_TARGET_ARN": "arn:t",
                "ZERG_SCHEDULE_DLQ_ARN": "arn:q"}
    assert load_settings(complete).schedule_group == "zerg"
    with pytest.raises(ConfigError, match=f"^{missing} must be set when ZERG_SCHEDULE_GROUP is set$"):
        load_settings({k: v for k, v in complete.items() if k != missing})


# --- zerg schedules -------------------------------------------------------------------------------

def test_zerg_schedules_add_list_pause_resume_rm(rt, alice, bob, capsys):
    who = ["--owner", alice.name]
    assert main(["schedules", "add", "health", "--cron", "0 6 * * 1", "--tz", "Europe/Berlin",
                 "check disk and memory on cube", *who]) == 0
    out = capsys.readouterr().out
    assert out.startswith("created schedule ") and "'health': cron 0 6 * * 1 = cron(0 6 ? * 2 *) in Europe/Berlin" in out
    assert " 06:00 CE" in out  # the next fire on the schedule's own clock (CET or CEST)
    assert main(["schedules", "add", "digest", "--kind", "digest", "--rate", "1 day", "--channels", "info=", *who]) == 0
    capsys.readouterr()

    assert main(["schedules", "list", *who]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "KIND", "WHEN", "SCHEDULER", "TIMEZONE", "ENABLED", "NEXT", "FIRE"]
    assert "health" in lines[1] and "cron 0 6 * * 1" in lines[1] and "cron(0 6 ? * 2 *)" in lines[1] and " yes " in lines[1]
    assert "digest" in lines[2] and "rate(1 day)" in lines[2] and "00:00 UTC" in lines[2]

    assert main(["schedules", "pause", "health", *who]) == 0
    assert "(paused); next fire -" in capsys.readouterr().out
    health = service.find(rt, alice.owner_id, "health")
    assert main(["schedules", "resume", str(health["id"]), *who]) == 0
    assert "resumed schedule" in capsys.readouterr().out
    assert main(["schedules", "rm", "health", "--owner", bob.name]) == 1  # not Bob's
    assert capsys.readouterr().err == "zerg: no schedule named 'health'\n"
    assert main(["schedules", "rm", "health", *who]) == 0
    assert [s["name"] for s in service.list_schedules(rt, alice.owner_id)] == ["digest"]


@pytest.mark.parametrize(("argv", "message"), [
    (["add", "x", "--cron", "0 6 1 * 1", "t"], "zerg: error: cron: both day-of-month (1) and day-of-week (1) are restricted"),
    (["add", "x", "--rate", "1 hour", "--tz", "Nowhere/Land", "t"], "zerg: error: timezone: unknown time zone 'Nowhere/Land'"),
    (["add", "x", "--rate", "1 hour"], "zerg: error: task: required for a check schedule"),
    (["add", "x", "--rate", "1 hour", "--channels", "warning", "t"], "zerg: error: --channels 'warning': write SEVERITY="),
    (["add", "x", "--rate", "1 hour", "--channels", "loud=sms", "t"], "zerg: error: channels.loud.[key]: Input should be"),
])
def test_bad_input_exits_2_with_one_line(rt, alice, capsys, argv, message):
    assert main(["schedules", *argv, "--owner", alice.name]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
