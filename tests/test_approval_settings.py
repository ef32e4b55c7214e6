"""The owner's approval policy as the API, the CLI and a confirmed directive set it: the defaults until set, one
validation path, precise refusals that change nothing, and each owner's policy their own."""

from __future__ import annotations

import json

import pytest

from tests.support.api import call, login
from zerg.approvals.policy import DEFAULT_MODES
from zerg.cli.main import main

PATH = "/api/jarvis/approvals/policy"


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def test_an_owner_who_set_nothing_reads_the_documented_defaults(rt, alice):
    status, body, _ = call("GET", PATH, token=login(alice))
    assert status == 200, body
    assert body["tools"] == DEFAULT_MODES and body["customised"] is False and body["updated_at"] is None
    assert body["tools"]["ssh_exec"] == "ask" and body["tools"]["container_exec"] == "allow"
    assert body["builtin_allowlist"] is True and "df" in body["builtin_commands"] and body["expiry_s"] == 3600


def test_put_replaces_the_policy_and_another_owner_never_sees_it(rt, alice, bob):
    tok = login(alice)
    policy = {"tools": {"send_email": "allow", "ssh_exec": "deny"}, "ssh_allow": {"web1": ["systemctl restart nginx"]},
              "expiry_s": 900, "max_asks_per_run": 3}
    status, body, _ = call("PUT", PATH, policy, token=tok)
    assert status == 200, body
    assert body["tools"]["send_email"] == "allow" and body["tools"]["ssh_exec"] == "deny"
    assert body["tools"]["send_sms"] == "ask" and body["ssh_allow"] == {"web1": ["systemctl restart nginx"]}
    assert body["expiry_s"] == 900 and body["max_asks_per_run"] == 3
    assert body["customised"] is True and body["updated_at"]
    assert call("GET", PATH, token=tok)[1]["ssh_allow"] == {"web1": ["systemctl restart nginx"]}
    theirs = call("GET", PATH, token=login(bob))[1]
    assert theirs["customised"] is False and theirs["ssh_allow"] == {} and theirs["tools"] == DEFAULT_MODES
    status, body, _ = call("PUT", PATH, {}, token=tok)  # a whole replacement: what is left out is the default
    assert status == 200 and body["tools"] == DEFAULT_MODES and body["ssh_allow"] == {}
    status, body, _ = call("DELETE", PATH, token=tok)
    assert status == 200 and body["customised"] is False


@pytest.mark.parametrize(("policy", "message"), [
    ({"tools": {"rm_rf": "allow"}}, "tools: Value error, unknown tool(s) rm_rf; governed tools:"),
    ({"tools": {"ssh_exec": "maybe"}}, "tools.ssh_exec: Input should be 'allow', 'ask' or 'deny'"),
    ({"ssh_allow": {"web1": ["df -h | sh"]}}, "pattern 'df -h | sh' may hold only letters"),
    ({"ssh_allow": {"web1": ["bash -c *"]}}, "'bash' runs other commands or code"),
    ({"ssh_allow": {"web1": "df"}}, "ssh_allow.web1: Input should be a valid list"),
    ({"expiry_s": 5}, "expiry_s: Input should be greater than or equal to 60"),
    ({"max_asks_per_run": 0}, "max_asks_per_run: Input should be greater than or equal to 1"),
    ({"owner_id": 2}, "owner_id: Extra inputs are not permitted"),
])
def test_a_bad_policy_is_refused_naming_the_field_and_changes_nothing(rt, alice, policy, message):
    tok = login(alice)
    status, body, _ = call("PUT", PATH, policy, token=tok)
    assert status == 422 and body["error"] == "validation_error" and message in body["message"], body
    assert call("GET", PATH, token=tok)[1]["customised"] is False


def test_the_policy_needs_a_session(rt):
    assert call("GET", PATH)[0] == 401
    assert call("PUT", PATH, {})[0] == 401


