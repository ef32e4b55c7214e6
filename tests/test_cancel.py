"""Cancel stops work (issue 12, item 2), with real processes: a worker's ``sleep 60`` in the sandbox
(cancelled through ``zerg serve``'s API) and over SSH to the real server on loopback (cancelled by
another process, through the database only). Order is proven, not timed: at the moment the terminal
event is written, the command's process is checked, and every event offered after it is refused.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from tests.support.api import http_login
from tests.support.factories import make_job, make_run, set_approval_policy
from tests.support.hosts import add_host
from tests.support.sandbox import argv_of, require, running, wait_for
from tests.support.scripts import has_tool_results, role_of, run_script, worker_task
from tests.test_api import db_events, read_stream
from zerg.loop.tool import CancelSignal
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, execute, reaper
from zerg.workers import cancellation

SLEEP = ["sleep", "60"]


# --- processes ------------------------------------------------------------------------------

def our_sleepers() -> list[int]:
    """Live ``sleep 60`` processes started below this test process (sandbox, or the SSH server child)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and argv_of(int(p)) == SLEEP
            and running(int(p)) and os.getpid() in reaper.ancestors(int(p))]


class EmitSpy:
    """Wraps the real ``events.emit``: records every event offered (its id, None when refused) and,
    at the instant before a terminal event is written, which watched processes are still alive."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[dict] = []
        self.watched: list[int] = []
        real = events.emit

        def emit(conn, run_id, owner_id, event_type, payload):
            alive_now = [p for p in self.watched if running(p)] if event_type in events.TERMINAL_EVENTS else None
            event_id = real(conn, run_id, owner_id, event_type, payload)
            self.calls.append({"run_id": run_id, "type": event_type, "id": event_id, "alive": alive_now,
                               "payload": payload})
            return event_id

        monkeypatch.setattr(events, "emit", emit)

    def of(self, run_id: int) -> list[dict]:
        return [c for c in self.calls if c["run_id"] == run_id]

    def terminal(self, run_id: int) -> dict:
        written = [c for c in self.of(run_id) if c["type"] in events.TERMINAL_EVENTS and c["id"] is not None]
        assert len(written) == 1, written
        return written[0]


def job_rows(pool, run_id: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM worker_jobs WHERE run_id = %s ORDER BY id", (run_id,)).fetchall()


def assert_nothing_follows_the_terminal_event(pool, spy: EmitSpy, run_id: int) -> list[str]:
    """The run's last event is its terminal one; returns the event types offered after it (refused)."""
    rows = db_events(pool, run_id)
    terminal = spy.terminal(run_id)
    assert rows[-1][0] == terminal["id"] and rows[-1][1] == "error"
    later = spy.of(run_id)[spy.of(run_id).index(terminal) + 1:]
    assert all(c["id"] is None for c in later), later
    return [c["type"] for c in later]


# --- the must-show tests ----------------------------------------------------------------------

