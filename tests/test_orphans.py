"""Orphan recovery: a run whose executing process died ends ``interrupted`` (kill -9 of ``zerg serve``
and of ``zerg run``, then a restart), Ctrl-C on ``zerg run`` cancels its run, and the sweep's rules
(executor liveness, unclaimed runs, stuck runs, jobs past their timeout)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx

from tests.support.api import http_login
from tests.support.factories import make_job, make_run, run_events, unique_name
from tests.support.scripts import role_of, worker_task
from tests.support.serve import Served
from tests.support.waiting import wait_for
from zerg.owners import create_owner
from zerg.runs import executor, jobs, orphans
from zerg.runs import store as runs
from zerg.timestamps import utcnow

SLEEPY = "Collect evidence, then wait on the slow command"
EVIDENCE = "EVIDENCE-before-the-kill"


def sleepy_script(seconds: int = 30):
    """The supervisor spawns one worker; it runs a quick command, then ``sleep``."""

    def respond(request):
        role = role_of(request)
        if role == "supervisor":
            if any(m["role"] == "tool" for m in request["messages"]):
                return {"content": "done"}
            return {"tool_calls": [("spawn_worker", {"task": SLEEPY})]}
        if role == "worker":
            done = [m for m in request["messages"] if m["role"] == "tool"]
            if not done:
                return {"tool_calls": [("container_exec", {"command": f"echo {EVIDENCE}"})]}
            if len(done) == 1:
                return {"tool_calls": [("container_exec", {"command": f"sleep {seconds}"})]}
            return {"content": f"Finished: {worker_task(request)}"}
        return {"content": "short summary"}

    return respond


def sleeping(llm) -> bool:
    """The worker asked for its ``sleep`` (its second model call was answered)."""
    return sum(1 for r in llm.requests if role_of(r) == "worker") >= 2


def running_sleep(artifacts: Path, seconds: int) -> bool:
    """A worker's trace holds the ``sleep`` call (appended just before the command starts)."""
    return any(f"sleep {seconds}" in p.read_text() for p in artifacts.glob("workers/*/thread.jsonl"))


def recovered(lines: list[str]) -> set[int]:
    """The run ids a host said it recovered as interrupted."""
    found = set()
    for line in lines:
        if "orphaned run(s) as interrupted: " in line:
            found |= {int(i) for i in line.rstrip(")").split(": ")[-1].split(", ")}
    return found


def cli_env(database_url: str, tmp_path: Path, llm) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_")) and k != "DATABASE_URL"}
    return env | {"DATABASE_URL": database_url, "ZERG_DATA_DIR": str(tmp_path / "data"),
                  "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"), "OPENAI_BASE_URL": llm.base_url,
                  "ZERG_LLM_MAX_RETRIES": "0"}


def sse_events(client: httpx.Client, run_id: int) -> list[tuple[str, dict]]:
    """Every event of the stream until the server ends it (a stream that never ends fails the read)."""
    found, kind = [], None
    with client.stream("GET", "/api/jarvis/supervisor/events", params={"run_id": run_id},
                       timeout=httpx.Timeout(30, read=45)) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind:
                found.append((kind, json.loads(line[6:])))
    return found


def test_kill_9_of_zerg_serve_mid_run_leaves_an_interrupted_run_with_its_evidence_after_restart(
        database_url, pool, tmp_path, llm):
    llm.respond_with(sleepy_script(30))
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("killed"))
    env = cli_env(database_url, tmp_path, llm)
    first = Served(env, tmp_path / "serve.log")
    try:
        client = http_login(first.url, owner)
        accepted = client.post("/api/jarvis/supervisor", json={"task": "check something slow"})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]
        wait_for(lambda: running_sleep(tmp_path / "artifacts", 30), "the worker's sleep", limit_s=60)
        first.kill9()
    finally:
        first.stop()
    with pool.connection() as conn:  # nothing closed it: the process died mid-run
        assert runs.get_run(conn, owner.owner_id, run_id)["status"] == "running"

    second = Served(env, tmp_path / "serve.log")
    try:
        assert run_id in recovered(second.lines), second.lines
        client = http_login(second.url, owner)
        doc = client.get(f"/api/jarvis/runs/{run_id}").json()
        assert doc["status"] == "interrupted"
        assert f"pid {first.proc.pid}" in doc["error"] and "stopped before it finished" in doc["error"]
        (worker,) = doc["workers"]
        assert worker["status"] == "cancelled" and worker["error"] == doc["error"]

        events = sse_events(client, run_id)  # replays, then ends: the error event is the last one
        kind, payload = events[-1]
        assert kind == "error"
        assert payload == {"run_id": run_id, "status": "interrupted", "message": doc["error"],
                           "partial": [{"job_id": worker["job_id"], "status": "cancelled", "summary": None}]}
        assert [k for k, _ in events].count("error") == 1

        files = f"/api/jarvis/workers/{worker['job_id']}/files"
        first_output = client.get(f"{files}/tool_calls/001_container_exec.txt")
        assert first_output.status_code == 200 and EVIDENCE in first_output.text
        assert "sleep 30" in client.get(f"{files}/thread.jsonl").text
        result = client.get(f"{files}/result.txt").text
        assert result.startswith("[Worker cancelled: interrupted: the process executing the run") and EVIDENCE in result
        meta = client.get(f"/api/jarvis/workers/{worker['job_id']}").json()["metadata"]
        assert meta["status"] == "cancelled" and meta["error"] == doc["error"]  # index and artifacts agree
    finally:
        second.stop()


