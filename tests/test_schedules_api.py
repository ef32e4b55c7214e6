"""/api/jarvis/schedules on the Lambda path: the Scheduler schedule follows the row (moto), a
Scheduler that cannot be reached changes nothing, owners see only their own schedules, and bad
bodies are refused with messages that name the field."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.support.api import call, login
from tests.support.schedules import SCHEDULER_SETTINGS, moto_scheduler, scheduled

GROUP = "zerg-schedules-test"
ROLE, TARGET, DLQ = (SCHEDULER_SETTINGS[f"ZERG_{k}_ARN"] for k in ("SCHEDULER_ROLE", "SCHEDULE_TARGET", "SCHEDULE_DLQ"))


@pytest.fixture
def scheduler(runtime_env) -> Iterator:
    """Moto's EventBridge Scheduler with the project's group, and the runtime configured for it."""
    with moto_scheduler(runtime_env, GROUP) as (client, _):
        yield client


def test_creating_changing_and_deleting_a_schedule_creates_changes_and_deletes_the_scheduler_schedule(scheduler, alice):
    token = login(alice)
    status, created, _ = call("POST", "/api/jarvis/schedules", {
        "name": "health", "task": "check disk and memory on cube", "cron": "0 6 * * 1-5", "timezone": "Europe/Berlin",
        "channels": {"warning": ["email"], "critical": ["email", "sms", "sms"]}}, token=token)
    assert status == 201, created
    assert {k: created[k] for k in ("name", "kind", "cron", "rate", "at", "expression", "timezone", "enabled", "channels")} == {
        "name": "health", "kind": "check", "cron": "0 6 * * 1-5", "rate": None, "at": None,
        "expression": "cron(0 6 ? * 2-6 *)", "timezone": "Europe/Berlin", "enabled": True,
        "channels": {"warning": ["email"], "critical": ["email", "sms"]}}
    fire = datetime.fromisoformat(created["next_fire_at"])
    assert fire > datetime.now(UTC) and fire.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M %a") in {
        f"06:00 {day}" for day in ("Mon", "Tue", "Wed", "Thu", "Fri")}

    aws = scheduled(scheduler, created["id"], GROUP)
    assert aws["ScheduleExpression"] == "cron(0 6 ? * 2-6 *)" and aws["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert aws["State"] == "ENABLED" and aws["FlexibleTimeWindow"] == {"Mode": "OFF"} and aws["GroupName"] == GROUP
    assert aws["ActionAfterCompletion"] == "NONE"
    target = aws["Target"]
    assert (target["Arn"], target["RoleArn"]) == (TARGET, ROLE)
    assert json.loads(target["Input"]) == {"trigger": "schedule", "schedule_id": created["id"],
                                           "scheduled_time": "<aws.scheduler.scheduled-time>"}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
    assert target["DeadLetterConfig"] == {"Arn": DLQ}

    status, changed, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}",
                              {"rate": "15 minutes", "timezone": "America/New_York"}, token=token)
    assert status == 200, changed
    assert (changed["cron"], changed["rate"], changed["expression"]) == (None, "15 minutes", "rate(15 minutes)")
    aws = scheduled(scheduler, created["id"], GROUP)
    assert (aws["ScheduleExpression"], aws["ScheduleExpressionTimezone"]) == ("rate(15 minutes)", "America/New_York")
    # Scheduler's rate starts at the row's next fire, so both count from the same instants.
    assert aws["StartDate"] == datetime.fromisoformat(changed["next_fire_at"])
    assert json.loads(aws["Target"]["Input"])["schedule_id"] == created["id"]
    assert aws["Target"]["DeadLetterConfig"] == {"Arn": DLQ}

    status, paused, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", {"enabled": False}, token=token)
    assert (status, paused["enabled"], paused["next_fire_at"]) == (200, False, None)
    assert scheduled(scheduler, created["id"], GROUP)["State"] == "DISABLED"

    status, _, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", {"task": "only the disks"}, token=token)
    assert status == 200 and scheduled(scheduler, created["id"], GROUP)["State"] == "DISABLED"

    status, body, _ = call("DELETE", f"/api/jarvis/schedules/{created['id']}", token=token)
    assert (status, body) == (204, "")
    assert scheduled(scheduler, created["id"], GROUP) is None
    assert call("GET", f"/api/jarvis/schedules/{created['id']}", token=token)[0] == 404


def test_a_one_off_at_becomes_schedulers_at_in_its_zone_and_stays_until_its_row_goes(scheduler, alice):
    token = login(alice)
    local = (datetime.now(ZoneInfo("Asia/Tokyo")) + timedelta(days=2)).replace(second=0, microsecond=0, tzinfo=None)
    status, created, _ = call("POST", "/api/jarvis/schedules", {
        "name": "renew cert", "kind": "reminder", "task": "renew the TLS certificate", "at": f"{local:%Y-%m-%dT%H:%M}",
        "timezone": "Asia/Tokyo"}, token=token)
    assert status == 201, created
    assert created["at"] == local.isoformat() and created["expression"] == f"at({local:%Y-%m-%dT%H:%M:%S})"
    aws = scheduled(scheduler, created["id"], GROUP)
    assert (aws["ScheduleExpression"], aws["ScheduleExpressionTimezone"]) == (created["expression"], "Asia/Tokyo")
    assert aws["ActionAfterCompletion"] == "NONE"  # the row outlives the fire; the schedule goes with the row


@pytest.fixture
def unreachable(runtime_env) -> Iterator:
    """Reconfigures the runtime so Scheduler's endpoint is a closed loopback port."""
    def configure() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()  # nothing listens there now: every call is refused
        runtime_env(ZERG_SCHEDULE_GROUP=GROUP, **SCHEDULER_SETTINGS, AWS_ENDPOINT_URL_SCHEDULER=f"http://127.0.0.1:{port}")
    return configure


