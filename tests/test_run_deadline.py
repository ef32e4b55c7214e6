"""The run deadline (ZERG_RUN_TIMEOUT_S): near it, unfinished workers are cancelled, the supervisor
answers with what exists (saying which workers did not finish) and the run ends ``timeout`` with
that answer on the thread. Whole runs go through the real ASL on the local engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.factories import make_job, make_run, run_events
from tests.support.scripts import has_tool_results, role_of, worker_task
from zerg.config import ConfigError, load_settings
from zerg.runs import deadline, jobs
from zerg.runs import store as runs

QUICK, SLOW = "Quick check", "Slow check"
DEADLINE_ANSWER = "Disk is fine; the slow check did not finish in time."


def deadline_script(request):
    role = role_of(request)
    if role == "supervisor":
        if has_tool_results(request):
            return {"content": "should not be reached: the deadline answer has no tools"}
        return {"tool_calls": [("spawn_worker", {"task": QUICK}), ("spawn_worker", {"task": SLOW})]}
    if role == "supervisor-final":
        return {"content": DEADLINE_ANSWER}
    if role == "worker":
        if has_tool_results(request):
            return {"content": f"Finished: {worker_task(request)}"}
        command = "sleep 60" if worker_task(request) == SLOW else "echo QUICK-EVIDENCE"
        return {"tool_calls": [("container_exec", {"command": command})]}
    return {"content": "short summary"}


def start(engine, pool, owner, task="check quickly and slowly"):
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, task, trigger="cli")
    return started, engine.start_execution(started.run_id, owner, started.thread_id)


def test_at_the_deadline_the_slow_worker_is_cancelled_and_the_answer_says_so(runtime_env, llm, engine, pool, owner):
    rt = runtime_env(ZERG_RUN_TIMEOUT_S="8")  # workers stop 2 s before (a quarter of the run)
    llm.respond_with(deadline_script)
    started, arn = start(engine, pool, owner)
    assert engine.wait(arn, timeout=90)["status"] == "SUCCEEDED"

    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
        quick, slow = jobs.run_jobs(conn, owner, started.run_id)
        thread = conn.execute("SELECT role, content, metadata FROM thread_messages WHERE run_id = %s ORDER BY id",
                              (started.run_id,)).fetchall()
    assert run["status"] == "timeout" and run["deadline_reached_at"] is not None
    assert (quick["status"], slow["status"]) == ("success", "cancelled")
    assert slow["error"] == ("cancelled at the run's deadline (ZERG_RUN_TIMEOUT_S=8s): "
                             "the supervisor answers with what exists")
    answer = run["result"]
    assert answer.startswith(DEADLINE_ANSWER)
    assert answer.endswith(f"(Stopped at the run's deadline (ZERG_RUN_TIMEOUT_S=8s): worker(s) #{slow['id']} did not finish.)")
    assert [(m["role"], m["content"]) for m in thread] == [("user", "check quickly and slowly"), ("assistant", answer)]
    assert thread[1]["metadata"]["status"] == "timeout"

    final = [r for r in llm.requests if role_of(r) == "supervisor-final"][-1]
    assert final["tool_choice"] == "none"  # told to answer, without tools
    told = next(m["content"] for m in final["messages"] if m["role"] == "user" and "[Zerg]" in (m["content"] or ""))
    assert f"#{slow['id']} ({SLOW})" in told and "did not finish" in told
    assert "QUICK-EVIDENCE" in json.dumps(final["messages"])  # what exists was given

    kind, payload = run_events(pool, started.run_id)[-1]
    assert kind == "error"
    assert payload["run_id"] == started.run_id and payload["status"] == "timeout"
    assert payload["message"] == "run timed out: the run's deadline (ZERG_RUN_TIMEOUT_S=8s); answered with what existed"
    assert [(p["job_id"], p["status"]) for p in payload["partial"]] == [(quick["id"], "success"), (slow["id"], "cancelled")]
    assert payload["result"] == answer
    meta = rt.store.read_metadata(slow["worker_id"])
    assert meta["status"] == "cancelled" and meta["error"] == slow["error"]
    assert rt.store.read_file(slow["worker_id"], "result.txt").startswith("[Worker cancelled: cancelled at")
    with pool.connection() as conn:
        doc = runs.run_document(conn, owner, started.run_id)
    assert doc["status"] == "timeout" and doc["result"] == answer


def test_a_worker_whose_run_is_past_its_answer_by_time_never_starts(runtime_env, pool, owner):
    from zerg.workers.runner import run_worker_job

    rt = runtime_env(ZERG_RUN_TIMEOUT_S="60")
    run_id, _ = make_run(pool, owner, "late")
    job_id = make_job(pool, owner, run_id, "too late to start")
    with pool.connection() as conn:
        conn.execute("UPDATE runs SET started_at = now() - interval '55 seconds' WHERE id = %s", (run_id,))
    outcome = run_worker_job(rt, job_id, owner, run_id)
    assert (outcome.status, outcome.worker_id) == ("cancelled", None)
    with pool.connection() as conn:
        row = jobs.get_owned_job(conn, owner, job_id=job_id)
        assert runs.get_run(conn, owner, run_id)["deadline_reached_at"] is not None
    assert row["status"] == "cancelled" and row["worker_id"] is None and "ZERG_RUN_TIMEOUT_S=60s" in row["error"]
    assert run_events(pool, run_id)[-1] == ("worker_complete", {
        "job_id": job_id, "worker_id": None, "status": "cancelled", "duration_ms": None})
    assert run_worker_job(rt, job_id, owner, run_id).status == "cancelled"  # once


def test_a_supervisor_past_the_deadline_answers_at_once_and_spawns_nothing(runtime_env, llm, pool, owner):
    from zerg.supervisor import turn

    rt = runtime_env(ZERG_RUN_TIMEOUT_S="60")
    llm.script({"content": "Nothing was checked: no time was left."})
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "late run")
        conn.execute("UPDATE runs SET started_at = now() - interval '59 seconds' WHERE id = %s", (started.run_id,))
    assert turn.plan(rt, started.run_id, owner, started.thread_id) == {"jobs": [], "done": True}
    (request,) = llm.requests
    assert request["tool_choice"] == "none" and "Every worker finished." in request["messages"][-1]["content"]
    assert turn.finalize(rt, started.run_id, owner, started.thread_id)["status"] == "timeout"
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
        assert jobs.run_jobs(conn, owner, started.run_id) == []
    assert run["result"] == ("Nothing was checked: no time was left.\n\n(Stopped at the run's deadline "
                             "(ZERG_RUN_TIMEOUT_S=60s): every worker had finished.)")


def test_when_the_model_cannot_answer_at_the_deadline_the_answer_lists_what_exists(runtime_env, llm, pool, owner):
    from tests.support.factories import make_finished_worker
    from zerg.supervisor import turn

    rt = runtime_env(ZERG_RUN_TIMEOUT_S="60")
    llm.script({"status": 500, "message": "the model is down"})
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "late run")
    done, _ = make_finished_worker(pool, rt.store, owner, started.run_id, "disk", summary="Disk 40% used")
    cut = make_job(pool, owner, started.run_id, "memory")
    with pool.connection() as conn:
        jobs.cancel_job(conn, cut, "cancelled at the deadline")
        runs.mark_deadline_reached(conn, started.run_id)
    turn.resume(rt, started.run_id, owner, started.thread_id)
    turn.finalize(rt, started.run_id, owner, started.thread_id)
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, started.run_id)
    assert run["status"] == "timeout"
    assert run["result"].startswith("I ran out of time before I could write an answer. What exists:\n"
                                    f"- worker #{done} success: Disk 40% used\n- worker #{cut} cancelled: memory")
    assert run["result"].endswith(f"worker(s) #{cut} did not finish.)")


def test_run_timeout_setting_and_the_state_machine_backstop_above_it():
    assert load_settings({}).run_timeout_s == 600  # above the 300 s worker timeout (the seed's 60 s was not)
    assert load_settings({"ZERG_RUN_TIMEOUT_S": "90"}).run_timeout_s == 90
    with pytest.raises(ConfigError, match="ZERG_RUN_TIMEOUT_S"):
        load_settings({"ZERG_RUN_TIMEOUT_S": str(deadline.MAX_RUN_TIMEOUT_S + 1)})
    asl = json.loads((Path(__file__).resolve().parents[1] / "statemachines" / "run.asl.json").read_text())
    assert asl["TimeoutSeconds"] > deadline.MAX_RUN_TIMEOUT_S + deadline.BACKSTOP_GRACE_S
    settings = load_settings({"ZERG_RUN_TIMEOUT_S": "8"})
    assert deadline.reserve_s(settings) == 2  # a quarter of a short run
    assert deadline.reserve_s(load_settings({})) == 60  # one model call (ZERG_LLM_TIMEOUT_S) of a long one
