"""A tool call that waits for the owner's approval, end to end on the local engine (issue 27 item 2):
the real run ASL under moto's interpreter, the real handlers, the scripted model over loopback, the
real database and sandbox. The worker's step ends, the execution waits in AwaitApproval (a callback
task) with the token on the approval row, and the run shows ``awaiting_approval``; approving runs the
call exactly once, denying never runs it, the timeout tells the model nobody answered, and a cancel
closes the waiting job without running it. No sleeps: each test waits for the row or the execution.

Which calls ask is the owner's approval policy (item 1): here the owner sets ``container_exec`` to
``ask`` (the sandbox needs no host; tests/test_approval_gate.py shows the same wait for ``ssh_exec``
on a real SSH server and the policy's allowlist).
"""

from __future__ import annotations

import contextlib

import json

import pytest

from tests.support.factories import set_approval_policy
from tests.support.scripts import has_tool_results, role_of, worker_task
from tests.support.waiting import wait_for
from zerg.approvals import requests as approvals
from zerg.approvals.wait import ApprovalNotFound, approve, deny
from zerg.runs import store as runs
from zerg.workers import runner

COMMAND = "echo RESTARTED-NGINX-$((40+2))"  # the call that needs approval; its output proves it ran
CALL = {"command": COMMAND, "timeout_s": 30.0}
SAID = "nginx must restart to load the new certificate."  # the model's own words with its call


def _script(request):
    role = role_of(request)
    text = json.dumps(request["messages"])
    if role == "supervisor":
        if not has_tool_results(request):
            return {"tool_calls": [("spawn_worker", {"task": "Restart nginx"})]}
        if "nginx restarted" in text:
            return {"content": "Restarted nginx (RESTARTED-NGINX-42)."}
        if "denied by the owner" in text:
            return {"content": "The owner denied the restart; nginx was not restarted."}
        if "no answer within" in text:
            return {"content": "Nobody approved the restart in time; nginx was not restarted."}
        return {"content": "unexpected"}
    if role == "worker":
        assert worker_task(request) == "Restart nginx"
        if not has_tool_results(request):
            return {"content": SAID, "tool_calls": [("container_exec", {"command": COMMAND})]}
        last = [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]
        if "RESTARTED-NGINX-42" in last:
            return {"content": "nginx restarted: RESTARTED-NGINX-42"}
        if "DENIED: denied by the owner" in last:
            return {"content": "not restarted: denied by the owner"}
        if "NO ANSWER" in last:
            return {"content": "not restarted: no answer within the approval time"}
        return {"content": f"unexpected tool result: {last[:200]}"}
    return {"content": "short summary"}


@pytest.fixture
def waiting_run(runtime_env, llm, pool, owner):
    """Start a run whose worker wants COMMAND, which the owner's policy asks about; returns
    start(timeout_s) -> (rt, run_id, arn, approval row) once the execution waits on the approval's token.
    ``timeout_s`` is the deployment's longest wait (ZERG_APPROVAL_TIMEOUT_S), ``expiry_s`` the policy's."""
    llm.respond_with(_script)

    def start(timeout_s: int = 600, wait: bool = True, expiry_s: int = 3600):
        set_approval_policy(pool, owner, tools={"container_exec": "ask"}, expiry_s=expiry_s)
        rt = runtime_env(ZERG_APPROVAL_TIMEOUT_S=str(timeout_s))
        with pool.connection() as conn:
            started = runs.start_run(conn, owner, "restart nginx", trigger="cli")
        arn = rt.starter.start(started.run_id, owner, started.thread_id)
        if not wait:
            return rt, started.run_id, arn, None

        def token_stored():  # whatever its status since: a 1 s wait may have timed out before this poll under load
            with pool.connection() as conn:
                return conn.execute("SELECT * FROM approvals WHERE owner_id = %s AND run_id = %s "
                                    "AND task_token IS NOT NULL", (owner, started.run_id)).fetchone()

        row = wait_for(token_stored, "the approval's task token", limit_s=60)
        return rt, started.run_id, arn, row

    return start


def _finish(rt, arn):
    desc = rt.starter.engine().wait(arn, timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    return desc


def _worker(rt, pool, owner, run_id):
    with pool.connection() as conn:
        (job,) = conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s AND owner_id = %s",
                              (run_id, owner)).fetchall()
    files = [f.path for f in rt.store.list_files(job["worker_id"]) if f.path.startswith("tool_calls/")]
    return job, files