def test_zerg_run_recovers_what_a_killed_zerg_run_left_before_it_runs(database_url, pool, tmp_path, llm):
    llm.respond_with(sleepy_script(30))
    env = cli_env(database_url, tmp_path, llm)
    killed = subprocess.Popen([sys.executable, "-m", "zerg.cli", "run", "check something slow"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: running_sleep(tmp_path / "artifacts", 30), "the worker's sleep", limit_s=120)
    finally:
        killed.kill()
        out, _ = killed.communicate(timeout=30)
    run_id = int(out.split("> run ", 1)[1].split()[0])

    llm.respond_with(lambda request: {"content": "nothing to do"})
    again = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "say hello"], env=env,
                           capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert run_id in recovered(again.stdout.splitlines()), again.stdout
    with pool.connection() as conn:
        run = conn.execute("SELECT status, error FROM runs WHERE id = %s", (run_id,)).fetchone()
        job = conn.execute("SELECT status, error FROM worker_jobs WHERE run_id = %s", (run_id,)).fetchone()
    assert run["status"] == "interrupted" and job == {"status": "cancelled", "error": run["error"]}
    assert "Traceback" not in again.stderr


def test_ctrl_c_on_zerg_run_cancels_its_run_and_says_so(database_url, pool, tmp_path, llm):
    llm.respond_with(sleepy_script(300))
    env = cli_env(database_url, tmp_path, llm)
    proc = subprocess.Popen([sys.executable, "-m", "zerg.cli", "run", "check something slow"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: running_sleep(tmp_path / "artifacts", 300), "the worker's sleep", limit_s=120)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # a hang guard: the sleep has 300 s left
    finally:
        if proc.poll() is None:
            proc.kill()
    run_id = int(out.split("> run ", 1)[1].split()[0])
    assert proc.returncode == 130, out + err
    assert f"Run {run_id} cancelled by the user (Ctrl-C on zerg run)." in out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    with pool.connection() as conn:
        run = conn.execute("SELECT status, error FROM runs WHERE id = %s", (run_id,)).fetchone()
        job = conn.execute("SELECT status, error FROM worker_jobs WHERE run_id = %s", (run_id,)).fetchone()
    assert run == {"status": "cancelled", "error": "cancelled by the user (Ctrl-C on zerg run)"}
    assert job["status"] == "cancelled" and job["error"].startswith("cancelled by the user")
    kind, payload = run_events(pool, run_id)[-1]  # its workers stopped, then the final event
    assert kind == "error" and payload["status"] == "cancelled" and payload["message"] == run["error"]


# --- the sweep's rules, one by one ---------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_executor_is_gone_when_its_pid_died_was_reused_or_went_quiet_on_another_host():
    me = executor.this_process()
    now = utcnow()
    assert executor.parse(me.token) == me
    assert not executor.gone(me, None, now)  # alive, whatever its heartbeat says
    assert executor.gone(executor.Executor(me.host, me.boot_id, _dead_pid(), me.started), now, now)
    reused = executor.Executor(me.host, me.boot_id, me.pid, str(int(me.started) + 1))
    assert executor.gone(reused, now, now)  # our pid, but another process's start time
    rebooted = executor.Executor(me.host, "another-boot", me.pid, me.started)
    assert executor.gone(rebooted, now, now)
    remote = executor.Executor("elsewhere.example", "b", 1, "2")
    assert not executor.gone(remote, now - timedelta(seconds=10), now)
    assert executor.gone(remote, now - timedelta(seconds=executor.STALE_AFTER_S + 1), now)
    assert executor.parse(None) is None and executor.parse("arn:aws:states:x") is None
    assert executor.parse("local:host:boot:notapid:1") is None


def test_a_zombie_executor_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
             "a zombie", limit_s=60)
    try:
        started = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        me = executor.this_process()
        assert executor.gone(executor.Executor(me.host, me.boot_id, child.pid, started), None,
                             utcnow())
    finally:
        child.wait()


