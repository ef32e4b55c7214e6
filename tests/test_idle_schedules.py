"""Idle schedules pause themselves (issue 27): a check whose results nobody opened or acknowledged
for N days (default 14, per schedule) is paused at its next fire, the fire skipped with the reason,
and the owner gets one notice saying why and how to resume. Opening a result (its run's details)
or acknowledging it, or changing the schedule, is attention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.api import call
from tests.support.reachable import outbox, verified_contact
from tests.support.schedules import answer_directly, finished_run, fire_rows, make_schedule, schedule_row
from zerg.alerts import inbox
from zerg.alerts.severity import Assessment
from zerg.notify import notifications
from zerg.runs import store as runs
from zerg.schedules import service
from zerg.schedules.firing import fire
from zerg.schedules.spec import SchedulePatch

WEEKS_AGO = timedelta(days=20)


def token(owner) -> str:
    return call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})[1]["token"]


def aged_schedule(rt, pool, owner_id: int, **spec) -> dict:
    """A daily check made 20 days ago (its owner's last change then)."""
    schedule = make_schedule(rt, owner_id, cron="0 6 * * *", **spec)
    with pool.connection() as conn:
        conn.execute("UPDATE schedules SET created_at = now() - %s, updated_at = now() - %s WHERE id = %s",
                     (WEEKS_AGO, WEEKS_AGO, schedule["id"]))
    return schedule_row(pool, schedule["id"])


def result(pool, owner_id: int, schedule_id: int, age: timedelta) -> int:
    """A result of the schedule in the owner's inbox, ``age`` old; its run id."""
    with pool.connection() as conn:
        run_id = runs.start_run(conn, owner_id, "check disk", trigger="schedule").run_id
        inbox.add(conn, owner_id, run_id, schedule_id, Assessment("info", "Disk fine", "41% used", "model"))
        conn.execute("UPDATE inbox_items SET created_at = now() - %s WHERE run_id = %s", (age, run_id))
        conn.execute("UPDATE runs SET status = 'success' WHERE id = %s", (run_id,))
    return run_id


def notices(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return [n for n in notifications.list_for_owner(conn, owner_id) if n["purpose"] == "idle_pause"]


def test_a_check_nobody_looked_at_for_14_days_pauses_at_its_next_fire_with_one_notice(
        runtime_env, pool, owner, tmp_path):
    rt = runtime_env()
    verified_contact(pool, owner, "email")
    schedule = aged_schedule(rt, pool, owner, name="nightly-disk")
    result(pool, owner, schedule["id"], timedelta(days=15))
    result(pool, owner, schedule["id"], timedelta(days=1))

    first = fire(rt, schedule["id"], datetime(2026, 11, 22, 6, tzinfo=UTC), source="ticker")
    again = fire(rt, schedule["id"], datetime(2026, 11, 23, 6, tzinfo=UTC), source="run-now")

    assert (first.outcome, first.run_id) == ("skipped", None)
    assert first.detail.startswith("paused: nobody opened or acknowledged its results for 14 days (2 unseen since ")
    assert (again.outcome, again.detail) == ("skipped", "paused")  # paused now: no second notice
    row = schedule_row(pool, schedule["id"])
    assert (row["enabled"], row["next_fire_at"]) == (False, None) and row["idle_paused_at"] is not None
    assert [f["outcome"] for f in fire_rows(pool, schedule["id"])] == ["skipped", "skipped"]
    assert [(n["channel"], n["status"], n["schedule_id"]) for n in notices(pool, owner)] == [
        ("email", "sent", schedule["id"])]
    (mail,) = outbox(tmp_path / "zerg-data")["email"]
    assert mail["Subject"].strip() == "Zerg: paused the scheduled check 'nightly-disk' (nobody looked at its results)"
    body = mail.get_body(("plain",)).get_content()
    assert "nobody opened or acknowledged its results for 14 days" in body
    assert "zerg schedules resume nightly-disk" in body and '{"enabled": true}' in body

    # Resumed: the pause is forgotten and the clock starts again from the resume.
    resumed = service.resume(rt, owner, schedule["id"])
    assert resumed["enabled"] and resumed["idle_paused_at"] is None


def test_an_acknowledged_or_opened_result_keeps_the_schedule_firing(runtime_env, llm, pool, alice, bob):
    owner = alice.owner_id
    rt = runtime_env()
    llm.respond_with(answer_directly())
    acked = aged_schedule(rt, pool, owner)
    result(pool, owner, acked["id"], timedelta(days=15))
    with pool.connection() as conn:
        inbox.acknowledge(conn, owner, result(pool, owner, acked["id"], timedelta(days=3)))
    opened = aged_schedule(rt, pool, owner)
    run_id = result(pool, owner, opened["id"], timedelta(days=15))
    # Another owner fetching the run sees nothing and opens nothing; the owner's own fetch opens it.
    assert call("GET", f"/api/jarvis/runs/{run_id}", token=token(bob))[0] == 404
    with pool.connection() as conn:
        assert inbox.get(conn, owner, run_id)["run_id"] == run_id
        assert conn.execute("SELECT opened_at FROM inbox_items WHERE run_id = %s", (run_id,)).fetchone()["opened_at"] is None
    assert call("GET", f"/api/jarvis/runs/{run_id}", token=token(alice))[0] == 200

    for schedule in (acked, opened):
        out = fire(rt, schedule["id"], datetime(2026, 11, 22, 6, tzinfo=UTC), source="ticker")
        assert out.outcome == "started", out.detail
        finished_run(pool, owner, out.run_id)
    assert notices(pool, owner) == []


def test_a_schedule_with_no_results_or_with_idle_pause_off_is_never_paused(runtime_env, llm, pool, owner):
    rt = runtime_env()
    llm.respond_with(answer_directly())
    quiet = aged_schedule(rt, pool, owner)  # nothing to look at: nothing was ignored
    never = aged_schedule(rt, pool, owner)
    service.update(rt, owner, never["id"], SchedulePatch(idle_pause_days=None))
    with pool.connection() as conn:  # the PATCH was an owner's change; make it old again
        conn.execute("UPDATE schedules SET updated_at = now() - %s WHERE id = %s", (WEEKS_AGO, never["id"]))
    result(pool, owner, never["id"], timedelta(days=15))
    for schedule in (quiet, never):
        out = fire(rt, schedule["id"], datetime(2026, 11, 22, 6, tzinfo=UTC), source="ticker")
        assert out.outcome == "started", out.detail
        finished_run(pool, owner, out.run_id)
    assert schedule_row(pool, never["id"])["idle_pause_days"] is None


def test_a_shorter_idle_period_per_schedule(runtime_env, pool, owner):
    rt = runtime_env()
    schedule = make_schedule(rt, owner, cron="0 6 * * *", idle_pause_days=2)
    assert schedule["idle_pause_days"] == 2
    with pool.connection() as conn:
        conn.execute("UPDATE schedules SET updated_at = now() - interval '3 days' WHERE id = %s", (schedule["id"],))
    result(pool, owner, schedule["id"], timedelta(days=2, hours=12))
    out = fire(rt, schedule["id"], datetime(2026, 11, 22, 6, tzinfo=UTC), source="ticker")
    assert out.outcome == "skipped" and out.detail.startswith("paused: nobody opened or acknowledged its results for 2 days")
    assert notices(pool, owner)[0]["status"] == "suppressed"  # no verified contact: recorded, not lost
