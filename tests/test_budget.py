"""The per-owner daily spending cap: checked before each model call of any run, from the usage
ledger, over the owner's own day; past it a run ends failed with a clear message (a worker fails
with it), nothing retries, and the owner is told once a day. One owner's spend never counts for
another."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.support.factories import make_job, make_run
from tests.support.reachable import outbox, verified_contact
from tests.support.schedules import fire_rows, make_schedule, runs_of, schedule_row
from tests.support.scripts import run_script
from zerg.alerts import budget
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import record_call
from zerg.notify import notifications
from zerg.notify.policy import PolicyChange, set_policy
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.schedules.firing import fire
from zerg.workers.runner import run_worker_job

MESSAGE = ("Daily spending cap of $2.50 reached ($2.51 spent today, UTC time): the run stopped. "
           "Raise it with `zerg policy set --daily-usd-cap` or PATCH /api/jarvis/policy.")


def set_cap(pool, owner_id: int, usd: str | None, timezone: str = "UTC") -> None:
    with pool.connection() as conn:
        set_policy(conn, owner_id, PolicyChange(daily_usd_cap=None if usd is None else Decimal(usd), timezone=timezone))


def spend(pool, owner_id: int, usd: float) -> None:
    """A model call of ``usd`` in the owner's ledger, now."""
    with pool.connection() as conn:
        record_call(conn, CallTag("supervisor", owner_id), ChatResult("gpt-4o", "", usage=Usage(100, 10, usd)), 5.0)


def start(pool, engine, owner_id: int, task: str = "check disk") -> dict:
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task)
    assert engine.wait(engine.start_execution(started.run_id, owner_id, started.thread_id), timeout=60)["status"] == "SUCCEEDED"
    assert engine.drain(timeout=60)
    with pool.connection() as conn:
        return runs.get_run(conn, owner_id, started.run_id)


def error_events(pool, owner_id: int, run_id: int) -> list[dict]:
    with pool.connection() as conn:
        return [e for e in events.list_events(conn, owner_id, run_id) if e["event_type"] == "error"]


def test_a_run_past_the_daily_cap_ends_failed_with_the_clear_message_and_no_model_call(
        runtime_env, llm, engine, pool, owner):
    runtime_env()
    llm.respond_with(run_script(["check disk"]))
    set_cap(pool, owner, "2.50")
    spend(pool, owner, 2.51)
    run = start(pool, engine, owner)
    assert (run["status"], run["error"]) == ("failed", MESSAGE)
    (error,) = error_events(pool, owner, run["id"])  # once: nothing retried the refused call
    assert error["payload"]["message"] == MESSAGE
    assert llm.requests == []  # refused before the call, every component (the post-run memory call too)


def test_a_cap_reached_mid_run_fails_its_workers_and_then_the_run(runtime_env, llm, engine, pool, owner):
    runtime_env()
    llm.respond_with(run_script(["check disk", "check memory"]))
    set_cap(pool, owner, "0.0001")  # the plan call itself costs more
    run = start(pool, engine, owner, "two checks")
    with pool.connection() as conn:
        job_rows = jobs.run_jobs(conn, owner, run["id"])
    assert run["status"] == "failed" and run["error"].startswith("Daily spending cap of $0.0001 reached (")
    assert len(job_rows) == 2 and all(j["status"] == "failed" and j["error"] == run["error"] for j in job_rows)
    assert [r.get("tools") is not None for r in llm.requests] == [True]  # the plan call; then nothing


def test_a_worker_past_the_cap_fails_with_the_message_without_calling_the_model(runtime_env, llm, pool, owner):
    rt = runtime_env()
    set_cap(pool, owner, "2.50")
    spend(pool, owner, 2.51)
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "check disk")
    outcome = run_worker_job(rt, job_id, owner, run_id)
    assert (outcome.status, outcome.error) == ("failed", MESSAGE)
    assert llm.requests == []