def test_a_scheduler_that_cannot_be_reached_changes_nothing_and_answers_503(scheduler, alice, unreachable, monkeypatch):
    token = login(alice)
    status, created, _ = call("POST", "/api/jarvis/schedules",
                              {"name": "health", "task": "check", "cron": "0 6 * * *"}, token=token)
    assert status == 201
    unreachable()

    unchanged = "the schedule could not be saved in EventBridge Scheduler; nothing changed; try again shortly"
    status, body, raw = call("PATCH", f"/api/jarvis/schedules/{created['id']}",
                             {"cron": "30 7 * * *", "name": "renamed"}, token=token)
    assert (status, body) == (503, {"error": "unavailable", "message": unchanged}) and "Retry-After" in raw["headers"]
    status, body, _ = call("DELETE", f"/api/jarvis/schedules/{created['id']}", token=token)
    assert (status, body["message"]) == (503, "the schedule could not be deleted in EventBridge Scheduler; "
                                               "nothing changed; try again shortly")
    status, body, _ = call("POST", "/api/jarvis/schedules", {"name": "second", "task": "t", "rate": "1 hour"}, token=token)
    assert (status, body["message"]) == (503, unchanged)

    assert call("GET", "/api/jarvis/schedules", token=token)[1] == {"schedules": [created]}
    # Reachable again: the same change goes through, row and Scheduler together.
    monkeypatch.delenv("AWS_ENDPOINT_URL_SCHEDULER")
    from zerg import config, wiring

    config.get_settings.cache_clear()
    wiring.reset_runtime()
    status, changed, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", {"cron": "30 7 * * *"}, token=token)
    assert status == 200 and scheduled(scheduler, created["id"], GROUP)["ScheduleExpression"] == "cron(30 7 * * ? *)"


# --- owner isolation and bad input (the local ticker's rows) --------------------------------------

def test_another_owners_schedule_is_not_found_on_every_route(runtime_env, alice, bob):
    runtime_env()
    mine, theirs = login(alice), login(bob)
    status, created, _ = call("POST", "/api/jarvis/schedules",
                              {"name": "health", "task": "check", "rate": "1 hour"}, token=mine)
    assert status == 201
    path = f"/api/jarvis/schedules/{created['id']}"
    gone = {"error": "not_found", "message": f"schedule {created['id']} not found"}
    assert call("GET", path, token=theirs)[:2] == (404, gone)
    assert call("PATCH", path, {"enabled": False}, token=theirs)[:2] == (404, gone)
    assert call("DELETE", path, token=theirs)[:2] == (404, gone)
    assert call("GET", "/api/jarvis/schedules", token=theirs)[:2] == (200, {"schedules": []})
    # Bob may use the same name: names are unique per owner.
    assert call("POST", "/api/jarvis/schedules", {"name": "health", "task": "t", "rate": "1 day"}, token=theirs)[0] == 201
    assert call("GET", path, token=mine)[1] == created  # untouched by any of it