def _claim(pool, run_id: int, token: str | None, heartbeat_ago_s: float = 0, started_ago_s: float = 0) -> None:
    with pool.connection() as conn:
        conn.execute(
            """UPDATE runs SET executor = %s, heartbeat_at = now() - make_interval(secs => %s),
                   started_at = now() - make_interval(secs => %s), created_at = now() - make_interval(secs => %s)
               WHERE id = %s""",
            (token, heartbeat_ago_s, started_ago_s, started_ago_s, run_id))


def _status(pool, run_id: int) -> str:
    with pool.connection() as conn:
        return conn.execute("SELECT status FROM runs WHERE id = %s", (run_id,)).fetchone()["status"]


def test_the_sweep_closes_only_runs_nobody_can_be_executing(runtime_env, pool, owner):
    rt = runtime_env()
    me = executor.this_process()
    dead = executor.Executor(me.host, me.boot_id, _dead_pid(), me.started).token
    remote = "local:elsewhere.example:b:1:2"
    cases = {
        "ours, alive": (me.token, 0, 0, "running"),
        "dead pid": (dead, 0, 0, "interrupted"),
        "other host, fresh heartbeat": (remote, 5, 0, "running"),
        "other host, silent": (remote, executor.STALE_AFTER_S + 30, 0, "interrupted"),
        "unclaimed, just started": (None, 0, 5, "running"),
        "unclaimed for long": (None, 0, orphans.UNCLAIMED_GRACE_S + 30, "interrupted"),
    }
    ids = {}
    for name, (token, beat, age, _) in cases.items():
        ids[name], _ = make_run(pool, owner, name)
        _claim(pool, ids[name], token, beat, age)
    aws_run, _ = make_run(pool, owner, "on Step Functions")
    _claim(pool, aws_run, None, 0, orphans.UNCLAIMED_GRACE_S + 30)
    with pool.connection() as conn:
        runs.set_execution_arn(conn, aws_run, "arn:aws:states:us-east-1:1:execution:zerg-run:run-1")

    report = orphans.reap_orphans(rt)
    for name, (_, _, _, expected) in cases.items():
        assert _status(pool, ids[name]) == expected, name
    assert _status(pool, aws_run) == "running"  # Step Functions' runs are closed by their own events
    assert {ids["dead pid"], ids["other host, silent"], ids["unclaimed for long"]} <= set(report.interrupted)
    assert not {ids["ours, alive"], aws_run} & set(report.interrupted)
    again = orphans.reap_orphans(rt)
    assert not set(ids.values()) & set(again.interrupted)
    kinds = [k for k, _ in run_events(pool, ids["dead pid"])]
    assert kinds.count("error") == 1  # a second sweep changes nothing


def test_a_live_executors_run_far_past_its_deadline_ends_timeout(runtime_env, pool, owner):
    rt = runtime_env(ZERG_RUN_TIMEOUT_S="60")
    run_id, _ = make_run(pool, owner, "stuck")
    job = make_job(pool, owner, run_id, "never ran")
    _claim(pool, run_id, "local:elsewhere.example:b:1:2", 1, 60 + 200)  # alive (fresh beat), 200 s late
    report = orphans.reap_orphans(rt)
    assert run_id in report.timed_out_runs
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, run_id)
        row = jobs.get_owned_job(conn, owner, job_id=job)
    assert run["status"] == "timeout" and "ZERG_RUN_TIMEOUT_S=60s" in run["error"]
    assert row["status"] == "cancelled" and row["error"] == run["error"]
    kind, payload = run_events(pool, run_id)[-1]
    assert kind == "error" and payload["status"] == "timeout"
    assert payload["partial"] == [{"job_id": job, "status": "cancelled", "summary": None}]