def test_the_cli_shows_sets_and_resets_the_policy(rt, alice, bob, capsys):
    who = ["--owner", alice.name]
    assert main(["approvals", "policy", "show", *who]) == 0
    out = capsys.readouterr().out
    assert "(all defaults)" in out and "ssh_exec:        ask (default)" in out
    assert main(["approvals", "policy", "set", "--tool", "send_email=allow", "--allow", "web1=systemctl restart nginx",
                 "--allow", "*=apt list --upgradable", "--expiry", "1800", "--max-asks", "4", *who]) == 0
    out = capsys.readouterr().out
    assert "send_email:      allow\n" in out and "ssh web1:\n    systemctl restart nginx" in out
    assert "ssh every host:\n    apt list --upgradable" in out and "expiry:          1800 s" in out
    assert "asks per run:    at most 4" in out
    assert main(["approvals", "policy", "set", "--disallow", "web1=systemctl restart nginx", *who]) == 0
    assert "ssh web1" not in capsys.readouterr().out
    assert main(["approvals", "policy", "set", "--allow", "web1=df -h | sh", *who]) == 2
    assert "not changed: ssh_allow: Value error, host 'web1': pattern 'df -h | sh'" in capsys.readouterr().err
    assert main(["approvals", "policy", "set", "--tool", "send_email", *who]) == 2
    assert "give TOOL=MODE" in capsys.readouterr().err
    assert main(["approvals", "policy", "show", "--owner", bob.name]) == 0
    assert "(all defaults)" in capsys.readouterr().out
    assert main(["approvals", "policy", "show", *who]) == 0
    assert "apt list --upgradable" in capsys.readouterr().out  # the refused changes changed nothing
    assert main(["approvals", "policy", "reset", *who]) == 0
    assert "(all defaults)" in capsys.readouterr().out


def test_a_directive_only_asks_and_the_owners_yes_sets_the_tools_approval(runtime_env, llm, engine, pool, alice, bob):
    """The confirmed-directive path (issue 25): set_preference approval.send_email=allow asks in
    Zerg's words; only the owner's yes as their next message sets it, for that owner alone."""
    from tests.support.factories import run_task
    from tests.support.scripts import memory_call
    from zerg import approvals

    runtime_env()

    def asks(request: dict) -> dict:
        if memory_call(request):
            return {"content": "{}"}
        if not any(m["role"] == "tool" for m in request["messages"]):
            return {"tool_calls": [("set_preference", {"key": "approval.send_email", "value": "allow"})]}
        return {"content": "I asked."}

    def mode(owner) -> str:
        with pool.connection() as conn:
            return approvals.load_policy(conn, owner.owner_id).mode("send_email")

    llm.respond_with(asks)
    asking = run_task(pool, engine, alice.owner_id, "let Zerg email me without asking")
    assert asking["status"] == "success" and mode(alice) == "ask"
    with pool.connection() as conn:
        (asked,) = conn.execute("SELECT id, code FROM approvals WHERE owner_id = %s AND kind = 'directive'",
                                (alice.owner_id,)).fetchall()
    n, code = asked["id"], asked["code"]
    assert asking["result"].endswith(
        "set approval.send_email to allow (now ask). Reply yes as your next message to do it; anything else leaves "
        f"it undone (the question expires in 24 hours). Until then you can also answer approval {n} by SMS "
        f"(Y {code} or N {code}), with zerg approvals approve {n} (or deny {n}), or in your approvals list.")
    llm.respond_with(lambda request: {"content": "{}"})
    yes = run_task(pool, engine, alice.owner_id, "yes")
    assert yes["result"] == ("Confirmed by your yes:\n- set approval.send_email to allow (now ask): "
                             "Approval of send_email is now allow (was ask).")
    assert mode(alice) == "allow" and mode(bob) == "ask"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("approval.rm_rf", "allow", "unknown approval key 'approval.rm_rf'; give approval.TOOL with TOOL one of:"),
    ("approval.ssh_exec", "sometimes", "approval.ssh_exec: 'sometimes' is not allow, ask or deny"),
])
def test_a_bad_approval_directive_is_refused_naming_the_form(rt, pool, alice, key, value, message):
    from tests.support.factories import make_run
    from zerg.loop.tool import ToolContext, invoke
    from zerg.tools.directive_tools import TOOLS

    run_id, _ = make_run(pool, alice.owner_id)
    outcome = invoke({t.name: t for t in TOOLS}, "set_preference", json.dumps({"key": key, "value": value}),
                     ToolContext(settings=rt.settings, owner_id=alice.owner_id, run_id=run_id, runtime=rt))
    assert outcome.text.startswith(f"ERROR: {message}"), outcome.text