def test_cancel_during_a_sandboxed_sleep_60_kills_it_before_the_terminal_event_and_queued_jobs_never_start(
        api_server, llm, alice, bob, pool, monkeypatch):
    base, configure = api_server
    rt = configure(ZERG_MAP_CONCURRENCY="1")  # the second job waits in the queue behind the sleeper
    spy = EmitSpy(monkeypatch)
    script = run_script(["slow", "queued"], commands={"slow": "sleep 60", "queued": "echo never-runs"})
    worker_tasks = []

    def respond(req):
        if role_of(req) == "worker":
            worker_tasks.append(worker_task(req))
        return script(req)

    llm.respond_with(respond)
    client = http_login(base, alice)
    run = client.post("/api/jarvis/supervisor", json={"task": "slow thing"}).json()
    run_id = run["run_id"]
    [sleeper] = wait_for(our_sleepers, "the worker's sleep 60 in its sandbox", limit_s=60)
    spy.watched.append(sleeper)

    # Another owner can neither cancel the run nor stop its workers.
    assert http_login(base, bob).post(f"/api/jarvis/runs/{run_id}/cancel").status_code == 404
    assert cancellation.stop_run_workers(rt, bob.owner_id, run_id, wait_s=0) == []
    assert running(sleeper) and client.get(f"/api/jarvis/runs/{run_id}").json()["status"] == "running"

    resp = client.post(f"/api/jarvis/runs/{run_id}/cancel")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
    streamed = read_stream(client, run["stream_url"])
    assert streamed[-1][1] == "error" and streamed[-1][2]["message"] == "cancelled by the user"

    assert spy.terminal(run_id)["alive"] == []  # the sleeper was gone before the terminal event was written
    assert not running(sleeper)
    assert_nothing_follows_the_terminal_event(pool, spy, run_id)

    slow, queued = job_rows(pool, run_id)
    kinds = [(k, p.get("job_id")) for _, k, p in db_events(pool, run_id)]
    assert kinds.index(("worker_complete", slow["id"])) < len(kinds) - 1  # the worker ended, then the run
    assert slow["status"] == "cancelled" and rt.store.read_metadata(slow["worker_id"])["status"] == "cancelled"
    output = rt.store.read_file(slow["worker_id"], "tool_calls/001_container_exec.txt")
    assert "$ sleep 60" in output and "killed: cancelled by the user" in output
    assert queued["status"] == "cancelled" and queued["worker_id"] is None and queued["started_at"] is None
    assert [k for k, job_id in kinds if job_id == queued["id"]] == ["worker_spawned"]  # never started
    assert worker_tasks == ["slow"]  # the queued job's worker never asked the model anything
    assert client.get(f"/api/jarvis/runs/{run_id}").json()["status"] == "cancelled"


def ssh_sleep_script(req):
    role = role_of(req)
    if role == "supervisor":
        if has_tool_results(req):
            return {"content": "never shown: the run was cancelled"}
        return {"tool_calls": [("spawn_worker", {"task": "wait on the box"})]}
    if role == "worker":
        if has_tool_results(req):
            return {"content": "done"}
        return {"tool_calls": [("ssh_exec", {"host": "box", "command": "sleep 60"})]}
    return {"content": "short summary"}


def test_cancel_from_another_process_ends_an_ssh_sleep_60_on_the_server_before_the_terminal_event(
        runtime_env, llm, engine, pool, owner, ssh_server, monkeypatch):
    rt = runtime_env()
    add_host(rt, owner, "box", ssh_server)
    set_approval_policy(pool, owner, ssh_allow={"box": ["sleep 60"]})  # a cli run: the command must not wait to ask
    spy = EmitSpy(monkeypatch)
    llm.respond_with(ssh_sleep_script)
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "wait on the box", trigger="cli")
    arn = engine.start_execution(started.run_id, owner, started.thread_id)
    [sleeper] = wait_for(our_sleepers, "sleep 60 on the SSH server", limit_s=60)
    spy.watched.append(sleeper)

    # What the API Lambda does on AWS: only the database changes; the worker notices by polling.
    with pool.connection() as conn:
        assert runs.cancel_run(conn, owner, started.run_id)["status"] == "cancelled"
    engine.wait(arn, timeout=120)  # the worker, its summary and the supervisor's next step all ran

    assert spy.terminal(started.run_id)["alive"] == []
    assert not running(sleeper)
    refused = assert_nothing_follows_the_terminal_event(pool, spy, started.run_id)
    assert "worker_summary_ready" in refused  # the summary step came after the terminal event: dropped
    [job] = job_rows(pool, started.run_id)
    assert job["status"] == "cancelled" and rt.store.read_metadata(job["worker_id"])["status"] == "cancelled"
    output = rt.store.read_file(job["worker_id"], "tool_calls/001_ssh_exec.txt")
    assert "[box] $ sleep 60" in output and "the server ended the remote command" in output
    assert "exit_code: none\nexit_signal: TERM" in output
    with pool.connection() as conn:
        assert runs.get_run(conn, owner, started.run_id)["status"] == "cancelled"


