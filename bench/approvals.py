"""The approval round trip on the local engine (issue 27 item 2): a worker's call the owner's policy
asks about (here ``container_exec`` set to ``ask``) waits in the run machine's AwaitApproval state
(a callback task), the owner approves, the call runs.

Measured per run, from ``approve()`` (the row decided, SendTaskSuccess through the run starter) to
the approved call's output in the worker's artifacts (the execution resumed, ResumeWorker invoked,
the worker's thread reloaded, the command run in the sandbox); and, for scale, the command alone
(the worker's tool_ms for it). The extra state transitions per approval are counted from the ASL.

Run: .venv/bin/python -m bench.approvals   (smoke: main(smoke=True), 2 round trips)
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time

from bench._common import bench_database, environ, script

COMMAND = "echo APPROVED-CALL"


def _script(request):
    from tests.support.scripts import has_tool_results, role_of

    role = role_of(request)
    if role == "supervisor":
        return {"content": "done"} if has_tool_results(request) else {"tool_calls": [("spawn_worker", {"task": "t"})]}
    if role == "worker":
        if has_tool_results(request):
            return {"content": "ran it"}
        return {"tool_calls": [("container_exec", {"command": COMMAND})]}
    return {"content": "short summary"}


def transitions_per_approval() -> tuple[int, int]:
    """(states entered once per approval, once per job whether it asks or not), from the ASL."""
    import json

    from statemachines import definition

    states = json.loads(definition("run"))["States"]["RunJobs"]["ItemProcessor"]["States"]
    per_approval = [name for name in ("AwaitApproval", "ResumeWorker", "IsWaiting") if name in states]
    return len(per_approval), int("IsWaiting" in states)


def main(smoke: bool = False) -> None:
    from tests.support.llm_server import ScriptedLLM
    from zerg import approvals as policies
    from zerg.approvals import requests as approvals
    from zerg.approvals.policy import Policy
    from zerg.approvals.wait import approve
    from zerg.owners import create_owner
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    rounds = 2 if smoke else 15
    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp),
    ):
        llm.respond_with(_script)
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench").owner_id
            policies.set_policy(conn, owner, Policy(tools={"container_exec": "ask"}))
        trips, commands = [], []
        for _ in range(rounds + 1):  # the first warms up the engine, the clients and the sandbox
            with rt.pool.connection() as conn:
                started = runs.start_run(conn, owner, "bench approval", trigger="cli")
            arn = rt.starter.start(started.run_id, owner, started.thread_id)
            row = _wait(lambda run_id=started.run_id: _token_row(rt, approvals, owner, run_id))
            job = _job(rt, owner, started.run_id)
            t = time.perf_counter()
            approve(rt, owner, row["id"])
            _wait(lambda worker_id=job["worker_id"]: _ran(rt, worker_id), poll=0.0005)
            trips.append((time.perf_counter() - t) * 1000)
            desc = rt.starter.engine().wait(arn, timeout=120)
            assert desc["status"] == "SUCCEEDED", desc
            commands.append(rt.store.read_metadata(job["worker_id"])["tool_ms"])
        trips, commands = trips[1:], commands[1:]
        per_approval, per_job = transitions_per_approval()
        print(f"== approval round trip on the local engine, {rounds} runs ==")
        print(f"approve() -> the call's output written   p50 {statistics.median(trips):7.1f} ms   "
              f"max {max(trips):7.1f} ms")
        print(f"  of which the command (container_exec)   p50 {statistics.median(commands):7.1f} ms")
        cost = per_approval * 25 / 1e6
        print(f"extra state transitions per approval      {per_approval}  (${cost:.6f} at $25/M)")
        print(f"extra state transitions per job           {per_job}  (IsWaiting, asked or not)")


def _token_row(rt, approvals, owner, run_id):
    with rt.pool.connection() as conn:
        rows = approvals.pending(conn, owner, run_id)
    return rows[0] if rows and rows[0]["task_token"] else None


def _ran(rt, worker_id):
    return any(f.path.startswith("tool_calls/") for f in rt.store.list_files(worker_id))


def _job(rt, owner, run_id):
    with rt.pool.connection() as conn:
        return conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s AND owner_id = %s", (run_id, owner)).fetchone()


def _wait(predicate, limit_s: float = 60.0, poll: float = 0.002):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(poll)
    raise AssertionError("timed out")


if __name__ == "__main__":
    script(main)
