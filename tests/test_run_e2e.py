"""Whole runs through the real ASL under moto's interpreter, with the real handlers and the
scripted model over loopback HTTP."""

from __future__ import annotations

import json

import pytest

from tests.support.factories import run_events
from tests.support.scripts import has_tool_results, role_of, run_script
from zerg.llm.untrusted import fenced_parts
from zerg.runs import store as runs
from zerg.supervisor.evidence import HEADER


def start_and_wait(engine, pool, owner, task, timeout=60):
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, task, trigger="cli")
    arn = engine.start_execution(started.run_id, owner, started.thread_id)
    desc = engine.wait(arn, timeout=timeout)
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
    return run, desc


def thread_messages(pool, owner):
    with pool.connection() as conn:
        return conn.execute(
            "SELECT role, content, metadata, run_id FROM thread_messages WHERE owner_id=%s ORDER BY id", (owner,)
        ).fetchall()


def test_plan_spawns_two_workers_resume_sees_the_evidence_and_the_thread_gets_two_messages(
    runtime_env, llm, engine, pool, owner
):
    rt = runtime_env()
    llm.respond_with(run_script(
        ["Check disk usage", "Check memory"],
        commands={"Check disk usage": "echo DISK-EVIDENCE-78pct", "Check memory": "echo MEM-EVIDENCE-2GB"},
        answer=lambda req: "Disk is 78% full; 2 GB of memory free.",
    ))
    run, desc = start_and_wait(engine, pool, owner, "check disk and memory")
    assert desc["status"] == "SUCCEEDED" and run["status"] == "success"
    assert run["result"] == "Disk is 78% full; 2 GB of memory free."

    with pool.connection() as conn:
        jobs = conn.execute("SELECT * FROM worker_jobs WHERE run_id=%s ORDER BY id", (run["id"],)).fetchall()
    assert [j["status"] for j in jobs] == ["success", "success"]
    assert all(j["summary"] == "short summary" for j in jobs)
    evidence = {j["task"]: rt.store.read_file(j["worker_id"], "tool_calls/001_container_exec.txt") for j in jobs}
    assert "DISK-EVIDENCE-78pct" in evidence["Check disk usage"]

    sup = [r for r in llm.requests if role_of(r) == "supervisor"]
    plan_req, resume_req = sup[0], sup[-1]
    assert not any(HEADER in (m.get("content") or "") for m in plan_req["messages"])  # nothing to mount yet
    mount = resume_req["messages"][-1]  # raw tool output: a fenced user message, never the system role
    assert mount["role"] == "user" and fenced_parts(mount["content"])[0].startswith(HEADER)
    assert "DISK-EVIDENCE-78pct" in mount["content"] and "MEM-EVIDENCE-2GB" in mount["content"]
    assert [m["role"] for m in resume_req["messages"]].count("system") == 1
    outcomes = [m["content"] for m in resume_req["messages"] if m["role"] == "tool"]
    assert len(outcomes) == 2 and all("status success" in o for o in outcomes)

    thread = thread_messages(pool, owner)
    assert [(m["role"], m["content"]) for m in thread] == [
        ("user", "check disk and memory"), ("assistant", "Disk is 78% full; 2 GB of memory free.")]
    # Its supervisor read its workers' evidence (untrusted): later runs see this answer as data.
    assert thread[1]["metadata"] == {"run_id": run["id"], "job_ids": [j["id"] for j in jobs], "read_untrusted": True}
    assert not any(HEADER in m["content"] or "DISK-EVIDENCE" in m["content"] for m in thread)
    assert HEADER not in str(run["working_messages"])  # the mount is ephemeral everywhere
    assert run["tokens_in"] > run["supervisor_tokens_in"] > 0  # totals include workers and summaries


