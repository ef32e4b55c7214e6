"""The approval policy enforced where tools run: a worker's ssh_exec through the real SSH server,
the decision taken in code before the command reaches the host (deny: never runs; ask: the call waits
for the owner through the run machine's callback task, and runs exactly once if approved; allowlisted
or allowed: runs), by who started the run. The supervisor cannot wait: its asked call does not run."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import BaseModel

from functions.worker.handler import handler as worker_handler
from tests.support.factories import make_job, make_run, run_task, set_approval_policy
from tests.support.hosts import add_host
from tests.support.scripts import has_tool_results, memory_call, role_of
from tests.support.waiting import wait_for
from zerg.approvals import requests as approvals
from zerg.approvals.policy import ApprovalNeeded
from zerg.approvals.wait import approve, deny
from zerg.config import Settings
from zerg.loop.tool import Tool, ToolContext, ToolOutcome, invoke
from zerg.runs import store as runs
from zerg.tools.approval_gate import approval_gate

RESTART = "systemctl restart nginx"


def _worker(rt, llm, pool, owner, trigger: str, *commands: str, host: str = "cube") -> tuple[dict, list[str]]:
    """Run a worker of a run started by ``trigger`` whose model calls ssh_exec with each command
    on ``host``; the worker's outcome and each saved tool result (a held call saves none)."""
    run_id, _ = make_run(pool, owner, trigger=trigger)
    job_id = make_job(pool, owner, run_id, "Look at cube", model="gpt-4o-mini")

    def respond(request: dict) -> dict:  # by the calls answered so far: a held worker leaves nothing queued
        done = len([m for m in request["messages"] if m["role"] == "tool"])
        if done < len(commands):
            return {"tool_calls": [("ssh_exec", {"host": host, "command": commands[done]})]}
        return {"content": "done"}

    llm.respond_with(respond)
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    wid = out["worker_id"]
    files = sorted(f.path for f in rt.store.list_files(wid) if f.path.startswith("tool_calls/"))
    return out, [rt.store.read_file(wid, path) for path in files]


@pytest.fixture
def marker(tmp_path):
    """A file path only a command that really ran would create."""
    path = tmp_path / f"ran-{uuid.uuid4().hex}"
    yield path


def _reply_script(request):
    """An email reply asks to restart nginx: the worker looks (df -h), then restarts; the supervisor
    reports what the worker's last tool result says."""
    role = role_of(request)
    text = json.dumps(request["messages"])
    if role == "supervisor":
        if not has_tool_results(request):
            return {"tool_calls": [("spawn_worker", {"task": "Check cube and restart nginx"})]}
        if "restart ran" in text:
            return {"content": "nginx was restarted on cube after your approval."}
        if "denied by the owner" in text:
            return {"content": "You denied the restart; nginx was not restarted."}
        if "no answer within" in text:
            return {"content": "Nobody approved the restart in time; nginx was not restarted."}
        return {"content": "unexpected"}
    if role == "worker":
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [("ssh_exec", {"host": "cube", "command": "df -h"})]}
        if len(results) == 1:
            return {"tool_calls": [("ssh_exec", {"host": "cube", "command": RESTART})]}
        if "DENIED: denied by the owner" in results[-1]:  # tool results reach the model fenced as data
            return {"content": "not restarted: denied by the owner"}
        if "NO ANSWER" in results[-1]:
            return {"content": "not restarted: no answer within the approval time"}
        return {"content": "restart ran on cube"}
    return {"content": "short summary"}