def _run(pool, owner, run_id):
    with pool.connection() as conn:
        return runs.get_run(conn, owner, run_id)


def test_a_call_waits_as_a_workflow_state_and_runs_once_when_approved(waiting_run, pool, owner, llm):
    rt, run_id, arn, row = waiting_run()
    assert _run(pool, owner, run_id)["status"] == "awaiting_approval"
    # the call as validated, defaults included: what runs if the owner approves
    assert (row["tool"], row["arguments"], row["status"]) == ("container_exec", CALL, "pending")
    assert row["reason"] == SAID  # the model's words with the call, shown to the owner as data
    assert row["asked_because"] == "the owner's policy asks before container_exec" and row["expires_at"] is not None
    assert rt.starter.engine().describe(arn)["status"] == "RUNNING"  # waiting on the callback task
    job, files = _worker(rt, pool, owner, run_id)
    assert job["status"] == "running" and files == []  # held: nothing ran
    worker_calls = len([r for r in llm.requests if role_of(r) == "worker"])

    answer = approve(rt, owner, row["id"])
    assert answer.decided and answer.status == "approved"
    _finish(rt, arn)

    run = _run(pool, owner, run_id)
    assert run["status"] == "success" and run["result"] == "Restarted nginx (RESTARTED-NGINX-42)."
    job, files = _worker(rt, pool, owner, run_id)
    assert job["status"] == "success" and files == ["tool_calls/001_container_exec.txt"]  # ran exactly once
    assert "RESTARTED-NGINX-42" in rt.store.read_file(job["worker_id"], files[0])
    assert len([r for r in llm.requests if role_of(r) == "worker"]) == worker_calls + 1  # resumed, not restarted
    meta = rt.store.read_metadata(job["worker_id"])
    assert "paused" not in meta and meta["tokens_in"] > 0 and len(meta["tool_calls"]) == 1
    with pool.connection() as conn:
        used = approvals.get(conn, owner, row["id"])
    assert used["status"] == "approved" and used["used_at"] is not None

    with pool.connection() as conn:
        timeline = [(e["event_type"], e["payload"]) for e in conn.execute(
            "SELECT event_type, payload FROM run_events WHERE run_id = %s ORDER BY id", (run_id,)).fetchall()]
    kinds = [k for k, _ in timeline]
    asked, answered = kinds.index("approval_requested"), kinds.index("approval_answered")
    assert kinds.index("worker_started") < asked < answered < kinds.index("worker_complete")
    assert timeline[asked][1]["arguments"] == CALL and timeline[asked][1]["approval_id"] == row["id"]
    assert timeline[answered][1] == {"job_id": job["id"], "approval_id": row["id"], "status": "approved"}

    again = approve(rt, owner, row["id"])  # a replayed answer: says so, changes nothing
    assert not again.decided and again.status == "approved" and "already answered" in again.message
    assert not deny(rt, owner, row["id"]).decided


def test_denied_the_call_never_runs_and_the_model_is_told(waiting_run, pool, owner):
    rt, run_id, arn, row = waiting_run()
    assert deny(rt, owner, row["id"]).decided
    _finish(rt, arn)
    run = _run(pool, owner, run_id)
    assert run["status"] == "success" and run["result"] == "The owner denied the restart; nginx was not restarted."
    job, files = _worker(rt, pool, owner, run_id)
    assert job["status"] == "success" and files == []
    thread = rt.store.read_file(job["worker_id"], "thread.jsonl")
    assert "DENIED: denied by the owner" in thread and "RESTARTED-NGINX-42" not in thread
    assert not approve(rt, owner, row["id"]).decided  # denied stays denied


def test_no_answer_within_the_timeout_tells_the_model_and_a_late_approval_says_expired(waiting_run, pool, owner):
    rt, run_id, arn, row = waiting_run(timeout_s=1)
    _finish(rt, arn)  # the AwaitApproval state's TimeoutSecondsPath ended the wait
    run = _run(pool, owner, run_id)
    assert run["status"] == "success" and run["result"].startswith("Nobody approved the restart in time")
    job, files = _worker(rt, pool, owner, run_id)
    assert files == [] and "NO ANSWER" in rt.store.read_file(job["worker_id"], "thread.jsonl")
    late = approve(rt, owner, row["id"])
    assert not late.decided and late.status == "expired" and "expired" in late.message
    assert _worker(rt, pool, owner, run_id)[1] == []


