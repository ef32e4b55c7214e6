"""The owner's approval policy and the decision before a tool runs: allow, ask or deny, by tool,
host allowlist and who started the run."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from zerg.approvals.policy import DEFAULT_MODES, Policy, decide

PERSON = ("api", "cli")
UNATTENDED = ("schedule", "email", "sms")


def test_df_runs_without_asking_and_a_hidden_write_asks() -> None:
    policy = Policy()
    for trigger in (*PERSON, *UNATTENDED):
        assert decide(policy, "ssh_exec", {"command": "df -h"}, "web1", trigger).outcome == "allow"
        for command in ("df -h; rm -rf /tmp/x", "df -h | sh", "systemctl restart nginx"):
            decision = decide(policy, "ssh_exec", {"command": command}, "web1", trigger)
            assert decision.outcome == "ask", (command, trigger)
            assert "allowlist" in decision.reason


def test_a_host_allowlist_applies_to_its_host_only() -> None:
    policy = Policy(ssh_allow={"web1": ["systemctl restart nginx"], "*": ["apt list --upgradable"]})
    restart = {"command": "systemctl restart nginx"}
    assert decide(policy, "ssh_exec", restart, "web1", "email").outcome == "allow"
    assert decide(policy, "ssh_exec", restart, "db1", "api").outcome == "ask"
    assert decide(policy, "ssh_exec", {"command": "apt list --upgradable"}, "db1", "schedule").outcome == "allow"


def test_deny_wins_over_every_allowlist() -> None:
    policy = Policy(tools={"ssh_exec": "deny"}, ssh_allow={"web1": ["systemctl restart nginx"]})
    for command in ("df -h", "systemctl restart nginx"):
        decision = decide(policy, "ssh_exec", {"command": command}, "web1", "api")
        assert decision.outcome == "deny" and decision.reason == "ssh_exec is set to deny"


def test_turning_off_the_built_in_allowlist_asks_for_df() -> None:
    assert decide(Policy(builtin_allowlist=False), "ssh_exec", {"command": "df -h"}, "web1", "api").outcome == "ask"


def test_a_person_run_uses_the_policy_as_set_and_an_unattended_run_asks_outside_the_allowlists() -> None:
    policy = Policy(tools={"ssh_exec": "allow", "send_email": "allow", "http_request": "allow"})
    post = {"method": "POST", "url": "https://example.com"}
    for trigger in PERSON:
        assert decide(policy, "ssh_exec", {"command": "systemctl restart nginx"}, "web1", trigger).outcome == "allow"
        assert decide(policy, "send_email", {"subject": "s", "body": "b"}, None, trigger).outcome == "allow"
        assert decide(policy, "http_request", post, None, trigger).outcome == "allow"
    for trigger in (*UNATTENDED, None, "something new"):
        decision = decide(policy, "ssh_exec", {"command": "systemctl restart nginx"}, "web1", trigger)
        assert decision.outcome == "ask" and "whatever the policy allows" in decision.reason
        assert decide(policy, "send_email", {"subject": "s", "body": "b"}, None, trigger).outcome == "ask"
        assert decide(policy, "http_request", post, None, trigger).outcome == "ask"


def test_contained_tools_keep_their_allow_in_unattended_runs() -> None:
    policy = Policy()
    for trigger in UNATTENDED:
        assert decide(policy, "container_exec", {"command": "rm -rf /tmp/x"}, None, trigger).outcome == "allow"
        assert decide(policy, "update_schedule", {"schedule_id": 1}, None, trigger).outcome == "allow"
    assert decide(Policy(tools={"container_exec": "ask"}), "container_exec", {"command": "ls"}, None,
                  "api").outcome == "ask"


def test_http_get_and_head_are_never_governed() -> None:
    policy = Policy(tools={"http_request": "deny"})
    for method in ("GET", "HEAD", "get"):
        assert decide(policy, "http_request", {"method": method}, None, "schedule").outcome == "allow"
    assert decide(policy, "http_request", {"method": "DELETE"}, None, "api").outcome == "deny"


def test_the_defaults_ask_before_mail_sms_and_writes_over_http() -> None:
    policy = Policy()
    assert decide(policy, "send_email", {}, None, "api").outcome == "ask"
    assert decide(policy, "send_sms", {}, None, "cli").outcome == "ask"
    assert decide(policy, "http_request", {"method": "PUT"}, None, "api").outcome == "ask"
    assert decide(policy, "memory_read", {}, None, "schedule").outcome == "allow"
    assert set(DEFAULT_MODES) >= {"ssh_exec", "container_exec", "http_request", "send_email", "send_sms",
                                  "update_schedule", "create_schedule", "delete_schedule", "set_preference"}


@pytest.mark.parametrize(("body", "where"), [
    ({"tools": {"rm_rf": "allow"}}, "unknown tool(s) rm_rf"),
    ({"tools": {"ssh_exec": "sometimes"}}, "tools.ssh_exec"),
    ({"ssh_allow": {"web1": ["df -h | sh"]}}, "no shell operators"),
    ({"ssh_allow": {"web1": ["sh -c *"]}}, "runs other commands or code"),
    ({"ssh_allow": {"": ["df"]}}, "an alias of 1 to 100 characters"),
    ({"expiry_s": 10}, "expiry_s"),
    ({"expiry_s": 10**6}, "expiry_s"),
    ({"surprise": 1}, "surprise"),
])
def test_a_bad_policy_is_refused_with_where_and_why(body: dict, where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Policy.model_validate(body)
    assert where in str(caught.value)


def test_every_governed_name_is_a_tool_an_agent_has():
    from zerg.approvals.policy import GOVERNED
    from zerg.tools.catalog import tool_names

    names = tool_names()
    assert GOVERNED <= {*names["supervisor"], *names["worker"]}  # a renamed tool must not slip out of the policy


def test_no_tool_of_any_agent_can_answer_an_approval():
    """An approval is granted only by the owner through their channels (the API, the CLI, an email or
    SMS reply, the owner's "yes" as their next message): no tool is named for it, and nothing a model's
    tools reach calls the core answer (``zerg.approvals.wait.approve`` / ``deny``); only the channel
    modules below do (``inbound/directives.py``: the yes, decided in code before any inference)."""
    import ast
    import re
    from pathlib import Path

    import zerg
    from zerg.tools.catalog import supervisor_tools, worker_tools

    names = {*supervisor_tools(), *supervisor_tools(background=True), *worker_tools()}
    assert not [n for n in names if re.search(r"approv|deny|grant|confirm|answer", n)], names

    root = Path(zerg.__file__).parent
    answering = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            imported = (isinstance(node, ast.ImportFrom) and node.module == "zerg.approvals.wait"
                        and {a.name for a in node.names} & {"approve", "deny"})
            called = (isinstance(node, ast.Attribute) and node.attr in ("approve", "deny")
                      and isinstance(node.value, ast.Name) and node.value.id in ("wait", "approval_wait"))
            if imported or called:
                answering.add(path.relative_to(root).as_posix())
    assert answering == {"api/routes/approvals.py", "cli/approvals.py", "inbound/replies.py",
                         "inbound/directives.py"}, answering