@pytest.mark.parametrize(("body", "message"), [
    ({"name": "x", "task": "t", "cron": "0 6 1 * 1"},
     "cron: both day-of-month (1) and day-of-week (1) are restricted: Unix cron then runs on days matching EITHER, "
     "and EventBridge Scheduler cannot express that 'or' (one of the two must be '?'); set one of them to '*' "
     "(or make two schedules)"),
    ({"name": "x", "task": "t", "rate": "1 hour", "timezone": "Europe/Berln"},
     "timezone: unknown time zone 'Europe/Berln'; give an IANA name such as Europe/Berlin, America/New_York or UTC"),
    ({"name": "x", "task": "t", "cron": "0 6 * * *", "rate": "1 hour"},
     "give exactly one of cron, rate or at (got cron and rate)"),
    ({"name": "x", "task": "t"}, "give exactly one of cron, rate or at: none was given"),
    ({"name": "x", "task": "t", "cron": "0 6 * * * *"}, "cron: 6 fields given; write standard 5-field Unix cron "
     "'minute hour day-of-month month day-of-week' (no seconds or year field), e.g. '0 6 * * 1'"),
    ({"name": "x", "task": "t", "rate": "0 minutes"}, "rate: must be at least 1 minute (got 0)"),
    ({"name": "x", "task": "t", "at": "2020-01-01T09:00", "timezone": "UTC"}, "at: 2020-01-01T09:00 in UTC is in the past"),
    ({"name": "x", "rate": "1 hour"}, "task: required for a check schedule (what the background run does)"),
    ({"name": "x", "kind": "reminder", "rate": "1 hour"}, "task: required for a reminder schedule (the text to send)"),
    ({"name": "  ", "task": "t", "rate": "1 hour"}, "name: must not be blank"),
    ({"name": "42", "task": "t", "rate": "1 hour"}, "name: must not be only digits (a number names a schedule by its id)"),
    ({"task": "t", "rate": "1 hour"}, "name: Field required"),
    ({"name": "x", "task": "t", "rate": "1 hour", "kind": "weekly"}, "kind: Input should be 'check', 'digest' or 'reminder'"),
    ({"name": "x", "task": "t", "rate": "1 hour", "channels": {"urgent": ["sms"]}},
     "channels.urgent.[key]: Input should be 'info', 'warning' or 'critical'"),
    ({"name": "x", "task": "t", "rate": "1 hour", "channels": {"warning": ["pager"]}},
     "channels.warning.0: Input should be 'email' or 'sms'"),
    ({"name": "x", "task": "t", "rate": "1 hour", "every": "day"}, "every: Extra inputs are not permitted"),
])
def test_a_bad_body_gets_422_naming_the_field_and_why(runtime_env, alice, body, message):
    runtime_env()
    status, answer, _ = call("POST", "/api/jarvis/schedules", body, token=login(alice))
    assert (status, answer["error"]) == (422, "validation_error")
    assert answer["message"].startswith(message), answer["message"]
    assert call("GET", "/api/jarvis/schedules", token=login(alice))[1] == {"schedules": []}


@pytest.mark.parametrize("zone", ["localtime", "Factory", "posixrules"])
def test_a_zone_that_names_no_place_is_a_422_on_create_and_on_change(runtime_env, alice, zone):
    # Listed by some systems' tzdata, but the machine's own setting or a placeholder: no owner lives there.
    runtime_env()
    token = login(alice)
    status, answer, _ = call("POST", "/api/jarvis/schedules",
                             {"name": "x", "task": "t", "rate": "1 hour", "timezone": zone}, token=token)
    assert status == 422 and answer["message"] == (f"timezone: unknown time zone {zone!r}; give an IANA name such as "
                                                   "Europe/Berlin, America/New_York or UTC")
    created = call("POST", "/api/jarvis/schedules", {"name": "x", "task": "t", "rate": "1 hour"}, token=token)[1]
    status, answer, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", {"timezone": zone}, token=token)
    assert status == 422 and answer["message"].startswith(f"timezone: unknown time zone {zone!r}")
    assert call("GET", f"/api/jarvis/schedules/{created['id']}", token=token)[1] == created


@pytest.mark.parametrize(("patch", "message"), [
    ({"cron": "0 6 * * *", "at": "2030-01-01T00:00"}, "give at most one of cron, rate or at (got cron and at)"),
    ({"name": None}, "name: must not be null"),
    ({"timezone": "Mars/Olympus"}, "timezone: unknown time zone 'Mars/Olympus'"),
    ({"cron": "0 0 L * *"}, "cron: day-of-month: 'L': L and W (last day, nearest weekday) are not standard Unix cron"),
])
def test_a_bad_patch_gets_422_and_changes_nothing(runtime_env, alice, patch, message):
    runtime_env()
    token = login(alice)
    created = call("POST", "/api/jarvis/schedules", {"name": "x", "task": "t", "rate": "1 hour"}, token=token)[1]
    status, answer, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", patch, token=token)
    assert (status, answer["error"]) == (422, "validation_error") and answer["message"].startswith(message)
    assert call("GET", f"/api/jarvis/schedules/{created['id']}", token=token)[1] == created


def test_a_taken_name_is_a_409_on_create_and_on_rename(runtime_env, alice):
    runtime_env()
    token = login(alice)
    first = call("POST", "/api/jarvis/schedules", {"name": "health", "task": "t", "rate": "1 hour"}, token=token)[1]
    second = call("POST", "/api/jarvis/schedules", {"name": "digest", "kind": "digest", "cron": "0 7 * * *"}, token=token)[1]
    assert second["task"] == "Morning digest"
    taken = {"error": "conflict", "message": "name: a schedule named 'health' exists already"}
    again = {"name": "health", "task": "t", "rate": "1 day"}
    assert call("POST", "/api/jarvis/schedules", again, token=token)[:2] == (409, taken)
    assert call("PATCH", f"/api/jarvis/schedules/{second['id']}", {"name": " health "}, token=token)[:2] == (409, taken)
    listed = call("GET", "/api/jarvis/schedules", token=token)[1]["schedules"]
    assert [s["name"] for s in listed] == ["health", "digest"] and listed[0] == first