def test_the_owners_policy_expiry_bounds_the_wait(waiting_run, pool, owner):
    """The policy's expiry_s is how long this approval waits (the deployment's ZERG_APPROVAL_TIMEOUT_S
    stays the ceiling: the timeout test above waits 1 s under the default 3600 s expiry)."""
    from datetime import UTC, datetime

    rt, run_id, arn, row = waiting_run(timeout_s=600, expiry_s=60)
    left = (row["expires_at"] - datetime.now(UTC)).total_seconds()
    assert 0 < left <= 60, left  # not the deployment's 600 s
    assert deny(rt, owner, row["id"]).decided
    _finish(rt, arn)


def test_another_owners_approval_is_not_found(waiting_run, pool, owner):
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    rt, run_id, arn, row = waiting_run()
    with pool.connection() as conn:
        other = create_owner(conn, unique_name("other owner")).owner_id
        assert approvals.get(conn, other, row["id"]) is None and approvals.pending(conn, other) == []
    with pytest.raises(ApprovalNotFound):
        approve(rt, other, row["id"])
    with pytest.raises(ApprovalNotFound):
        deny(rt, other, row["id"])
    assert _run(pool, owner, run_id)["status"] == "awaiting_approval"  # untouched
    deny(rt, owner, row["id"])
    _finish(rt, arn)


def test_cancel_while_waiting_stops_the_execution_and_the_call_never_runs(waiting_run, pool, owner):
    rt, run_id, arn, row = waiting_run()
    with pool.connection() as conn:  # what the cancel route does (POST /api/jarvis/runs/{id}/cancel)
        runs.cancel_run(conn, owner, run_id)
    rt.starter.stop(arn, "cancelled by the user")
    runner.end_approval_waits(rt, owner, run_id)

    desc = rt.starter.engine().wait(arn, timeout=60)  # not the wait's 600 s: the stop ended it
    assert desc["status"] == "ABORTED"
    job, files = _worker(rt, pool, owner, run_id)
    assert job["status"] == "cancelled" and files == []
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "cancelled"
        events = [e["event_type"] for e in conn.execute(
            "SELECT event_type FROM run_events WHERE run_id = %s ORDER BY id", (run_id,)).fetchall()]
    assert _run(pool, owner, run_id)["status"] == "cancelled" and events[-1] == "error"
    assert not approve(rt, owner, row["id"]).decided


def test_a_resume_that_loses_the_approval_to_a_racing_resume_of_a_closed_run_leaves_the_job_to_it(
        waiting_run, pool, owner):
    """On AWS a cancel's end_approval_waits and the ASL's ResumeWorker (woken by the cancelled token)
    both resume the held job: the one that takes the approval records the job cancelled; the other,
    finding it taken while the run is closed, must not fail the job ("interrupted after its approval
    was used") nor run anything."""
    rt, run_id, arn, row = waiting_run()
    with pool.connection() as conn:  # the cancel, and the winner of the two resumes at the moment it took the approval
        runs.cancel_run(conn, owner, run_id)
        approvals.decide(conn, owner, row["id"], "cancelled")
        assert approvals.take(conn, owner, row["id"], row["job_id"]) is not None
    loser = runner.resume_worker_job(rt, row["job_id"], owner, run_id, row["id"])
    assert loser.status == "cancelled"
    job, files = _worker(rt, pool, owner, run_id)
    assert job["status"] == "running" and files == []  # untouched: the winner records it; nothing ran
    rt.starter.stop(arn, "cancelled by the user")
    rt.starter.engine().wait(arn, timeout=60)