# --- the parts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", [BWRAP, UNSHARE, BEST_EFFORT])
def test_a_cancelled_sandbox_call_returns_only_once_its_command_is_gone(mechanism):
    from zerg.config import load_settings

    if mechanism != BEST_EFFORT:
        require(mechanism)
    cancel = CancelSignal()
    seen: list[int] = []

    def cancel_when_running():
        seen.extend(wait_for(our_sleepers, "the sandboxed sleep", limit_s=60))
        cancel.set("cancelled by the user")

    thread = threading.Thread(target=cancel_when_running)
    thread.start()
    try:
        result = execute("sleep 60; echo not-reached", 120, load_settings({}), output_cap=10_000,
                         mechanism=mechanism, cancel=cancel)
    finally:
        thread.join()
        cancel.close()
    assert result.cancelled and not result.timed_out and result.exit_code is None
    assert seen and not any(running(p) for p in seen) and our_sleepers() == []
    assert "not-reached" not in result.stdout


def test_a_tool_call_after_the_cancel_does_not_start(runtime_env, owner):
    from zerg.loop.tool import ToolContext, invoke
    from zerg.tools.catalog import worker_tools

    rt = runtime_env()
    cancel = CancelSignal()
    cancel.set("cancelled by the user")
    ctx = ToolContext(settings=rt.settings, owner_id=owner, runtime=rt, cancel=cancel)
    tools = worker_tools()
    for name, args in (("container_exec", {"command": "echo started"}), ("ssh_exec", {"host": "box", "command": "true"})):
        out = invoke(tools, name, json.dumps(args), ctx)
        assert not out.ok and out.text == "ERROR: not run: cancelled by the user"
    cancel.close()


def test_no_event_is_appended_after_the_terminal_one(pool, owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        events.emit(conn, run_id, owner, "supervisor_thinking", {"message": "working"})
        terminal = events.emit(conn, run_id, owner, "error", {"run_id": run_id, "message": "boom"})
    with pool.connection() as conn:
        assert events.emit(conn, run_id, owner, "worker_complete", {"job_id": 1}) is None
        assert events.emit(conn, run_id, owner, "supervisor_complete", {"run_id": run_id, "result": "x"}) is None
        listed = events.list_events(conn, owner, run_id)
    assert [e["event_type"] for e in listed] == ["supervisor_thinking", "error"] and listed[-1]["id"] == terminal


def test_a_cancelled_runs_terminal_event_waits_for_its_running_job_and_is_written_once(pool, owner):
    run_id, _ = make_run(pool, owner)
    running, queued = make_job(pool, owner, run_id, "running"), make_job(pool, owner, run_id, "queued")
    with pool.connection() as conn:
        assert jobs.mark_started(conn, running, "w-running", runs.get_run(conn, owner, run_id)["created_at"])
        runs.cancel_run(conn, owner, run_id)
    with pool.connection() as conn:
        assert not events.is_closed(conn, run_id)  # a worker still runs: no terminal event yet
        assert [j["status"] for j in jobs.run_jobs(conn, owner, run_id)] == ["running", "cancelled"]
        assert jobs.mark_started(conn, queued, "w-queued", runs.get_run(conn, owner, run_id)["created_at"]) is False
        jobs.mark_finished(conn, running, {"status": "cancelled", "finished_at": "2030-01-01T00:00:00Z"})
        assert runs.finish_cancel(conn, owner, run_id) is True
    with pool.connection() as conn:
        assert runs.finish_cancel(conn, owner, run_id) is False  # once
        assert [e["event_type"] for e in events.list_events(conn, owner, run_id)] == ["error"]


def test_a_job_cancelled_while_its_worker_was_starting_never_starts(runtime_env, llm, pool, owner, monkeypatch):
    from zerg.workers.runner import run_worker_job

    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "too late")
    create = rt.store.create_worker
    created = []

    def create_then_cancel(*args, **kwargs):  # the cancel commits between the worker's read and its claim
        created.append(create(*args, **kwargs))
        with pool.connection() as conn:
            runs.cancel_run(conn, owner, run_id)
        return created[-1]

    monkeypatch.setattr(rt.store, "create_worker", create_then_cancel)
    outcome = run_worker_job(rt, job_id, owner, run_id)
    assert outcome.status == "cancelled" and outcome.worker_id is None
    assert not rt.store.exists(created[0]) and llm.requests == []
    assert [k for _, k, _ in db_events(pool, run_id)] == ["error"]
