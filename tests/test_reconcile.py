"""The job index reconciled with ``metadata.json`` automatically: at a run's resume and finalize,
and by ``reconcile_index`` for the housekeeping loop. The rows here are what a database outage
leaves behind (the worker finished and wrote its metadata; the index never heard of it)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from tests.support.factories import make_job, make_run, run_events
from zerg.db import retry_unavailable
from zerg.llm import Usage
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.supervisor import turn
from zerg.supervisor.turn import PENDING
from zerg.timestamps import parse_iso, utcnow
from zerg.workers.reconcile import reconcile_index, reconcile_run, run_reconcile


def outage_leftover(rt, pool, owner_id: int, run_id: int, task: str, status: str | None,
                    finished_ago: timedelta = timedelta(0)) -> tuple[int, str]:
    """A job the index shows ``running`` whose worker's metadata says ``status`` (None: still running)."""
    job_id = make_job(pool, owner_id, run_id, task)
    wid = rt.store.create_worker(task, owner_id, job_id=job_id, run_id=run_id, model="m",
                                 now=utcnow() - finished_ago - timedelta(seconds=5))
    with pool.connection() as conn:
        jobs.mark_started(conn, job_id, wid, parse_iso(rt.store.read_metadata(wid)["started_at"]))
    if status is not None:
        rt.store.save_result(wid, f"{task}: {status}")
        rt.store.complete_worker(wid, status, error=None if status == "success" else "boom",
                                 finished_at=utcnow() - finished_ago)
    return job_id, wid


def index_row(pool, job_id: int) -> dict:
    with pool.connection() as conn:
        return conn.execute("SELECT status, error, finished_at FROM worker_jobs WHERE id = %s", (job_id,)).fetchone()


def test_finalize_never_ends_success_while_a_job_stays_running_in_the_index(runtime_env, pool, owner):
    rt = runtime_env()
    run_id, thread_id = make_run(pool, owner)
    failed, failed_wid = outage_leftover(rt, pool, owner, run_id, "said failed", "failed")
    died, died_wid = outage_leftover(rt, pool, owner, run_id, "died mid-run", None)
    never = make_job(pool, owner, run_id, "never started")

    assert turn.finalize(rt, run_id, owner, thread_id)["status"] == "success"

    assert index_row(pool, failed)["status"] == "failed" == rt.store.read_metadata(failed_wid)["status"]
    assert index_row(pool, failed)["error"] == "boom"  # metadata.json's outcome, not a guess
    for job_id in (died, never):
        row = index_row(pool, job_id)
        assert row["status"] == "failed" and row["error"] == "the worker ended without recording its outcome"
    assert rt.store.read_metadata(died_wid)["status"] == "failed"  # index and metadata agree
    events = run_events(pool, run_id)
    completes = [p["job_id"] for e, p in events if e == "worker_complete"]
    assert sorted(completes) == sorted([failed, died, never])
    assert events[-1][0] == "supervisor_complete"  # every worker_complete comes before it