def test_event_sequence_is_the_contract(runtime_env, llm, engine, pool, owner):
    runtime_env()
    llm.respond_with(run_script(["task one", "task two"]))
    run, _ = start_and_wait(engine, pool, owner, "two things")
    events = run_events(pool, run["id"])
    kinds = [e for e, _ in events if e not in ("supervisor_thinking", "answer_delta")]
    # The answer streams after the last worker's events, before the end, and spells the stored answer.
    deltas = [i for i, (e, _) in enumerate(events) if e == "answer_delta"]
    assert deltas and deltas[0] > max(i for i, (e, _) in enumerate(events) if e.startswith("worker_"))
    assert deltas[-1] == len(events) - 2 and events[deltas[0]][1]["reset"] is True
    assert "".join(events[i][1]["text"] for i in deltas) == "Both checks are fine."
    assert kinds[0] == "supervisor_started" and kinds[-1] == "supervisor_complete"
    assert kinds[1:3] == ["worker_spawned", "worker_spawned"]
    body = kinds[3:-1]
    assert sorted(body) == sorted(["worker_started", "worker_complete", "worker_summary_ready"] * 2)
    for job_id in {p["job_id"] for e, p in events if e == "worker_spawned"}:
        mine = [e for e, p in events if p.get("job_id") == job_id]
        assert mine == ["worker_spawned", "worker_started", "worker_complete", "worker_summary_ready"]
    assert events[0][1] == {"run_id": run["id"], "thread_id": run["thread_id"], "task": "two things"}
    assert events[-1][1] == {"run_id": run["id"], "result": "Both checks are fine."}
    assert {e for e, _ in events} <= {"supervisor_started", "supervisor_thinking", "worker_spawned", "worker_started",
                                      "worker_complete", "worker_summary_ready", "answer_delta", "supervisor_complete"}


def test_a_second_run_reuses_the_thread_and_shows_the_previous_answer(runtime_env, llm, engine, pool, owner):
    runtime_env()
    llm.respond_with(run_script(["check"], answer=lambda req: "FIRST-ANSWER"))
    first, _ = start_and_wait(engine, pool, owner, "first question")
    llm.requests.clear()
    llm.respond_with(run_script(["check again"], answer=lambda req: "SECOND-ANSWER"))
    second, _ = start_and_wait(engine, pool, owner, "second question")
    assert first["thread_id"] == second["thread_id"]
    plan_req = next(r for r in llm.requests if role_of(r) == "supervisor")
    contents = [m["content"] for m in plan_req["messages"]]
    assert "first question" in contents
    # The first run read its workers' evidence: its answer comes back fenced, as data.
    (earlier,) = [m for m in plan_req["messages"] if "BEGIN: earlier answer in this conversation" in m["content"]]
    assert earlier["role"] == "user" and fenced_parts(earlier["content"]) == ["FIRST-ANSWER"]
    assert not [m for m in plan_req["messages"] if m["role"] == "assistant" and "FIRST-ANSWER" in m["content"]]
    # The task comes last, before the ephemeral layers (the memory layer recalls the first run's episode).
    assert [c for c in contents if not c.startswith("<<<UNTRUSTED-DATA")][-1] == "second question"
    assert [m["content"] for m in thread_messages(pool, owner)] == [
        "first question", "FIRST-ANSWER", "second question", "SECOND-ANSWER"]


def test_a_worker_crash_fails_that_job_and_the_run_still_answers(runtime_env, llm, pool, owner):
    from functions.worker.handler import handler as real_worker
    from zerg.local.engine import LocalEngine, default_handlers

    rt = runtime_env()

    def crashing_worker(event, context):
        if event.get("action") != "mark_failed":
            with rt.pool.connection() as conn:
                task = conn.execute("SELECT task FROM worker_jobs WHERE id=%s", (event["job_id"],)).fetchone()["task"]
            if task == "Check the flaky thing":
                raise RuntimeError("segfault in the worker")
        return real_worker(event, context)

    def answer(req):
        outcomes = " ".join(m["content"] for m in req["messages"] if m["role"] == "tool")
        return "Disk fine; the flaky check FAILED." if "status failed" in outcomes else "all fine"

    llm.respond_with(run_script(["Check disk", "Check the flaky thing"], answer=answer))
    with LocalEngine(handlers=default_handlers() | {"worker": crashing_worker}) as engine:
        run, desc = start_and_wait(engine, pool, owner, "disk and flaky")
    assert desc["status"] == "SUCCEEDED" and run["status"] == "success"
    assert run["result"] == "Disk fine; the flaky check FAILED."
    with pool.connection() as conn:
        jobs = {j["task"]: j for j in conn.execute("SELECT * FROM worker_jobs WHERE run_id=%s", (run["id"],)).fetchall()}
    assert jobs["Check disk"]["status"] == "success"
    assert jobs["Check the flaky thing"]["status"] == "failed"
    assert "segfault in the worker" in jobs["Check the flaky thing"]["error"]