@pytest.mark.e2e  # through the runtime's run starter: the local engine runs the run ASL
@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_an_email_reply_runs_df_at_once_and_waits_for_the_owner_before_a_restart(
        runtime_env, llm, pool, owner, ssh_server, answer):
    """The issue's must-show: the worker's df -h runs without asking; its restart waits in
    awaiting_approval on the callback task with the exact call; approved it runs once, denied never."""
    rt = runtime_env(ZERG_APPROVAL_TIMEOUT_S="600")
    add_host(rt, owner, "cube", ssh_server)
    llm.respond_with(_reply_script)
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "restart nginx on cube please", trigger="email")
    arn = rt.starter.start(started.run_id, owner, started.thread_id)

    def token_stored():
        with pool.connection() as conn:
            rows = approvals.pending(conn, owner, started.run_id)
        return rows[0] if rows and rows[0]["task_token"] else None

    row = wait_for(token_stored, "the approval's task token", limit_s=60)
    with pool.connection() as conn:
        assert runs.get_run(conn, owner, started.run_id)["status"] == "awaiting_approval"
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s", (started.run_id,)).fetchall()
    assert rt.starter.engine().describe(arn)["status"] == "RUNNING"
    assert (row["tool"], row["arguments"]) == ("ssh_exec", {"host": "cube", "command": RESTART, "timeout_s": 30.0})
    assert row["asked_because"] == "the owner's policy asks before ssh_exec (the command is not on the host's allowlist)"
    assert row["reason"] == "(no words with the call; the worker's task:) Check cube and restart nginx"
    files = [f.path for f in rt.store.list_files(job["worker_id"]) if f.path.startswith("tool_calls/")]
    assert files == ["tool_calls/001_ssh_exec.txt"]  # df -h ran without asking; the restart did not
    assert "Filesystem" in rt.store.read_file(job["worker_id"], files[0])

    assert (approve if answer == "approve" else deny)(rt, owner, row["id"]).decided
    desc = rt.starter.engine().wait(arn, timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
    meta = rt.store.read_metadata(job["worker_id"])
    if answer == "approve":
        assert run["result"] == "nginx was restarted on cube after your approval."
        assert [c["path"] for c in meta["tool_calls"]] == ["tool_calls/001_ssh_exec.txt", "tool_calls/002_ssh_exec.txt"]
        assert meta["tool_calls"][1]["exit_code"] is not None  # it reached the host and ended there: once
    else:
        assert run["result"] == "You denied the restart; nginx was not restarted."
        assert [c["path"] for c in meta["tool_calls"]] == ["tool_calls/001_ssh_exec.txt"]
        assert "DENIED: denied by the owner" in rt.store.read_file(job["worker_id"], "thread.jsonl")


def test_a_hidden_write_or_a_pipe_after_df_waits_and_never_reaches_the_host(
        runtime_env, llm, pool, owner, ssh_server, marker, tmp_path):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    victim = tmp_path / "x"
    victim.mkdir()
    for command in (f"df -h; rm -rf {victim}", "df -h | sh", f"echo touch {marker} | sh"):
        out, saved = _worker(rt, llm, pool, owner, "email", "df -h", command)
        assert out["status"] == "awaiting_approval" and out["approval_id"], (command, out)
        assert len(saved) == 1 and "Filesystem" in saved[0], command  # df -h ran, the held call did not
        with pool.connection() as conn:
            row = approvals.get(conn, owner, out["approval_id"])
        assert (row["status"], row["tool"], row["arguments"]["command"]) == ("pending", "ssh_exec", command)
    assert victim.exists() and not marker.exists()


def test_nothing_is_asked_about_a_host_the_owner_does_not_have(runtime_env, llm, pool, owner, ssh_server):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    out, (saved,) = _worker(rt, llm, pool, owner, "email", RESTART, host="elsewhere")
    assert out["status"] == "success"
    assert saved == "ERROR: host 'elsewhere' is not in the SSH allowlist (allowed: cube); not connecting"


def test_a_denied_tool_never_reaches_the_host_and_the_model_is_told(runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, tools={"ssh_exec": "deny"})
    out, (saved,) = _worker(rt, llm, pool, owner, "api", f"touch {marker}")
    assert out["status"] == "success"
    assert saved.startswith("DENIED: denied by the owner's policy: ssh_exec is set to deny"), saved
    assert not marker.exists()


def test_a_person_run_uses_the_policy_as_set_and_a_scheduled_run_still_asks(
        runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, tools={"ssh_exec": "allow"})
    scheduled, saved = _worker(rt, llm, pool, owner, "schedule", f"touch {marker}")
    assert scheduled["status"] == "awaiting_approval" and saved == [] and not marker.exists()
    with pool.connection() as conn:
        assert "whatever the policy allows" in approvals.get(conn, owner, scheduled["approval_id"])["asked_because"]
    person, _ = _worker(rt, llm, pool, owner, "api", f"touch {marker}")
    assert person["status"] == "success" and marker.exists()


def test_a_host_allowlist_lets_its_command_run_unattended(runtime_env, llm, pool, owner, ssh_server, marker):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, ssh_allow={"cube": [f"touch {marker}"]})
    out, _ = _worker(rt, llm, pool, owner, "sms", f"touch {marker}")
    assert out["status"] == "success" and marker.exists()