def test_the_owner_is_told_once_a_day_even_by_concurrent_runs(runtime_env, pool, owner, tmp_path):
    rt = runtime_env()
    verified_contact(pool, owner, "email")
    set_cap(pool, owner, "2.50")
    spend(pool, owner, 2.51)
    with pool.connection() as conn:
        state = budget.today(conn, owner)
    told: list[bool] = []
    threads = [threading.Thread(target=lambda: told.append(budget.tell_owner(rt, owner, state))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(told) == [False, False, False, True]
    assert budget.tell_owner(rt, owner, state) is False  # later the same day: still told already
    with pool.connection() as conn:
        sent = [n for n in notifications.list_for_owner(conn, owner) if n["purpose"] == "budget"]
    assert [(n["channel"], n["status"]) for n in sent] == [("email", "sent")]
    (message,) = outbox(tmp_path / "zerg-data")["email"]
    assert message["Subject"].strip() == "Zerg: daily spending cap of $2.50 reached"
    body = message.get_body(("plain",)).get_content()
    assert "$2.51 today (UTC time)" in body and "zerg policy set --daily-usd-cap" in body


def test_two_runs_stopped_by_the_cap_tell_the_owner_once(runtime_env, llm, engine, pool, owner, tmp_path):
    runtime_env()
    verified_contact(pool, owner, "email")
    set_cap(pool, owner, "2.50")
    spend(pool, owner, 2.51)
    assert start(pool, engine, owner)["status"] == "failed"
    assert start(pool, engine, owner, "check memory")["status"] == "failed"
    assert len(outbox(tmp_path / "zerg-data")["email"]) == 1


def test_the_cap_counts_the_owners_day_in_their_time_zone(runtime_env, pool, owner):
    runtime_env()
    set_cap(pool, owner, "1.00", timezone="Asia/Tokyo")
    spend(pool, owner, 1.50)
    now = datetime.now(UTC)
    with pool.connection() as conn:
        today = budget.today(conn, owner, now)
        tomorrow = budget.today(conn, owner, now + timedelta(days=1))
    assert today.reached and today.spent == Decimal("1.5") and today.timezone == "Asia/Tokyo"
    assert today.since.utcoffset() == timedelta(hours=9) and (today.since.hour, today.since.minute) == (0, 0)
    assert not tomorrow.reached and tomorrow.spent == 0  # a new day in Tokyo: the cap is whole again
    # 23:30 UTC on Jan 1 is already Jan 2 in Tokyo: its day began at 15:00 UTC.
    assert budget.day_start(datetime(2026, 1, 1, 23, 30, tzinfo=UTC), "Asia/Tokyo") == datetime(2026, 1, 1, 15, 0, tzinfo=UTC)


def test_no_cap_means_no_limit_and_a_zero_cap_stops_every_call(runtime_env, pool, owner):
    runtime_env()
    spend(pool, owner, 1000.0)
    with pool.connection() as conn:
        assert not budget.today(conn, owner).reached  # unset: none
    set_cap(pool, owner, "0")
    with pool.connection() as conn:
        assert budget.today(conn, owner).reached


def test_alices_spend_never_counts_for_bob(runtime_env, llm, engine, pool, alice, bob):
    runtime_env()
    llm.respond_with(run_script([]))
    set_cap(pool, alice.owner_id, "1.00")
    set_cap(pool, bob.owner_id, "1.00")
    spend(pool, alice.owner_id, 5.00)
    with pool.connection() as conn:
        assert budget.today(conn, bob.owner_id).spent == 0
    run = start(pool, engine, bob.owner_id)
    assert run["status"] == "success" and run["error"] is None
    assert start(pool, engine, alice.owner_id)["status"] == "failed"


@pytest.mark.parametrize(("amount", "up", "text"), [
    ("2.5", False, "$2.50"), ("0.0001", False, "$0.0001"), ("2.501", True, "$2.51"), ("3", False, "$3.00")])
def test_amounts_read_as_dollars_and_cents(amount, up, text):
    assert budget.usd(Decimal(amount), up=up) == text


def test_a_background_check_fired_past_the_cap_is_skipped_recorded_and_told_once(runtime_env, pool, owner, tmp_path):
    from functions.events.handler import handler

    rt = runtime_env()
    verified_contact(pool, owner, "email")
    set_cap(pool, owner, "2.50")
    spend(pool, owner, 2.51)
    check = make_schedule(rt, owner, cron="0 6 * * *")
    skipped = "daily spending cap reached ($2.51 of $2.50 spent today, UTC time)"
    for at in ("2026-11-22T06:00:00Z", "2026-11-23T06:00:00Z"):
        out = handler({"trigger": "schedule", "schedule_id": check["id"], "scheduled_time": at}, None)
        assert (out["outcome"], out["run_id"], out["detail"]) == ("skipped", None, skipped)
    assert runs_of(pool, owner) == []
    assert [(f["outcome"], f["detail"]) for f in fire_rows(pool, check["id"])] == [("skipped", skipped)] * 2
    assert schedule_row(pool, check["id"])["last_fire_at"].isoformat() == "2026-11-23T06:00:00+00:00"
    (notice,) = outbox(tmp_path / "zerg-data")["email"]  # told once, not per fire
    assert notice["Subject"].strip() == "Zerg: daily spending cap of $2.50 reached"

    # Reminders and digests use no model: they still go out.
    remind = make_schedule(rt, owner, kind="reminder", task="Renew the certificate", rate="1 day")
    assert fire(rt, remind["id"], datetime(2026, 11, 22, 9, tzinfo=UTC), source="ticker").outcome == "sent"
