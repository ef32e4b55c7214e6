"""The notification policy: defaults until changed, one validated change path (API PATCH, CLI,
``set_policy``), only the given fields change, quiet hours in the owner's time zone (wrapping
midnight, across DST), and each owner's policy is their own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time
from decimal import Decimal

import pytest

from tests.support.api import call
from zerg.cli.main import main
from zerg.notify.policy import DEFAULTS, Policy, PolicyError, change_from, get_policy, in_quiet_hours, set_policy


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def token(owner) -> str:
    return call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})[1]["token"]


def test_an_owner_without_a_row_has_the_documented_defaults(rt, alice):
    status, body, _ = call("GET", "/api/jarvis/policy", token=token(alice))
    assert status == 200 and body == {
        "timezone": "UTC", "channels": {"info": [], "warning": ["email", "sms"], "critical": ["email", "sms"]},
        "quiet_hours": None, "daily_email_limit": 50, "daily_sms_limit": 10, "daily_usd_cap": None,
        "push": ["warning", "critical"], "daily_push_limit": 50,
        "escalation_repeats": 3, "escalation_every_s": 900, "run_usd_budget": None, "run_token_budget": None,
        "model_prices": {}, "updated_at": None}


def test_patch_changes_only_what_it_names_and_answers_the_whole_policy(rt, alice, bob):
    tok = token(alice)
    status, body, _ = call("PATCH", "/api/jarvis/policy", {"quiet_hours": "22:00-07:00", "timezone": "Europe/Berlin",
                                                          "channels": {"warning": ["sms", "email", "sms"]},
                                                          "daily_usd_cap": 2.5}, token=tok)
    assert status == 200
    assert body["quiet_hours"] == "22:00-07:00" and body["timezone"] == "Europe/Berlin" and body["daily_usd_cap"] == 2.5
    assert body["channels"] == {"info": [], "warning": ["email", "sms"], "critical": ["email", "sms"]}  # ordered, once
    assert body["updated_at"] is not None

    status, body, _ = call("PATCH", "/api/jarvis/policy", {"channels": {"info": ["email"]}, "daily_sms_limit": 3}, token=tok)
    assert body["channels"] == {"info": ["email"], "warning": ["email", "sms"], "critical": ["email", "sms"]}
    assert (body["daily_sms_limit"], body["quiet_hours"], body["daily_usd_cap"]) == (3, "22:00-07:00", 2.5)  # kept

    status, body, _ = call("PATCH", "/api/jarvis/policy", {"quiet_hours": "off", "daily_usd_cap": None}, token=tok)
    assert (body["quiet_hours"], body["daily_usd_cap"], body["timezone"]) == (None, None, "Europe/Berlin")

    assert call("GET", "/api/jarvis/policy", token=token(bob))[1]["updated_at"] is None  # bob's stays the defaults


@pytest.mark.parametrize(("change", "message"), [
    ({"timezone": "Mars/Olympus"}, "timezone: Value error, 'Mars/Olympus' is not an IANA time zone"),
    ({"timezone": "../../etc/passwd"}, "is not an IANA time zone"),
    ({"quiet_hours": "22-07"}, "quiet_hours: Value error, '22-07' is not HH:MM-HH:MM"),
    ({"quiet_hours": "24:00-07:00"}, "is not HH:MM-HH:MM"),
    ({"quiet_hours": "07:00-07:00"}, "starts and ends at the same minute"),
    ({"channels": {"warning": ["pager"]}}, "channels.warning.0: Input should be 'email' or 'sms'"),
    ({"channels": {"urgent": ["sms"]}}, "channels.urgent.[key]: Input should be 'info', 'warning' or 'critical'"),
    ({"daily_usd_cap": -1}, "daily_usd_cap: Input should be greater than or equal to 0"),
    ({"daily_email_limit": 10_001}, "daily_email_limit: Input should be less than or equal to 10000"),
    ({"escalation_every_s": 0}, "escalation_every_s: Input should be greater than or equal to 1"),
    ({"escalation_repeats": 21}, "escalation_repeats: Input should be less than or equal to 20"),
    ({"timezone": None}, "timezone: may not be null (leave it out to keep it)"),
    ({"owner_id": 1}, "owner_id: Extra inputs are not permitted"),
])
def test_a_bad_change_is_a_422_naming_the_field_and_changes_nothing(rt, alice, change, message):
    tok = token(alice)
    status, body, _ = call("PATCH", "/api/jarvis/policy", change, token=tok)
    assert status == 422 and body["error"] == "validation_error" and message in body["message"], body
    assert call("GET", "/api/jarvis/policy", token=tok)[1]["updated_at"] is None


@pytest.mark.parametrize("zone", ["localtime", "Factory", "posixrules"])
def test_a_zone_that_names_no_place_is_a_422_though_the_system_lists_it(rt, alice, zone):
    # localtime and posixrules are whatever the machine is set to, Factory is tzdata's placeholder.
    tok = token(alice)
    status, body, _ = call("PATCH", "/api/jarvis/policy", {"timezone": zone}, token=tok)
    assert status == 422 and f"timezone: Value error, {zone!r} is not an IANA time zone" in body["message"], body
    assert call("GET", "/api/jarvis/policy", token=tok)[1]["timezone"] == "UTC"


def test_set_policy_is_the_path_for_plain_values_too(rt, alice, pool):
    with pool.connection() as conn:
        policy = set_policy(conn, alice.owner_id, change_from({"escalation_repeats": 5, "daily_usd_cap": "1.25"}))
        assert policy.escalation_repeats == 5 and policy.daily_usd_cap == Decimal("1.25")
        assert get_policy(conn, alice.owner_id) == policy
    with pytest.raises(PolicyError, match="^quiet_hours: 'noon' is not HH:MM-HH:MM"):
        change_from({"quiet_hours": "noon"})


def test_the_cli_shows_and_sets_the_policy(rt, alice, capsys):
    who = ["--owner", alice.name]
    assert main(["policy", "set", "--quiet-hours", "22:00-07:00", "--timezone", "Europe/Berlin",
                 "--channels", "warning=email,sms", "--channels", "info=none", "--daily-usd-cap", "2.50",
                 "--escalation-every", "600", *who]) == 0
    out = capsys.readouterr().out
    assert "quiet hours:      22:00-07:00" in out and "time zone:        Europe/Berlin" in out
    assert "info:             inbox only" in out and "daily USD cap:    2.50" in out and "every 600 s" in out
    assert main(["policy", "set", "--daily-usd-cap", "none", *who]) == 0
    assert "daily USD cap:    none" in capsys.readouterr().out
    assert main(["policy", "show", *who]) == 0
    assert "warning:          email, sms" in capsys.readouterr().out
    assert main(["policy", "set", "--channels", "warning", *who]) == 2
    assert "give SEVERITY=CHANNELS" in capsys.readouterr().err
    assert main(["policy", "set", "--timezone", "Nowhere/Land", *who]) == 2
    assert "'Nowhere/Land' is not an IANA time zone" in capsys.readouterr().err


def test_the_cli_sets_a_runs_budget_and_the_price_of_a_model_zerg_does_not_know(rt, alice, capsys):
    who = ["--owner", alice.name]
    assert main(["policy", "set", "--run-usd-budget", "0.50", "--run-token-budget", "200000",
                 "--model-price", "acme-large=1,2", "--model-price", "acme-small=0.1,0.2", *who]) == 0
    out = capsys.readouterr().out
    assert "run budget:       0.50 USD, 200000 tokens" in out
    assert "model price:      acme-large: 1.0 in, 2.0 out (USD per million tokens)" in out
    assert main(["policy", "set", "--model-price", "acme-small=none", "--run-token-budget", "none", *who]) == 0
    out = capsys.readouterr().out  # merged: one model removed, the other kept
    assert "acme-small" not in out and "acme-large: 1.0 in" in out and "0.50 USD, no token limit" in out
    assert main(["policy", "set", "--model-price", "acme-large=cheap", *who]) == 2
    assert "--model-price 'acme-large=cheap': give two amounts, IN,OUT" in capsys.readouterr().err


def test_the_api_sets_model_prices_and_a_run_budget_and_refuses_a_bad_price(rt, alice, bob):
    tok = token(alice)
    status, body, _ = call("PATCH", "/api/jarvis/policy", {"run_usd_budget": 0.25, "model_prices": {"acme": [1, 2]}},
                           token=tok)
    assert status == 200 and (body["run_usd_budget"], body["model_prices"]) == (0.25, {"acme": [1.0, 2.0]})
    status, body, _ = call("PATCH", "/api/jarvis/policy", {"model_prices": {"acme": [1]}}, token=tok)
    assert status == 422 and "model_prices" in json.dumps(body)
    status, body, _ = call("GET", "/api/jarvis/policy", token=token(bob))
    assert (body["run_usd_budget"], body["model_prices"]) == (None, {})  # alice's are hers


# --- quiet hours ----------------------------------------------------------------------------------

def quiet(hours: str, zone: str = "UTC") -> Policy:
    start, end = hours.split("-")
    return Policy(timezone=zone, quiet_start=time.fromisoformat(start), quiet_end=time.fromisoformat(end))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(("hours", "now", "ends"), [
    ("22:00-07:00", "2025-03-10T23:30", "2025-03-11T07:00"),  # wraps midnight: ends tomorrow
    ("22:00-07:00", "2025-03-10T03:00", "2025-03-10T07:00"),  # after midnight: ends today
    ("22:00-07:00", "2025-03-10T22:00", "2025-03-11T07:00"),  # the start is inside
    ("22:00-07:00", "2025-03-10T07:00", None),  # the end is outside
    ("22:00-07:00", "2025-03-10T12:00", None),
    ("12:00-14:00", "2025-03-10T13:59", "2025-03-10T14:00"),
    ("12:00-14:00", "2025-03-10T11:59", None),
])
def test_quiet_hours_say_when_they_end(hours, now, ends):
    assert in_quiet_hours(quiet(hours), at(now)) == (ends and at(ends))


def test_quiet_hours_are_the_owners_wall_clock_across_a_dst_change():
    berlin = quiet("22:00-07:00", "Europe/Berlin")
    # The night of 29-30 March 2025 Berlin moves from UTC+1 to UTC+2: 07:00 local is 05:00 UTC.
    assert in_quiet_hours(berlin, at("2025-03-29T21:30")) == at("2025-03-30T05:00")
    assert in_quiet_hours(berlin, at("2025-03-29T20:30")) is None  # 21:30 local, before they start
    gap = quiet("01:00-02:30", "Europe/Berlin")  # 02:30 does not exist that night: read at the old offset, 03:30 CEST
    assert in_quiet_hours(gap, at("2025-03-30T00:30")) == at("2025-03-30T01:30")


def test_no_quiet_hours_by_default():
    assert DEFAULTS.quiet_hours is None and in_quiet_hours(DEFAULTS, at("2025-03-10T03:00")) is None
