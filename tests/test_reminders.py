"""Reminders: a reminder schedule's fire sends its text to the owner's verified contacts without a
run; the supervisor creates one in a run a person started (scripted model), never in a scheduled
run; one owner's reminders are nobody else's."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.support.factories import run_task
from tests.support.reachable import outbox, parts, verified_contact
from tests.support.scripts import has_tool_results, memory_call
from zerg.alerts.reminders import send_reminder
from zerg.loop.tool import ToolContext, invoke
from zerg.notify import notifications
from zerg.notify.policy import PolicyChange, set_policy
from zerg.runs import store as runs
from zerg.schedules import service
from zerg.schedules import store as schedules
from zerg.schedules.spec import ScheduleSpec
from zerg.tools.reminder_tools import TOOL

BERLIN = ZoneInfo("Europe/Berlin")


def tomorrow_9() -> str:
    return (datetime.now(BERLIN) + timedelta(days=1)).strftime("%Y-%m-%dT09:00")


def reminder(rt, pool, owner_id: int, text: str = "Renew the TLS certificate", channels=None) -> dict:
    created = service.create(rt, owner_id, ScheduleSpec(name="cert", kind="reminder", task=text, at=tomorrow_9(),
                                                        timezone="Europe/Berlin", channels=channels))
    with pool.connection() as conn:
        return schedules.get(conn, owner_id, created["id"])


def run_count(pool, owner_id: int) -> int:
    with pool.connection() as conn:
        return len(list(runs.export_runs(conn, owner_id)))


def test_a_reminder_fire_sends_its_text_to_every_verified_contact_without_a_run(runtime_env, pool, alice, tmp_path):
    rt = runtime_env()
    email = verified_contact(pool, alice.owner_id, "email")
    sms = verified_contact(pool, alice.owner_id, "sms")
    schedule = reminder(rt, pool, alice.owner_id)
    outcome, detail = send_reminder(rt, schedule, schedule["next_fire_at"])
    assert outcome == "sent" and email["address"] in detail and sms["address"] in detail
    box = outbox(tmp_path / "zerg-data")
    (message,) = box["email"]
    text, _ = parts(message)
    assert message["Subject"].strip() == "Reminder: Renew the TLS certificate" and message["To"] == email["address"]
    assert text.startswith("Renew the TLS certificate\n") and "09:00 Europe/Berlin" in text
    assert [(s["to"], s["parts"]) for s in box["sms"]] == [(sms["address"], ["Reminder: Renew the TLS certificate"])]
    with pool.connection() as conn:
        sent = notifications.list_for_owner(conn, alice.owner_id)
    assert sorted((n["channel"], n["purpose"], n["status"], n["schedule_id"]) for n in sent) == [
        ("email", "reminder", "sent", schedule["id"]), ("sms", "reminder", "sent", schedule["id"])]
    assert run_count(pool, alice.owner_id) == 0  # no run, no model


def test_a_reminders_channel_override_decides_where_it_goes(runtime_env, pool, alice, tmp_path):
    rt = runtime_env()
    verified_contact(pool, alice.owner_id, "email")
    verified_contact(pool, alice.owner_id, "sms")
    schedule = reminder(rt, pool, alice.owner_id, channels={"warning": ["sms"]})
    assert send_reminder(rt, schedule, schedule["next_fire_at"])[0] == "sent"
    box = outbox(tmp_path / "zerg-data")
    assert box["email"] == [] and len(box["sms"]) == 1


def test_a_reminder_to_an_owner_without_a_verified_contact_is_recorded_as_suppressed(runtime_env, pool, alice, tmp_path):
    rt = runtime_env()
    schedule = reminder(rt, pool, alice.owner_id)
    outcome, detail = send_reminder(rt, schedule, schedule["next_fire_at"])
    assert outcome == "failed" and "no verified email contact" in detail
    with pool.connection() as conn:
        (row,) = notifications.list_for_owner(conn, alice.owner_id)
    assert (row["purpose"], row["status"], row["reason"]) == ("reminder", "suppressed", "no verified email contact")
    assert outbox(tmp_path / "zerg-data") == {"email": [], "sms": []}


def reminder_script(at: str, timezone: str | None = None, background: bool = False):
    """The supervisor calls create_reminder once, then answers (JSON in a scheduled run)."""
    args = {"text": "Renew the TLS certificate", "at": at} | ({"timezone": timezone} if timezone else {})

    def respond(request):
        if memory_call(request):
            return {"content": "{}"}
        if not has_tool_results(request):
            return {"tool_calls": [("create_reminder", args)]}
        if background:
            return {"content": json.dumps({"severity": "info", "headline": "Checked", "details": "nothing"})}
        return {"content": "I'll remind you tomorrow at 09:00."}

    return respond


def tool_results(request) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_the_supervisor_creates_a_reminder_schedule_in_the_owners_time_zone(runtime_env, llm, engine, pool, alice, bob):
    rt = runtime_env()
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(timezone="Europe/Berlin"))
    at = tomorrow_9()
    llm.respond_with(reminder_script(at))
    run = run_task(pool, engine, alice.owner_id, "remind me tomorrow at 9 to renew the cert")
    assert run["status"] == "success"
    (created,) = service.list_schedules(rt, alice.owner_id)
    assert (created["kind"], created["task"], created["at"], created["timezone"]) == (
        "reminder", "Renew the TLS certificate", at + ":00", "Europe/Berlin")  # the owner's zone by default
    assert created["next_fire_at"].astimezone(BERLIN).strftime("%Y-%m-%dT%H:%M") == at
    (result,) = next(tool_results(r) for r in llm.requests if tool_results(r))
    day = datetime.strptime(at, "%Y-%m-%dT%H:%M").strftime("%A %Y-%m-%d")
    assert (f"Reminder #{created['id']} 'reminder: Renew the TLS certificate' created: it will be sent to "
                      f"the user's email/SMS on {day} 09:00 (Europe/Berlin).") in result  # inside the tool-output fence
    assert service.list_schedules(rt, bob.owner_id) == []  # alice's reminder is hers only


def test_a_scheduled_run_has_no_reminder_tool_and_cannot_create_one(runtime_env, llm, engine, pool, alice):
    rt = runtime_env()
    llm.respond_with(reminder_script(tomorrow_9(), "Europe/Berlin", background=True))
    run = run_task(pool, engine, alice.owner_id, "check the servers", trigger="schedule")
    first = next(r for r in llm.requests if not memory_call(r))
    assert "create_reminder" not in {t["function"]["name"] for t in first["tools"]}
    (result,) = next(tool_results(r) for r in llm.requests if tool_results(r))
    assert "ERROR: unknown tool 'create_reminder'" in result
    assert run["status"] == "success" and service.list_schedules(rt, alice.owner_id) == []

    # Called anyway with a scheduled run's context (not through its tool set): refused.
    outcome = invoke({TOOL.name: TOOL}, TOOL.name, json.dumps({"text": "x", "at": tomorrow_9()}),
                     ToolContext(settings=rt.settings, owner_id=alice.owner_id, run_id=run["id"], runtime=rt))
    assert outcome.text == "ERROR: reminders can only be created in a run the user started, not in a scheduled run"
    assert service.list_schedules(rt, alice.owner_id) == []


@pytest.mark.parametrize(("args", "error"), [
    ({"text": "x"}, "give exactly one of at, cron or rate (got none)"),
    ({"text": "x", "at": "2026-01-01T09:00", "rate": "1 day"}, "give exactly one of at, cron or rate (got at and rate)"),
])
def test_the_reminder_tool_tells_the_model_what_is_wrong(runtime_env, args, error):
    rt = runtime_env()
    outcome = invoke({TOOL.name: TOOL}, TOOL.name, json.dumps(args), ToolContext(settings=rt.settings))
    assert not outcome.ok and error in outcome.text


def test_a_reminder_in_the_past_is_refused_as_text_for_the_model(runtime_env, pool, alice):
    rt = runtime_env()
    with pool.connection() as conn:
        started = runs.start_run(conn, alice.owner_id, "remind me")
    outcome = invoke({TOOL.name: TOOL}, TOOL.name, json.dumps({"text": "x", "at": "2020-01-01T09:00"}),
                     ToolContext(settings=rt.settings, owner_id=alice.owner_id, run_id=started.run_id, runtime=rt))
    assert not outcome.ok and outcome.text.startswith("ERROR: ") and "past" in outcome.text
    assert service.list_schedules(rt, alice.owner_id) == []


def test_a_reminder_schedule_fire_sends_once_per_scheduled_time_and_starts_no_run(runtime_env, pool, alice, tmp_path):
    from tests.support.schedules import fire_rows
    from zerg.schedules.firing import fire

    rt = runtime_env()
    verified_contact(pool, alice.owner_id, "email")
    schedule = reminder(rt, pool, alice.owner_id)
    first = fire(rt, schedule["id"], schedule["next_fire_at"], source="ticker")
    again = fire(rt, schedule["id"], schedule["next_fire_at"], source="scheduler")
    assert (first.outcome, first.run_id) == ("sent", None) and again.duplicate
    assert len(outbox(tmp_path / "zerg-data")["email"]) == 1 and run_count(pool, alice.owner_id) == 0
    (row,) = fire_rows(pool, schedule["id"])
    assert row["outcome"] == "sent" and row["detail"].startswith("reminder to email ")
    with pool.connection() as conn:
        assert schedules.get(conn, alice.owner_id, schedule["id"])["next_fire_at"] is None  # a one-off: done