def test_a_job_running_past_the_worker_timeout_plus_a_grace_becomes_timeout(runtime_env, pool, owner):
    rt = runtime_env(ZERG_WORKER_TIMEOUT_S="30")
    run_id, _ = make_run(pool, owner, "live run")
    _claim(pool, run_id, executor.this_process().token)
    stale, fresh = make_job(pool, owner, run_id, "stale"), make_job(pool, owner, run_id, "fresh")
    wid = rt.store.create_worker("stale", owner, job_id=stale, run_id=run_id)
    rt.store.save_tool_output(wid, "container_exec", "partial output of the stale worker")
    with pool.connection() as conn:
        jobs.mark_started(conn, stale, wid, utcnow())
        jobs.mark_started(conn, fresh, "fresh-worker-" + unique_name("w"),
                          utcnow())
        conn.execute("UPDATE worker_jobs SET started_at = now() - make_interval(secs => %s) WHERE id = %s",
                     (30 + orphans.JOB_GRACE_S + 5, stale))
    report = orphans.reap_orphans(rt)
    assert stale in report.timed_out_jobs and fresh not in report.timed_out_jobs
    with pool.connection() as conn:
        assert jobs.get_owned_job(conn, owner, job_id=stale)["status"] == "timeout"
        assert jobs.get_owned_job(conn, owner, job_id=fresh)["status"] == "running"
    assert _status(pool, run_id) == "running"  # the run itself goes on: its supervisor hears of it
    kind, payload = run_events(pool, run_id)[-1]
    assert (kind, payload["job_id"], payload["status"]) == ("worker_complete", stale, "timeout")
    meta = rt.store.read_metadata(wid)
    assert meta["status"] == "timeout"
    assert "partial output of the stale worker" in rt.store.read_file(wid, "result.txt")


def test_closing_the_local_starter_interrupts_the_runs_it_still_executed(runtime_env, llm, pool, owner):
    from zerg import wiring

    llm.respond_with(sleepy_script(5))
    rt = runtime_env()
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "check something slow")
    rt.starter.start(started.run_id, owner, started.thread_id)
    with pool.connection() as conn:
        assert runs.get_run(conn, owner, started.run_id)["executor"] == executor.this_process().token
    wait_for(lambda: sleeping(llm), "the worker's sleep", limit_s=60)
    wiring.reset_runtime()  # what zerg serve does when it stops
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
    assert run["status"] == "interrupted" and f"pid {os.getpid()}" in run["error"]
    assert run_events(pool, started.run_id)[-1][1]["status"] == "interrupted"


def test_a_run_whose_local_execution_was_aborted_is_closed_as_the_aws_rule_closes_one(runtime_env, llm, pool, owner):
    llm.script({"delay": 3.0, "content": "too late"})  # the plan's model call, while the execution is stopped
    rt = runtime_env()
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "check something")
    arn = rt.starter.start(started.run_id, owner, started.thread_id)
    wait_for(lambda: llm.requests, "the plan's model call", limit_s=60)
    rt.starter.stop(arn, "stopped by hand")  # the execution ends; nothing closed the run
    assert rt.starter.engine().wait(arn, timeout=60)["status"] == "ABORTED"
    with pool.connection() as conn:
        assert runs.get_run(conn, owner, started.run_id)["status"] == "running"
    report = orphans.reap_orphans(rt)
    assert started.run_id in report.interrupted
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
    assert run["status"] == "interrupted" and run["error"] == "interrupted: its execution was aborted (stopped by hand)"


def test_a_cancelled_run_whose_workers_process_died_gets_its_final_event_from_the_sweep(runtime_env, pool, owner):
    rt = runtime_env()
    me = executor.this_process()
    dead = executor.Executor(me.host, me.boot_id, _dead_pid(), me.started).token
    ids = {}
    for name, token in (("dead", dead), ("alive", me.token)):
        ids[name], _ = make_run(pool, owner, name)
        _claim(pool, ids[name], token)
        job = make_job(pool, owner, ids[name], f"{name} worker")
        with pool.connection() as conn:
            jobs.mark_started(conn, job, f"w-{name}-{ids[name]}", utcnow())
            runs.cancel_run(conn, owner, ids[name])  # the worker would record its end, then the event
    assert [k for k, _ in run_events(pool, ids["dead"])] == []  # waiting for a worker that is gone
    report = orphans.reap_orphans(rt)
    assert ids["dead"] in report.closed_cancels and ids["alive"] not in report.closed_cancels
    kind, payload = run_events(pool, ids["dead"])[-1]
    assert kind == "error" and payload["status"] == "cancelled" and payload["partial"][0]["status"] == "cancelled"
    assert run_events(pool, ids["alive"]) == []  # its worker lives: it reports itself