def test_a_failed_runs_error_event_shows_the_outcomes_metadata_json_recorded(runtime_env, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    done, _ = outage_leftover(rt, pool, owner, run_id, "finished", "success")

    assert turn.fail(rt, run_id, owner, {"Error": "States.TaskFailed", "Cause": "resume failed"})["status"] == "failed"

    kind, payload = run_events(pool, run_id)[-1]
    assert kind == "error"
    assert {"job_id": done, "status": "success", "summary": None} in payload["partial"]
    assert index_row(pool, done)["status"] == "success"


def test_reconciling_another_owners_run_touches_nothing(runtime_env, pool, owner, other_owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id, _ = outage_leftover(rt, pool, owner, run_id, "mine", "success")
    never = make_job(pool, owner, run_id, "queued")

    report = reconcile_run(rt, other_owner, run_id, close_unfinished=True)

    assert (report.checked, report.repaired, report.closed) == (0, [], [])
    assert index_row(pool, job_id)["status"] == "running" and index_row(pool, never)["status"] == "queued"
    assert run_events(pool, run_id) == []


def test_resume_shows_the_supervisor_the_outcome_metadata_json_recorded(runtime_env, pool, owner, llm):
    rt = runtime_env()
    run_id, thread_id = make_run(pool, owner)
    job_id, _ = outage_leftover(rt, pool, owner, run_id, "Check disk usage", "success")
    messages = [
        {"role": "system", "content": "you supervise"}, {"role": "user", "content": "check disk"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "spawn_worker", "arguments": '{"task": "Check disk usage"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": None, PENDING: job_id},
    ]
    with pool.connection() as conn:
        runs.save_working(conn, run_id, messages, Usage(), rounds=1)
    llm.script({"content": "Disk is fine."})

    assert turn.resume(rt, run_id, owner, thread_id) == {"jobs": [], "done": True}

    outcome = next(m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool")
    assert f"Worker job {job_id} finished: status success" in outcome
    mount = llm.requests[-1]["messages"][-1]["content"]  # its result.txt reaches the model in the mount
    assert "Check disk usage: success" in mount and "Check disk usage: success" not in outcome
    assert index_row(pool, job_id)["status"] == "success"


def test_reconcile_index_repairs_settled_rows_of_every_owner_and_leaves_the_rest(runtime_env, pool, owner, other_owner):
    rt = runtime_env(ZERG_DB_RETRY_S="60", ZERG_DB_WAIT_S="5")
    old = timedelta(minutes=10)
    mine_run, _ = make_run(pool, owner)
    theirs_run, _ = make_run(pool, other_owner)
    mine, _ = outage_leftover(rt, pool, owner, mine_run, "mine", "success", finished_ago=old)
    theirs, _ = outage_leftover(rt, pool, other_owner, theirs_run, "theirs", "timeout", finished_ago=old)
    fresh, _ = outage_leftover(rt, pool, owner, mine_run, "just finished", "failed")  # may still be retrying
    running, _ = outage_leftover(rt, pool, owner, mine_run, "still running", None)
    corrupt, corrupt_wid = outage_leftover(rt, pool, owner, mine_run, "corrupt", "success", finished_ago=old)
    (rt.settings.artifact_root / "workers" / corrupt_wid / "metadata.json").write_text("{not json")
    with pool.connection() as conn:  # a run that already ended gets no event after its final one
        runs.fail_run(conn, runs.get_run(conn, other_owner, theirs_run), "failed", "ended")

    report = reconcile_index(rt, limit=100_000)

    assert set(report.repaired) >= {mine, theirs}
    assert not {fresh, running, corrupt} & set(report.repaired)
    assert index_row(pool, mine)["status"] == "success" and index_row(pool, theirs)["status"] == "timeout"
    assert [index_row(pool, j)["status"] for j in (fresh, running, corrupt)] == ["running"] * 3
    assert any(job_id == corrupt and "unreadable" in why for job_id, why in report.skipped)
    assert [p["job_id"] for e, p in run_events(pool, mine_run) if e == "worker_complete"] == [mine]
    assert not [e for e, _ in run_events(pool, theirs_run) if e == "worker_complete"]

    assert set(run_reconcile(rt)) == {"checked", "repaired", "skipped"}  # the housekeeping task's log line
    again = reconcile_index(rt, limit=100_000)  # idempotent: nothing left to repair for these
    assert not {mine, theirs} & set(again.repaired)
    assert reconcile_index(rt, settle_s=0, limit=100_000).repaired.count(fresh) == 1


def test_bookkeeping_retries_only_database_errors_and_gives_up_after_its_budget():
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.OperationalError("connection refused")
        return "recorded"

    assert retry_unavailable(flaky, budget_s=30, what="a test outcome", first_delay_s=0.01) == "recorded"
    assert len(calls) == 3

    def down() -> None:
        calls.append(1)
        raise psycopg.OperationalError("still down")

    calls.clear()
    with pytest.raises(psycopg.OperationalError, match="still down"):
        retry_unavailable(down, budget_s=0, what="a test outcome")
    assert len(calls) == 1  # no budget: one attempt

    def bug() -> None:
        calls.append(1)
        raise ValueError("a bug is not an outage")

    calls.clear()
    with pytest.raises(ValueError):
        retry_unavailable(bug, budget_s=30, what="a test outcome")
    assert len(calls) == 1
