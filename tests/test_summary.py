"""Summaries: short, outcome-focused, best-effort, and never touching status."""

from __future__ import annotations

from functions.summary.handler import handler as summary_handler
from tests.support.factories import make_finished_worker, make_run, run_events
from zerg.llm.untrusted import fenced_parts


def _row(pool, job_id):
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM worker_jobs WHERE id=%s", (job_id,)).fetchone()


def test_llm_summary_is_written_to_metadata_index_and_event(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "Check disk on cube", "Disk /dev/sda1 is 78% used ...")
    llm.script({"content": "Cube disk 78% full, healthy"})
    out = summary_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out == {"job_id": job_id, "worker_id": wid, "summary_ready": True}
    meta = rt.store.read_metadata(wid)
    assert meta["summary"] == "Cube disk 78% full, healthy"
    assert meta["summary_meta"]["model"] == "gpt-4o-mini" and meta["summary_meta"]["error"] is None
    assert meta["summary_meta"]["version"] == 1 and meta["summary_meta"]["generated_at"]
    row = _row(pool, job_id)
    assert row["summary"] == "Cube disk 78% full, healthy" and row["status"] == "success"
    assert run_events(pool, run_id)[-1] == (
        "worker_summary_ready", {"job_id": job_id, "worker_id": wid, "summary": "Cube disk 78% full, healthy"})
    sent = llm.requests[0]
    system, user = sent["messages"]
    assert sent["max_tokens"] == 60 and system["role"] == "system" and "Disk /dev/sda1" not in system["content"]
    assert user["role"] == "user" and fenced_parts(user["content"]) == ["Disk /dev/sda1 is 78% used ..."]


def test_llm_summary_over_150_characters_is_cut(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "t", "r")
    llm.script({"content": "word " * 60})
    summary_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    summary = rt.store.read_metadata(wid)["summary"]
    assert len(summary) == 150 and summary.endswith("...")


def test_llm_error_falls_back_to_truncation_and_records_why(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    result = "R" * 400
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "t", result, status="failed")
    llm.script({"status": 500, "message": "model exploded"})
    summary_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    meta = rt.store.read_metadata(wid)
    assert meta["summary"] == "R" * 147 + "..."
    assert meta["summary_meta"]["model"] == "truncation-fallback"
    assert "model exploded" in meta["summary_meta"]["error"]
    assert meta["status"] == "failed" and _row(pool, job_id)["status"] == "failed"


def test_llm_timeout_falls_back_to_truncation(runtime_env, llm, pool, owner, monkeypatch):
    import zerg.workers.summary

    monkeypatch.setattr(zerg.workers.summary, "SUMMARY_TIMEOUT_S", 0.3)
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "t", "short result")
    llm.script({"delay": 2, "content": "too late"})
    summary_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    meta = rt.store.read_metadata(wid)
    assert meta["summary"] == "short result" and meta["summary_meta"]["model"] == "truncation-fallback"
    assert "timed out" in meta["summary_meta"]["error"]
    assert meta["status"] == "success"


def test_summary_failure_never_fails_the_caller(runtime_env, pool, owner, monkeypatch):
    import zerg.workers.summary

    runtime_env()
    run_id, _ = make_run(pool, owner)

    def broken(*a, **k):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(zerg.workers.summary, "summarize_job", broken)
    out = summary_handler({"job_id": 1, "run_id": run_id, "owner_id": owner})
    assert out["summary"] is None


def test_another_owners_job_is_not_summarised(runtime_env, llm, pool, owner, other_owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "t", "mine")
    out = summary_handler({"job_id": job_id, "run_id": run_id, "owner_id": other_owner})
    assert out["summary_ready"] is False and llm.requests == []
    assert rt.store.read_metadata(wid)["summary"] is None