def test_supervisor_model_error_fails_the_run_with_an_error_event_and_no_thread_messages(
    runtime_env, llm, engine, pool, owner
):
    runtime_env()
    llm.respond_with(lambda req: {"status": 500, "message": "supervisor model is down"})
    run, desc = start_and_wait(engine, pool, owner, "anything")
    assert desc["status"] == "FAILED" and run["status"] == "failed"
    assert "supervisor model is down" in run["error"]
    kind, payload = run_events(pool, run["id"])[-1]
    assert kind == "error" and payload["run_id"] == run["id"] and "supervisor model is down" in payload["message"]
    assert thread_messages(pool, owner) == []


def test_identical_spawn_in_the_same_run_reuses_the_job(runtime_env, llm, engine, pool, owner):
    runtime_env()

    def respond(req):
        role = role_of(req)
        if role == "supervisor":
            tool_msgs = [m for m in req["messages"] if m["role"] == "tool"]
            if not tool_msgs:
                return {"tool_calls": [("spawn_worker", {"task": "check disk"})]}
            if len(tool_msgs) == 1:
                return {"tool_calls": [("spawn_worker", {"task": "check disk"})]}  # same task again
            return {"content": "done"}
        if role == "worker":
            if has_tool_results(req):
                return {"content": "disk ok"}
            return {"tool_calls": [("container_exec", {"command": "true"})]}
        return {"content": "s"}

    llm.respond_with(respond)
    run, desc = start_and_wait(engine, pool, owner, "disk twice")
    assert run["status"] == "success"
    with pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM worker_jobs WHERE run_id=%s", (run["id"],)).fetchone()["n"]
    assert n == 1
    spawned = [e for e, _ in run_events(pool, run["id"]) if e == "worker_spawned"]
    assert len(spawned) == 1


def test_re_spawning_a_finished_task_forever_still_ends(runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MAX_ROUNDS="1", ZERG_SUPERVISOR_MAX_STEPS="4")

    def respond(req):
        role = role_of(req)
        if role == "supervisor-final":
            return {"content": "final answer at the bound"}
        if role == "supervisor":
            return {"tool_calls": [("spawn_worker", {"task": "check disk"})]}  # the same task, always
        if role == "worker":
            return {"content": "ok"} if has_tool_results(req) else {"tool_calls": [("container_exec", {"command": "true"})]}
        return {"content": "s"}

    llm.respond_with(respond)
    run, desc = start_and_wait(engine, pool, owner, "loop please")
    assert desc["status"] == "SUCCEEDED" and run["result"] == "final answer at the bound"
    supervisor_calls = [r for r in llm.requests if role_of(r) in ("supervisor", "supervisor-final")]
    assert len(supervisor_calls) <= 1 + 4  # plan (1 step) + one resume turn (max 4 steps)
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM worker_jobs WHERE run_id=%s", (run["id"],)).fetchone()["n"] == 1


def test_the_mount_is_in_every_supervisor_inference_after_workers_exist(runtime_env, llm, engine, pool, owner):
    runtime_env()
    state = {"n": 0}

    def respond(req):
        role = role_of(req)
        if role == "supervisor":
            state["n"] += 1
            if not has_tool_results(req):
                return {"tool_calls": [("spawn_worker", {"task": "check disk"})]}
            if state["n"] < 4:
                return {"tool_calls": [("get_current_time", {})]}  # more inferences in the same turn
            return {"content": "done"}
        if role == "worker":
            return {"content": "ok"} if has_tool_results(req) else {"tool_calls": [("container_exec", {"command": "echo MOUNTED-EVIDENCE"})]}
        return {"content": "s"}

    llm.respond_with(respond)
    run, _ = start_and_wait(engine, pool, owner, "mount everywhere")
    assert run["status"] == "success"
    sup = [r for r in llm.requests if role_of(r) == "supervisor"]
    assert len(sup) == 4
    assert HEADER not in json.dumps(sup[0]["messages"])
    for req in sup[1:]:
        mount = req["messages"][-1]
        assert mount["role"] == "user" and "MOUNTED-EVIDENCE" in fenced_parts(mount["content"])[0]


