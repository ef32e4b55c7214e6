"""The approval policy enforced where tools run: a worker's ssh_exec through the real SSH server,
the decision taken in code before the command reaches the host (deny: never runs; ask: an
ApprovalNeeded result, never runs; allowlisted or allowed: runs), by who started the run."""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel

from functions.worker.handler import handler as worker_handler
from tests.support.factories import make_job, make_run, run_task, set_approval_policy
from tests.support.hosts import add_host
from tests.support.scripts import memory_call
from zerg.approvals.policy import ApprovalNeeded
from zerg.config import Settings
from zerg.loop.tool import Tool, ToolContext, ToolOutcome, invoke
from zerg.tools.approval_gate import approval_gate


def _worker(rt, llm, pool, owner, trigger: str, *commands: str, host: str = "cube") -> tuple[str, list[str]]:
    """Run a worker of a run started by ``trigger`` whose model calls ssh_exec with each command
    on ``host``; its worker id and each call's saved result."""
    run_id, _ = make_run(pool, owner, trigger=trigger)
    job_id = make_job(pool, owner, run_id, "Look at cube", model="gpt-4o-mini")
    llm.script(*({"tool_calls": [("ssh_exec", {"host": host, "command": c})]} for c in commands),
               {"content": "done"})
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "success", out
    wid = out["worker_id"]
    return wid, [rt.store.read_file(wid, f"tool_calls/{i:03d}_ssh_exec.txt") for i in range(1, len(commands) + 1)]


@pytest.fixture
def marker(tmp_path):
    """A file path only a command that really ran would create."""
    path = tmp_path / f"ran-{uuid.uuid4().hex}"
    yield path


def test_an_email_reply_run_runs_df_and_asks_before_a_restart_or_a_hidden_write(
        runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    _, (df, restart, hidden, piped) = _worker(rt, llm, pool, owner, "email", "df -h", "systemctl restart nginx",
                                               f"df -h; touch {marker}", f"echo touch {marker} | sh")
    assert "Filesystem" in df and "APPROVAL REQUIRED" not in df
    for saved in (restart, hidden, piped):
        assert saved.startswith("APPROVAL REQUIRED: ssh_exec on cube needs the owner's approval"), saved
        assert "did not run" in saved
    assert not marker.exists()


def test_nothing_is_asked_about_a_host_the_owner_does_not_have(runtime_env, llm, pool, owner, ssh_server):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    _, (saved,) = _worker(rt, llm, pool, owner, "email", "systemctl restart nginx", host="elsewhere")
    assert saved == "ERROR: host 'elsewhere' is not in the SSH allowlist (allowed: cube); not connecting"


def test_a_denied_tool_never_reaches_the_host_and_the_model_is_told(runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, tools={"ssh_exec": "deny"})
    _, (saved,) = _worker(rt, llm, pool, owner, "api", f"touch {marker}")
    assert saved.startswith("DENIED: denied by the owner's policy: ssh_exec is set to deny"), saved
    assert not marker.exists()


def test_a_person_run_uses_the_policy_as_set_and_a_scheduled_run_still_asks(
        runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, tools={"ssh_exec": "allow"})
    _, (scheduled,) = _worker(rt, llm, pool, owner, "schedule", f"touch {marker}")
    assert scheduled.startswith("APPROVAL REQUIRED") and "whatever the policy allows" in scheduled
    assert not marker.exists()
    _, (person,) = _worker(rt, llm, pool, owner, "api", f"touch {marker}")
    assert "APPROVAL REQUIRED" not in person and marker.exists()


def test_a_host_allowlist_lets_its_command_run_unattended(runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, ssh_allow={"cube": [f"touch {marker}"]})
    _, (saved,) = _worker(rt, llm, pool, owner, "sms", f"touch {marker}")
    assert "APPROVAL REQUIRED" not in saved and marker.exists()


def test_the_gate_reads_only_its_own_owners_policy(runtime_env, pool, owner, other_owner):
    rt = runtime_env()
    set_approval_policy(pool, other_owner, tools={"container_exec": "deny"})
    run_id, _ = make_run(pool, owner)

    class Args(BaseModel):
        command: str

    assert approval_gate(rt, owner, run_id)("container_exec", Args(command="ls")) is None
    held = approval_gate(rt, other_owner, run_id)("container_exec", Args(command="ls"))  # not its run: unattended
    assert held is not None and held.text.startswith("DENIED")


def test_ask_hands_the_waiting_mechanism_a_typed_request(runtime_env, pool, owner):
    rt = runtime_env()
    set_approval_policy(pool, owner, expiry_s=600)
    run_id, _ = make_run(pool, owner, trigger="cli")

    class Args(BaseModel):
        subject: str
        body: str

    held = approval_gate(rt, owner, run_id)("send_email", Args(subject="Hi", body="text"))
    assert held is not None and not held.ok
    assert held.approval == ApprovalNeeded(tool="send_email", arguments={"subject": "Hi", "body": "text"}, host=None,
                                           reason="the owner's policy asks before send_email", trigger="cli",
                                           expires_in_s=600)


def test_a_gate_that_fails_lets_nothing_through():
    ran: list[str] = []

    class Args(BaseModel):
        command: str

    def broken(name: str, args: BaseModel) -> ToolOutcome | None:
        raise RuntimeError("database down")

    tool = Tool("container_exec", "run", Args, lambda args, ctx: ran.append(args.command) or ToolOutcome(text="ran"))
    outcome = invoke({"container_exec": tool}, "container_exec", '{"command": "ls"}',
                     ToolContext(settings=Settings(), gate=broken))
    assert not outcome.ok and "could not be checked (RuntimeError: database down)" in outcome.text
    assert ran == []


def test_the_supervisors_calls_pass_the_same_gate(runtime_env, llm, engine, pool, owner):
    """A person's run: the supervisor's send_email asks (the default) and its set_preference is
    denied (the owner's choice); neither runs, both results are in the run's messages."""
    from zerg.notify.policy import get_policy

    runtime_env()
    set_approval_policy(pool, owner, tools={"set_preference": "deny"})
    calls = [("send_email", {"subject": "Report", "body": "All good."}),
             ("set_preference", {"key": "timezone", "value": "Europe/Berlin"})]

    def respond(request: dict) -> dict:
        if memory_call(request):
            return {"content": "{}"}
        done = [m for m in request["messages"] if m["role"] == "tool"]
        return {"tool_calls": [calls[len(done)]]} if len(done) < len(calls) else {"content": "Could not."}

    llm.respond_with(respond)
    run = run_task(pool, engine, owner, "email me the report and use Berlin time")
    assert run["status"] == "success"
    results = [m["content"] for m in run["working_messages"] if m["role"] == "tool"]
    assert results[0].startswith("APPROVAL REQUIRED: send_email needs the owner's approval"), results
    assert results[1].startswith("DENIED: denied by the owner's policy: set_preference is set to deny"), results
    with pool.connection() as conn:
        assert get_policy(conn, owner).timezone == "UTC"
        assert conn.execute("SELECT count(*) AS n FROM notifications WHERE owner_id = %s",
                            (owner,)).fetchone()["n"] == 0