def test_the_run_clock_stops_while_it_waits(pool, owner):
    """A run's deadline moves on by the time it waited for approvals: an hour's wait spends none of it."""
    from zerg.runs import deadline as run_deadline

    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "restart nginx", trigger="cli")
        run_id = started.run_id
        conn.execute("UPDATE runs SET status = 'running', started_at = now() - interval '2 hours' WHERE id = %s",
                     (run_id,))
        assert runs.mark_awaiting_approval(conn, owner, run_id)
        conn.execute("UPDATE runs SET awaiting_since = now() - interval '3600 seconds' WHERE id = %s", (run_id,))
        waiting = runs.get_run(conn, owner, run_id)
        assert waiting["status"] == "awaiting_approval"
        assert (run_deadline.clock_start(waiting) - waiting["started_at"]).total_seconds() >= 3600
        assert runs.mark_resumed(conn, owner, run_id) and not runs.mark_resumed(conn, owner, run_id)
        resumed = runs.get_run(conn, owner, run_id)
    assert resumed["status"] == "running" and resumed["awaiting_since"] is None
    assert resumed["approval_wait_s"] >= 3600
    assert (run_deadline.clock_start(resumed) - resumed["started_at"]).total_seconds() == resumed["approval_wait_s"]


def test_an_answer_before_the_token_is_stored_wakes_the_wait_when_it_is(waiting_run, pool, owner, monkeypatch):
    """The owner answers between the worker's step and the callback task's function: the answer
    decides the row (no token yet), and await_answer, finding it decided, answers the token itself."""
    from zerg.approvals import wait

    original = wait.await_answer
    early = []

    def answered_first(rt, owner_id, approval_id, token, timeout_s):
        early.append(approve(rt, owner_id, approval_id))
        return original(rt, owner_id, approval_id, token, timeout_s)

    monkeypatch.setattr(wait, "await_answer", answered_first)
    rt, run_id, arn, _ = waiting_run(wait=False)
    _finish(rt, arn)
    assert len(early) == 1 and early[0].decided
    run = _run(pool, owner, run_id)
    assert run["status"] == "success" and run["result"] == "Restarted nginx (RESTARTED-NGINX-42)."
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]


def test_two_answers_at_once_one_decides(waiting_run, pool, owner):
    import threading

    rt, run_id, arn, row = waiting_run()
    barrier = threading.Barrier(2)
    answers = []

    def answer(fn):
        barrier.wait()
        answers.append(fn(rt, owner, row["id"]))

    threads = [threading.Thread(target=answer, args=(fn,)) for fn in (approve, deny)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    _finish(rt, arn)
    assert sorted(a.decided for a in answers) == [False, True]
    (winner,) = [a for a in answers if a.decided]
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == winner.status
    ran = _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]
    assert ran == (winner.status == "approved")


def test_no_tool_can_answer_an_approval():
    """An approval is answered from the owner's channels only: no tool module reaches the answers
    (zerg.approvals.wait) or the approval rows (zerg.approvals.requests), not even through the policy
    the approval gate reads (zerg.approvals and its modules, followed import by import)."""
    import ast
    from pathlib import Path

    import zerg.approvals
    import zerg.tools

    package = Path(zerg.approvals.__file__).parent

    def imported(path: Path) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)  # a submodule imported by name ("from zerg.approvals import wait") too
                if node.module == "zerg.approvals":
                    names |= {f"zerg.approvals.{a.name}" for a in node.names if (package / f"{a.name}.py").exists()}
                if node.module == "zerg" and any(a.name == "approvals" for a in node.names):
                    names.add("zerg.approvals")
        return {n for n in names if n == "zerg.approvals" or n.startswith("zerg.approvals.")}

    def source(module: str) -> Path:
        rest = module.removeprefix("zerg.approvals").lstrip(".")
        return package / (f"{rest}.py" if rest else "__init__.py")

    for path in Path(zerg.tools.__file__).parent.glob("*.py"):
        seen, todo = set(), imported(path)
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo |= imported(source(module))
        assert not seen & {"zerg.approvals.wait", "zerg.approvals.requests"}, (path.name, sorted(seen))


def test_the_orphan_reaper_leaves_a_waiting_job_alone(waiting_run, pool, owner):
    from zerg.runs import jobs

    rt, run_id, arn, row = waiting_run()
    with pool.connection() as conn:  # as if it had waited far longer than a worker may run
        conn.execute("UPDATE worker_jobs SET started_at = now() - interval '2 hours' WHERE id = %s", (row["job_id"],))
        assert row["job_id"] not in [j["id"] for j in jobs.stale_running_jobs(conn, 60)]
    deny(rt, owner, row["id"])
    _finish(rt, arn)


