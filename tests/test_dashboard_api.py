"""The API the dashboard's polish needs (issue 29 items 7 and 9): the usage report's totals and the
previous period's, the schedule preview, the model menu, tool descriptions and "test connection"
of a host, through the handler (the real database; sshd on loopback for the host test). Each read is
scoped by owner; bad input is a 4xx naming the field."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from tests.support.api import call, login
from tests.support.factories import make_run
from tests.support.hosts import add_host, assert_no_key
from tests.support.ssh_server import _keypair
from tests.test_usage_api import _ledger_row, _utc
from zerg.notify.policy import change_from, set_policy

# --- usage: totals and the previous period ------------------------------------------------------


@pytest.fixture
def spend(runtime_env, pool, alice, bob):
    """Alice: two runs on 2026-03-01..03 and a call of no run; one run in the 3 days before; Bob: a
    run in both periods."""
    runtime_env()
    a1, _ = make_run(pool, alice.owner_id, "first")
    a2, _ = make_run(pool, alice.owner_id, "second")
    a0, _ = make_run(pool, alice.owner_id, "earlier")
    b1, _ = make_run(pool, bob.owner_id, "bob's")
    rows = [
        (alice, "supervisor", _utc("2026-03-01"), 100, 10, 0.5, a1),
        (alice, "worker", _utc("2026-03-01"), 200, 20, 0.25, a1),
        (alice, "supervisor", _utc("2026-03-03", "23:59:59"), 300, 30, 0.125, a2),
        (alice, "memory", _utc("2026-03-02"), 50, 5, None, None),  # no run, unknown price
        (alice, "supervisor", _utc("2026-02-26"), 40, 4, 0.0625, a0),  # the previous 3 days
        (alice, "supervisor", _utc("2026-02-25", "23:59:59"), 999, 999, 9.0, a0),  # before both periods
        (bob, "supervisor", _utc("2026-03-02"), 7, 7, 5.0, b1),
        (bob, "supervisor", _utc("2026-02-27"), 7, 7, 5.0, b1),
    ]
    for who, component, at, t_in, t_out, cost, run_id in rows:
        _ledger_row(pool, who.owner_id, component, "gpt-a", at, t_in, t_out, cost, run_id=run_id)
    return login(alice), login(bob)


def test_the_usage_report_carries_the_periods_totals_and_the_previous_periods(spend):
    alice, _ = spend
    status, body, _ = call("GET", "/api/jarvis/usage?from=2026-03-01&to=2026-03-03&group_by=model", token=alice)
    assert status == 200, body
    assert body["totals"] == {"calls": 4, "tokens_in": 650, "tokens_out": 65, "cost_usd": 0.875,
                              "cost_known": False, "runs": 2}
    assert body["previous"] == {"from": "2026-02-26", "to": "2026-02-28", "calls": 1, "tokens_in": 40,
                                "tokens_out": 4, "cost_usd": 0.0625, "cost_known": True, "runs": 1}
    # The totals are the period's whatever the grouping leaves out (job: calls of no job).
    _, by_job, _ = call("GET", "/api/jarvis/usage?from=2026-03-01&to=2026-03-03&group_by=job", token=alice)
    assert by_job["rows"] == [] and by_job["totals"] == body["totals"]


def test_another_owners_calls_count_in_neither_period(spend):
    _, bob = spend
    _, body, _ = call("GET", "/api/jarvis/usage?from=2026-03-01&to=2026-03-03", token=bob)
    assert body["totals"] == {"calls": 1, "tokens_in": 7, "tokens_out": 7, "cost_usd": 5.0, "cost_known": True,
                              "runs": 1}
    assert (body["previous"]["calls"], body["previous"]["cost_usd"], body["previous"]["runs"]) == (1, 5.0, 1)


def test_an_empty_period_has_zero_totals_and_one_starting_in_1970_has_no_previous(spend):
    alice, _ = spend
    _, body, _ = call("GET", "/api/jarvis/usage?from=2020-01-01&to=2020-01-31", token=alice)
    assert body["totals"] == {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "cost_known": True,
                              "runs": 0}
    assert (body["previous"]["from"], body["previous"]["to"]) == ("2019-12-01", "2019-12-31")
    _, first, _ = call("GET", "/api/jarvis/usage?from=1970-01-01&to=1970-01-02", token=alice)
    assert first["previous"] is None


# --- schedules: the preview of the next fires ---------------------------------------------------


def _preview(token, body):
    return call("POST", "/api/jarvis/schedules/preview", body, token=token)


def test_a_cron_preview_lists_the_next_five_fires_in_its_time_zone(runtime_env, alice):
    runtime_env()
    status, body, _ = _preview(login(alice), {"cron": "30 6 * * 1-5", "timezone": "Europe/Berlin"})
    assert status == 200, body
    assert (body["kind"], body["text"], body["expression"], body["timezone"]) == (
        "cron", "30 6 * * 1-5", "cron(30 6 ? * 2-6 *)", "Europe/Berlin")
    fires = [datetime.fromisoformat(f) for f in body["fires"]]
    assert len(fires) == 5 and fires == sorted(set(fires)) and fires[0] > datetime.now(UTC)
    local = [f.astimezone(ZoneInfo("Europe/Berlin")) for f in fires]
    assert all(t.strftime("%H:%M") == "06:30" and t.weekday() < 5 for t in local)


def test_a_rate_preview_counts_from_the_epoch_and_an_at_has_one_fire(runtime_env, alice):
    runtime_env()
    token = login(alice)
    _, rate, _ = _preview(token, {"rate": "15 minutes", "count": 3})
    fires = [datetime.fromisoformat(f) for f in rate["fires"]]
    assert len(fires) == 3 and all(f.minute % 15 == 0 and f.second == 0 for f in fires)
    assert [(b - a).total_seconds() for a, b in pairwise(fires)] == [900, 900]
    _, at, _ = _preview(token, {"at": "2199-12-31T09:00", "timezone": "Asia/Tokyo"})
    assert [datetime.fromisoformat(f) for f in at["fires"]] == [datetime(2199, 12, 31, 0, 0, tzinfo=UTC)]


def test_the_preview_reads_an_expression_in_the_owners_own_default_time_zone(runtime_env, pool, alice, bob):
    runtime_env()
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, change_from({"timezone": "America/New_York"}))
    _, mine, _ = _preview(login(alice), {"cron": "0 8 * * *"})
    _, theirs, _ = _preview(login(bob), {"cron": "0 8 * * *"})
    assert (mine["timezone"], theirs["timezone"]) == ("America/New_York", "UTC")


@pytest.mark.parametrize("body, fragment", [
    ({"cron": "0 6 * *"}, "cron: 4 fields given"),
    ({"cron": "0 6 1 * 1"}, "both day-of-month"),
    ({"rate": "every day"}, "rate: 'every day' is not a rate"),
    ({"at": "2001-01-01T09:00"}, "at: 2001-01-01T09:00 in UTC is in the past"),
    ({"cron": "0 6 * * *", "timezone": "Europe/Berln"}, "timezone: unknown time zone 'Europe/Berln'"),
    ({}, "give exactly one of cron, rate or at"),
    ({"cron": "0 6 * * *", "rate": "1 day"}, "got cron and rate"),
    ({"cron": "0 6 * * *", "count": 11}, "count"),
    ({"cron": "0 6 * * *", "name": "x"}, "name"),
])
def test_a_bad_expression_is_422_with_the_message_creating_it_would_give(runtime_env, alice, body, fragment):
    runtime_env()
    status, answer, _ = _preview(login(alice), body)
    assert status == 422 and answer["error"] == "validation_error", answer
    assert fragment in answer["message"]


def test_the_preview_needs_a_signed_in_owner(runtime_env):
    runtime_env()
    status, _, _ = call("POST", "/api/jarvis/schedules/preview", {"cron": "0 6 * * *"})
    assert status == 401


# --- agents: the model menu and what each tool does ---------------------------------------------


def test_the_model_menu_offers_the_deployments_models_and_the_reachable_providers_priced_ones(runtime_env, alice):
    runtime_env(ZERG_SUPERVISOR_MODEL="anthropic:claude-sonnet-4-6", ANTHROPIC_API_KEY="sk-ant-test",
                ZERG_WORKER_MODEL="gpt-4o-mini", OPENAI_API_KEY="sk-test")
    status, body, _ = call("GET", "/api/jarvis/models", token=login(alice))
    assert status == 200, body
    by_id = {m["id"]: m for m in body["models"]}
    assert body["models"][0]["id"] == "anthropic:claude-sonnet-4-6"
    assert by_id["anthropic:claude-sonnet-4-6"]["source"] == "ZERG_SUPERVISOR_MODEL"
    assert by_id["gpt-4o-mini"] == {"id": "gpt-4o-mini", "provider": "openai-chat",
                                    "source": "ZERG_WORKER_MODEL, ZERG_SUMMARY_MODEL, ZERG_INTENT_MODEL",
                                    "usd_per_million_in": 0.15, "usd_per_million_out": 0.60}
    assert by_id["anthropic:claude-haiku-4-5"]["usd_per_million_in"] == 1.0
    assert "openai:gpt-4.1" in by_id and "openai-chat:gpt-4.1" in by_id
    assert not any("embed" in m for m in by_id)


def test_the_model_menu_leaves_out_providers_the_deployment_cannot_reach(runtime_env, alice, monkeypatch):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "ZERG_BEDROCK_REGION", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    runtime_env(OPENAI_API_KEY="sk-test")
    _, body, _ = call("GET", "/api/jarvis/models", token=login(alice))
    providers = {m["provider"] for m in body["models"]}
    assert "anthropic" not in providers and "bedrock" not in providers and "openai" in providers


def test_agents_carry_what_each_of_their_tools_does(runtime_env, alice):
    runtime_env()
    token = login(alice)
    _, body, _ = call("GET", "/api/jarvis/agents", token=token)
    for agent in body["agents"]:
        assert set(agent["tool_descriptions"]) == set(agent["available_tools"])
        assert all(len(text) > 10 for text in agent["tool_descriptions"].values())
    worker = next(a for a in body["agents"] if a["agent"] == "worker")
    assert worker["tool_descriptions"]["ssh_exec"].startswith("Run a shell command on one of the user's servers")
    status, changed, _ = call("PUT", "/api/jarvis/agents/worker", {"temperature": 0.5}, token=token)
    assert status == 200 and changed["tool_descriptions"] == worker["tool_descriptions"]


# --- hosts: test connection ---------------------------------------------------------------------


def _test(token, alias):
    return call("POST", f"/api/jarvis/hosts/{alias}/test", None, token=token)


def test_test_connection_runs_true_on_the_owners_host_and_names_the_pinned_key(runtime_env, alice, ssh_server):
    rt = runtime_env()
    view = add_host(rt, alice.owner_id, "cube", ssh_server)
    status, body, _ = _test(login(alice), "cube")
    assert status == 200, body
    assert body["ok"] is True and body["exit_code"] == 0
    assert body["host_key_fingerprint"] == view.host_key_fingerprint and body["presented_host_key_fingerprint"] is None
    assert body["message"].startswith(f"Connected to {ssh_server.user}@127.0.0.1:{ssh_server.port} in ")
    assert f"pinned host key {view.host_key_fingerprint}" in body["message"] and "`true` exited 0" in body["message"]
    assert_no_key(str(body), ssh_server.client_key.read_text())


def test_a_host_key_other_than_the_pin_fails_and_shows_the_key_the_server_presents(runtime_env, alice, ssh_server,
                                                                                   tmp_path):
    rt = runtime_env()
    other_pin = _keypair(tmp_path / "another_host_key")
    view = add_host(rt, alice.owner_id, "cube", ssh_server, host_key=other_pin)
    _, body, _ = _test(login(alice), "cube")
    assert body["ok"] is False and body["exit_code"] is None
    presented = body["presented_host_key_fingerprint"]
    assert presented and presented.startswith("SHA256:") and presented != view.host_key_fingerprint
    assert "host key does not match the pinned key" in body["message"]
    assert f"The server presents {presented}; the pinned key is {view.host_key_fingerprint}." in body["message"]


def test_an_unreachable_host_is_a_sentence_not_an_error_status(runtime_env, alice, ssh_server):
    import socket

    rt = runtime_env()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    add_host(rt, alice.owner_id, "gone", ssh_server, port=port)
    status, body, _ = _test(login(alice), "gone")
    assert status == 200 and body["ok"] is False
    assert body["message"].startswith("Could not run `true` on gone: ssh to gone (")
    assert "cannot connect" in body["message"]


def test_another_owners_host_is_404_and_nothing_connects(runtime_env, alice, bob, ssh_server, monkeypatch):
    import paramiko

    rt = runtime_env()
    add_host(rt, alice.owner_id, "cube", ssh_server)
    monkeypatch.setattr(paramiko.SSHClient, "connect", lambda *a, **k: pytest.fail("must not connect"))
    status, body, _ = _test(login(bob), "cube")
    assert status == 404 and body["error"] == "not_found", body
    status, body, _ = _test(login(bob), "-cube")
    assert status == 422 and "alias" in body["message"], body


def _local_token(pool, rt) -> str:
    from tests.support.factories import unique_name
    from zerg.auth import login as device_login
    from zerg.identity.devices import create_device
    from zerg.owners import local_owner

    with pool.connection() as conn:
        device = create_device(conn, local_owner(conn), unique_name("laptop"))
        return device_login(conn, rt.settings, device.secret).token


def test_a_bootstrap_host_trusted_through_known_hosts_shows_the_key_it_presents(runtime_env, pool, ssh_server,
                                                                                 tmp_path):
    import json

    from zerg.hosts.spec import parse_host_key

    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {ssh_server.host_key}\n")
    config = {k: v for k, v in ssh_server.host_config().items() if k != "host_key"}
    rt = runtime_env(ZERG_SSH_HOSTS=json.dumps({"boot": config}), ZERG_SSH_KNOWN_HOSTS=str(known))
    _, body, _ = _test(_local_token(pool, rt), "boot")
    fingerprint = parse_host_key(ssh_server.host_key).fingerprint
    assert body["ok"] is True and body["host_key_fingerprint"] == fingerprint == body["presented_host_key_fingerprint"]
    assert f"known_hosts trusts its host key {fingerprint}" in body["message"]

    known.write_text("")  # nothing trusts it now: refused, never trusted on first use
    _, body, _ = _test(_local_token(pool, rt), "boot")
    assert body["ok"] is False and "not found in known_hosts" in body["message"]
    assert f"The server presents {fingerprint}; the pinned key is none." in body["message"]