def test_spawn_rounds_are_bounded(runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MAX_ROUNDS="2")
    counter = {"n": 0}

    def respond(req):
        role = role_of(req)
        if role == "supervisor":
            last = req["messages"][-2] if HEADER in (req["messages"][-1]["content"] or "") else req["messages"][-1]
            if last["role"] == "tool" and "spawn limit reached" in (last["content"] or ""):
                return {"content": "stopping at the limit"}
            counter["n"] += 1
            return {"tool_calls": [("spawn_worker", {"task": f"round {counter['n']}"})]}
        if role == "worker":
            return {"content": "ok"} if has_tool_results(req) else {"tool_calls": [("container_exec", {"command": "true"})]}
        return {"content": "s"}

    llm.respond_with(respond)
    run, _ = start_and_wait(engine, pool, owner, "spawn forever")
    assert run["status"] == "success" and run["result"] == "stopping at the limit"
    assert run["spawn_rounds"] == 2


def test_the_last_supervisor_step_must_answer(runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MAX_STEPS="3")

    def respond(req):
        if req.get("tool_choice") == "none":
            return {"content": "answering at the step limit"}
        return {"tool_calls": [("list_workers", {})]}

    llm.respond_with(respond)
    run, _ = start_and_wait(engine, pool, owner, "keep looking")
    assert run["status"] == "success" and run["result"] == "answering at the step limit"
    sup = [r for r in llm.requests if r.get("tools")]
    assert len(sup) == 3 and [r.get("tool_choice") for r in sup] == [None, None, "none"]
    assert any("Workers (newest first" in (m.get("content") or "") or "No workers match" in (m.get("content") or "")
               for m in sup[-1]["messages"] if m["role"] == "tool")


@pytest.mark.parametrize("event", [{}, {"action": "plan", "run_id": 1, "owner_id": 1}, {"action": "nap", "run_id": 1, "owner_id": 1}])
def test_supervisor_handler_refuses_invalid_events(event):
    from functions.supervisor.handler import handler
    from zerg.handler_input import InvalidEvent

    with pytest.raises(InvalidEvent, match="invalid supervisor event"):
        handler(event)


def test_a_cancel_racing_finalize_wins_once_and_nothing_reaches_the_thread(runtime_env, pool, owner):
    from zerg.supervisor import turn as supervisor

    rt = runtime_env()
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "race")
        conn.execute("UPDATE runs SET result = 'the answer' WHERE id = %s", (started.run_id,))
        runs.cancel_run(conn, owner, started.run_id)
        runs.cancel_run(conn, owner, started.run_id)  # a second cancel changes nothing
    out = supervisor.finalize(rt, started.run_id, owner, started.thread_id)
    assert out["status"] == "cancelled"
    assert supervisor.fail(rt, started.run_id, owner, {"Error": "X", "Cause": "y"})["status"] == "cancelled"
    kinds = [k for k, _ in run_events(pool, started.run_id)]
    assert kinds == ["supervisor_started", "error"]
    assert thread_messages(pool, owner) == []


def test_a_lambda_timeout_marks_the_run_timeout(runtime_env, pool, owner):
    from zerg.supervisor import turn as supervisor

    rt = runtime_env()
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "slow")
    out = supervisor.fail(rt, started.run_id, owner, {"Error": "Sandbox.Timedout", "Cause": "Task timed out after 900.00 seconds"})
    assert out["status"] == "timeout"
    kind, payload = run_events(pool, started.run_id)[-1]
    assert kind == "error" and payload["message"].startswith("run timed out: Sandbox.Timedout")