def test_an_answer_whose_token_cannot_be_sent_still_decides_and_the_wait_ends_at_its_timeout(
        waiting_run, pool, owner, monkeypatch):
    """The decision is the row's: Step Functions refusing the answer (throttled, a grant missing) costs
    the owner time, not their answer. The wait times out and the resume reads "approved"."""
    rt, run_id, arn, row = waiting_run(timeout_s=3)  # the approval lands well within it; the wait still times out

    def refused(*args, **kwargs):
        raise RuntimeError("ThrottlingException")

    monkeypatch.setattr(type(rt.starter), "send_task_success", refused)
    answer = approve(rt, owner, row["id"])
    assert answer.decided and answer.status == "approved"
    _finish(rt, arn)
    run = _run(pool, owner, run_id)
    assert run["result"] == "Restarted nginx (RESTARTED-NGINX-42)."
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]


@contextlib.contextmanager
def moto_run_machine(monkeypatch):
    """The real run ASL on moto's Step Functions (``mock_aws`` executing it), the real handlers as its
    Lambda functions: yields (the state machine's arn, the boto3 Step Functions client)."""
    import boto3
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from statemachines import definition
    from zerg.local.engine import FUNCTION_KEYS, LambdaContext, default_handlers

    handlers = default_handlers()

    def invoke(backend, function_name, qualifier, body, headers, response_headers):
        name = function_name.rsplit(":", 1)[-1]
        try:
            result = handlers[name](json.loads(body), LambdaContext(name))
        except Exception as exc:  # what the Lambda runtime reports for an unhandled error
            response_headers["x-amz-function-error"] = "Unhandled"
            result = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}
        return json.dumps(result, default=str).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        region = "us-east-1"
        monkeypatch.setenv("AWS_DEFAULT_REGION", region)
        role = boto3.client("iam", region_name=region).create_role(
            RoleName="run", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        asl = definition("run")
        for name, key in FUNCTION_KEYS.items():
            arn = boto3.client("lambda", region_name=region).create_function(
                FunctionName=name, Runtime="python3.12", Role=role, Handler="handler.handler",
                Code={"ZipFile": b"x"})["FunctionArn"]
            asl = asl.replace("${%s}" % key, arn)
        sfn = boto3.client("stepfunctions", region_name=region)
        yield sfn.create_state_machine(name="zerg-run", definition=asl, roleArn=role)["stateMachineArn"], sfn


def moto_execution_end(sfn, arn: str) -> dict:
    return wait_for(lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
                    "the execution's end", limit_s=120)


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_the_same_wait_on_moto_step_functions(runtime_env, llm, pool, owner, monkeypatch, answer):
    """The real run ASL on moto's Step Functions (``mock_aws`` executing it, boto3, the Step Functions
    starter answering the token), the real handlers as the Lambda functions: what runs on AWS."""
    set_approval_policy(pool, owner, tools={"container_exec": "ask"})
    llm.respond_with(_script)
    with moto_run_machine(monkeypatch) as (machine, sfn):
        rt = runtime_env(ZERG_STATE_MACHINE_ARN=machine, ZERG_APPROVAL_TIMEOUT_S="600")
        with pool.connection() as conn:
            started = runs.start_run(conn, owner, "restart nginx", trigger="email")
        arn = rt.starter.start(started.run_id, owner, started.thread_id)

        def token_stored():
            with pool.connection() as conn:
                rows = approvals.pending(conn, owner, started.run_id)
            return rows[0] if rows and rows[0]["task_token"] else None

        row = wait_for(token_stored, "the approval's task token", limit_s=60)
        assert _run(pool, owner, started.run_id)["status"] == "awaiting_approval"
        assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
        assert (approve if answer == "approve" else deny)(rt, owner, row["id"]).decided
        desc = moto_execution_end(sfn, arn)
    assert desc["status"] == "SUCCEEDED", desc
    run = _run(pool, owner, started.run_id)
    files = _worker(rt, pool, owner, started.run_id)[1]
    if answer == "approve":
        assert run["result"] == "Restarted nginx (RESTARTED-NGINX-42)."
        assert files == ["tool_calls/001_container_exec.txt"]
    else:
        assert run["result"] == "The owner denied the restart; nginx was not restarted." and files == []