def test_a_run_that_asked_as_often_as_the_policy_allows_is_refused_without_asking_again(
        runtime_env, llm, pool, owner, ssh_server, marker):
    """A run that keeps asking (a loop, or text steering it) stops asking at max_asks_per_run: the
    call is refused, the model is told why, nothing waits and the command never reaches the host."""
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, max_asks_per_run=2)
    run_id, _ = make_run(pool, owner, trigger="email")
    for n in range(2):  # two earlier workers of the run asked (whatever the owner answered)
        earlier = make_job(pool, owner, run_id, f"earlier {n}", model="gpt-4o-mini")
        with pool.connection() as conn:
            approvals.create(conn, owner, run_id, earlier, "ssh_exec", {"host": "cube", "command": RESTART},
                             f"call-{n}", "the owner's policy asks")
    job_id = make_job(pool, owner, run_id, "Look at cube", model="gpt-4o-mini")
    llm.respond_with(lambda request: {"content": "done"} if any(m["role"] == "tool" for m in request["messages"])
                     else {"tool_calls": [("ssh_exec", {"host": "cube", "command": f"touch {marker}"})]})
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "success" and out["approval_id"] is None
    (saved,) = [rt.store.read_file(out["worker_id"], f.path) for f in rt.store.list_files(out["worker_id"])
                if f.path.startswith("tool_calls/")]
    assert saved.startswith("DENIED: this run already asked the owner 2 time(s), the most one run may ask"), saved
    with pool.connection() as conn:
        assert approvals.asked_in_run(conn, owner, run_id) == 2  # nothing new was asked
    assert not marker.exists()
    other_run, _ = _worker(rt, llm, pool, owner, "email", f"touch {marker}")  # another run still asks
    assert other_run["status"] == "awaiting_approval"


def test_a_worker_whose_policy_cannot_be_read_runs_nothing_and_asks_nothing(
        runtime_env, llm, pool, owner, ssh_server, marker):
    """Fail closed in the worker too: a stored policy that no longer validates refuses the call (its
    result says why); no approval is created and the command never reaches the host."""
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    set_approval_policy(pool, owner, tools={"ssh_exec": "allow"})
    with pool.connection() as conn:  # e.g. a governed tool renamed since it was stored
        conn.execute("""UPDATE approval_policies SET policy = '{"tools": {"ssh_run": "allow"}}'::jsonb
                        WHERE owner_id = %s""", (owner,))
    out, (saved,) = _worker(rt, llm, pool, owner, "api", f"touch {marker}")
    assert out["status"] == "success" and out["approval_id"] is None
    assert saved.startswith("ERROR: ssh_exec did not run: the owner's approval policy could not be checked"), saved
    with pool.connection() as conn:
        assert approvals.pending(conn, owner) == []
    assert not marker.exists()


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
    denied (the owner's choice); neither runs, both results are in the run's messages. The supervisor
    cannot wait for an answer within its turn: no approval is pending, the model is told to delegate."""
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
    assert "did not run" in results[0] and "spawn_worker" in results[0]  # a worker's call can wait
    assert results[1].startswith("DENIED: denied by the owner's policy: set_preference is set to deny"), results
    with pool.connection() as conn:
        assert get_policy(conn, owner).timezone == "UTC"
        assert conn.execute("SELECT count(*) AS n FROM notifications WHERE owner_id = %s",
                            (owner,)).fetchone()["n"] == 0
        assert approvals.pending(conn, owner) == []


def _reply_run_waiting(rt, llm, pool, owner, ssh_server):
    """The must-show's start: an email reply to an alert ("restart nginx on cube please") becomes a run
    through the one inbound path; its worker's df -h runs, its restart waits for the owner. Returns
    (the run's row, its execution arn, the pending approval, the owner's verified number)."""
    import secrets

    from tests.support.notify import verified_contact
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound
    from zerg.notify.deliver import deliver

    add_host(rt, owner, "cube", ssh_server)
    llm.respond_with(_reply_script)
    mail = verified_contact(pool, owner, "email")
    phone = verified_contact(pool, owner, "sms")
    (sent,) = deliver(rt, owner, channel="email", purpose="alert", severity="warning",
                      subject="[Zerg WARNING] nginx is slow on cube", body="p95 4.2 s on cube.")
    with pool.connection() as conn:
        token = conn.execute("SELECT reply_token FROM notifications WHERE id = %s", (sent["id"],)).fetchone()["reply_token"]
    outcome = replies.receive(rt, Inbound(
        channel="email", provider_id=f"ses-{secrets.token_hex(8)}", source="ses", sender=mail["address"],
        body="restart nginx on cube please", recipient=f"reply+{token}@zerg.localhost", subject="Re: nginx",
        message_id=f"<{secrets.token_hex(6)}@mail.example.com>", tokens=(token,)))
    assert outcome.status == "run", outcome

    def token_stored():  # whatever its status since: a 1 s wait may have timed out before this poll under load
        with pool.connection() as conn:
            return conn.execute("SELECT * FROM approvals WHERE owner_id = %s AND run_id = %s AND task_token IS NOT NULL",
                                (owner, outcome.run_id)).fetchone()

    row = wait_for(token_stored, "the approval's task token", limit_s=60)
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, outcome.run_id)
    assert run["trigger"] == "email" and run["status"] in ("awaiting_approval", "running", "success")  # a short wait may end
    return run, run["execution_arn"], row, phone["address"]


def _sms(sender: str, text: str):
    import secrets

    from zerg.inbound.messages import Inbound

    return Inbound(channel="sms", provider_id=f"sms-{secrets.token_hex(8)}", source="sns", sender=sender, body=text,
                   recipient="+15550009999")


@pytest.mark.e2e  # through the inbound path and the runtime's run starter: the local engine runs the run ASL
def test_an_email_replys_restart_waits_and_an_sms_y_with_its_code_approves_it_once(
        runtime_env, llm, pool, owner, ssh_server):
    """The issue's must-show, answered by SMS: an unverified number's "Y <code>" changes nothing; the
    owner's "Y <code>" approves, the restart runs exactly once, the answer says so; no SMS becomes a run."""
    from tests.support.notify import texts, unique_number
    from zerg.inbound import replies

    rt = runtime_env(ZERG_APPROVAL_TIMEOUT_S="600")
    run, arn, row, phone = _reply_run_waiting(rt, llm, pool, owner, ssh_server)
    assert run["status"] == "awaiting_approval"
    code = row["code"]
    assert len(code) == 4 and code.isdigit()

    stranger = replies.receive(rt, _sms(unique_number(), f"Y {code}"))  # not the owner's verified number
    assert (stranger.status, stranger.reason, stranger.run_id) == ("rejected", "unknown sender", None)
    wrong = replies.receive(rt, _sms(phone, "Y 0000" if code != "0000" else "Y 0001"))
    assert (wrong.status, wrong.run_id) == ("approval", None) and "no pending approval with code" in wrong.reason
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "pending"  # nothing changed

    yes = replies.receive(rt, _sms(phone, f"y {code}"))
    assert (yes.status, yes.run_id) == ("approval", None) and yes.reason == f"code {code}: approval {row['id']} approved"
    desc = rt.starter.engine().wait(arn, timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    with pool.connection() as conn:
        done = runs.get_run(conn, owner, run["id"])
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s", (run["id"],)).fetchall()
        reply_runs = conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s AND trigger = 'sms'",
                                  (owner,)).fetchone()["n"]
    assert done["result"] == "nginx was restarted on cube after your approval."
    meta = rt.store.read_metadata(job["worker_id"])
    assert [c["path"] for c in meta["tool_calls"]] == ["tool_calls/001_ssh_exec.txt", "tool_calls/002_ssh_exec.txt"]
    assert meta["tool_calls"][1]["exit_code"] is not None  # the restart reached the host, once
    assert reply_runs == 0  # no SMS became a run
    told = [t for t in texts(rt.settings.data_dir) if t["to"] == phone]
    assert any(f"Approved {code}: systemctl restart nginx on cube; it runs now." in "".join(t["parts"]) for t in told)

    again = replies.receive(rt, _sms(phone, f"N {code}"))  # the code is spent: a replay changes nothing
    assert again.status == "approval" and "no pending approval with code" in again.reason
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "approved"


@pytest.mark.e2e
def test_an_sms_n_with_its_code_denies_and_the_restart_never_runs(runtime_env, llm, pool, owner, ssh_server):
    from zerg.inbound import replies

    rt = runtime_env(ZERG_APPROVAL_TIMEOUT_S="600")
    run, arn, row, phone = _reply_run_waiting(rt, llm, pool, owner, ssh_server)
    no = replies.receive(rt, _sms(phone, f"N {row['code']}."))
    assert no.status == "approval" and no.reason == f"code {row['code']}: approval {row['id']} denied"
    desc = rt.starter.engine().wait(arn, timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    with pool.connection() as conn:
        done = runs.get_run(conn, owner, run["id"])
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s", (run["id"],)).fetchall()
    assert done["result"] == "You denied the restart; nginx was not restarted."
    assert [c["path"] for c in rt.store.read_metadata(job["worker_id"])["tool_calls"]] == ["tool_calls/001_ssh_exec.txt"]


@pytest.mark.e2e
def test_an_sms_y_after_the_wait_timed_out_changes_nothing_and_the_restart_never_runs(
        runtime_env, llm, pool, owner, ssh_server):
    from zerg.inbound import replies

    rt = runtime_env(ZERG_APPROVAL_TIMEOUT_S="1")
    run, arn, row, phone = _reply_run_waiting(rt, llm, pool, owner, ssh_server)
    desc = rt.starter.engine().wait(arn, timeout=120)  # AwaitApproval's timeout ended the wait
    assert desc["status"] == "SUCCEEDED", desc
    late = replies.receive(rt, _sms(phone, f"Y {row['code']}"))
    assert (late.status, late.run_id) == ("approval", None)
    assert late.reason == f"no pending approval with code {row['code']}"  # expired: its code is no longer live
    with pool.connection() as conn:
        done = runs.get_run(conn, owner, run["id"])
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s", (run["id"],)).fetchall()
        assert approvals.get(conn, owner, row["id"])["status"] == "expired"
    assert done["result"] == "Nobody approved the restart in time; nginx was not restarted."
    assert [c["path"] for c in rt.store.read_metadata(job["worker_id"])["tool_calls"]] == ["tool_calls/001_ssh_exec.txt"]


@pytest.mark.e2e  # the inbound path and the real run ASL on moto's Step Functions: what runs on AWS
@pytest.mark.parametrize("answer", ["Y", "N", "timeout"])
def test_on_moto_step_functions_an_email_replys_restart_waits_and_the_owners_sms_answers_it(
        runtime_env, llm, pool, owner, ssh_server, monkeypatch, answer):
    """The must-show on the AWS path: the execution waits on the callback task (RUNNING, nothing
    polls); the owner's SMS "Y <code>" resumes it through SendTaskSuccess and the restart runs once,
    "N <code>" through SendTaskFailure and it never runs; unanswered, the task's timeout ends the wait,
    the restart never runs and a late "Y <code>" finds nothing to approve."""
    from tests.test_approval_wait import moto_execution_end, moto_run_machine
    from zerg.inbound import replies

    with moto_run_machine(monkeypatch) as (machine, sfn):
        rt = runtime_env(ZERG_STATE_MACHINE_ARN=machine, ZERG_APPROVAL_TIMEOUT_S="1" if answer == "timeout" else "600")
        run, arn, row, phone = _reply_run_waiting(rt, llm, pool, owner, ssh_server)
        assert arn.startswith("arn:aws:states:")
        if answer == "timeout":
            desc = moto_execution_end(sfn, arn)  # AwaitApproval's TimeoutSecondsPath ended the wait
            late = replies.receive(rt, _sms(phone, f"Y {row['code']}"))
            assert (late.status, late.reason) == ("approval", f"no pending approval with code {row['code']}")
        else:
            assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
            with pool.connection() as conn:
                assert runs.get_run(conn, owner, run["id"])["status"] == "awaiting_approval"
            sms = replies.receive(rt, _sms(phone, f"{answer} {row['code']}"))
            decided = "approved" if answer == "Y" else "denied"
            assert (sms.status, sms.reason) == ("approval", f"code {row['code']}: approval {row['id']} {decided}")
            desc = moto_execution_end(sfn, arn)
    assert desc["status"] == "SUCCEEDED", desc
    with pool.connection() as conn:
        done = runs.get_run(conn, owner, run["id"])
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s", (run["id"],)).fetchall()
    ran = [c["path"] for c in rt.store.read_metadata(job["worker_id"])["tool_calls"]]
    if answer == "Y":
        assert done["result"] == "nginx was restarted on cube after your approval."
        assert ran == ["tool_calls/001_ssh_exec.txt", "tool_calls/002_ssh_exec.txt"]  # df -h, then the restart once
    elif answer == "timeout":
        assert done["result"] == "Nobody approved the restart in time; nginx was not restarted."
        assert ran == ["tool_calls/001_ssh_exec.txt"]
        with pool.connection() as conn:
            assert approvals.get(conn, owner, row["id"])["status"] == "expired"
    else:
        assert done["result"] == "You denied the restart; nginx was not restarted."
        assert ran == ["tool_calls/001_ssh_exec.txt"]
