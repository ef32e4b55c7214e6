"""Rows a test needs before the code under test runs (owners, threads, runs, jobs)."""

from __future__ import annotations

import secrets

from zerg.runs import jobs
from zerg.runs.threads import find_or_create_thread


def unique_name(prefix: str) -> str:
    """An owner (or device) name no other test uses: names are unique, and tests share a database."""
    return f"{prefix}-{secrets.token_hex(4)}"


def make_run(pool, owner_id: int, task: str = "a task", trigger: str = "api") -> tuple[int, int]:
    """(run_id, thread_id) of a new running run on the owner's thread, started by ``trigger``."""
    with pool.connection() as conn:
        thread_id = find_or_create_thread(conn, owner_id)
        row = conn.execute(
            "INSERT INTO runs (owner_id, thread_id, task, status, started_at, trigger) "
            "VALUES (%s, %s, %s, 'running', now(), %s) RETURNING id",
            (owner_id, thread_id, task, trigger),
        ).fetchone()
    return row["id"], thread_id


def make_job(pool, owner_id: int, run_id: int, task: str, model: str | None = None) -> int:
    with pool.connection() as conn:
        return jobs.create_job(conn, owner_id, task, model=model, run_id=run_id)


def run_events(pool, run_id: int) -> list[tuple[str, dict]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT event_type, payload FROM run_events WHERE run_id = %s ORDER BY id", (run_id,)
        ).fetchall()
    return [(r["event_type"], r["payload"]) for r in rows]


def make_finished_worker(
    pool,
    store,
    owner_id: int,
    run_id: int | None,
    task: str,
    result: str | None = "done",
    tool_outputs: list[tuple[str, str, bool]] = (),
    status: str = "success",
    summary: str | None = None,
) -> tuple[int, str]:
    """A worker as the runner leaves it (artifacts, index row), without a model: (job_id, worker_id)."""
    from zerg.artifacts.store import parse_iso

    with pool.connection() as conn:
        job_id = jobs.create_job(conn, owner_id, task, model="gpt-4o-mini", run_id=run_id)
    wid = store.create_worker(task, owner_id, job_id=job_id, run_id=run_id, model="gpt-4o-mini")
    with pool.connection() as conn:
        jobs.mark_started(conn, job_id, wid, parse_iso(store.read_metadata(wid)["started_at"]))
    calls = []
    for tool, text, ok in tool_outputs:
        path = store.save_tool_output(wid, tool, text)
        calls.append({"path": path, "tool": tool, "ok": ok, "exit_code": 0 if ok else 1})
    if result is not None:
        store.save_result(wid, result)
    meta = store.complete_worker(wid, status, error=None if status == "success" else "boom",
                                 extra={"tool_calls": calls})
    with pool.connection() as conn:
        jobs.mark_finished(conn, job_id, meta)
        if summary is not None:
            meta_s = {"version": 1, "model": "test", "generated_at": "t", "error": None}
            store.update_summary(wid, summary, meta_s)
            jobs.set_summary(conn, job_id, summary, meta_s)
    return job_id, wid


def run_task(pool, engine, owner_id: int, task: str, trigger: str = "api", preferences: dict | None = None) -> dict:
    """Start a run of ``task`` (with the request's ``preferences``) on the owner's thread, execute it
    on the local ``engine`` to the end (its Remember step too); the closed run's row."""
    from zerg.runs import store as runs

    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task, trigger=trigger, preferences=preferences)
    assert engine.wait(engine.start_execution(started.run_id, owner_id, started.thread_id), timeout=60)["status"] == "SUCCEEDED"
    assert engine.drain(timeout=60)
    with pool.connection() as conn:
        return runs.get_run(conn, owner_id, started.run_id)


def set_approval_policy(pool, owner_id: int, **policy) -> None:
    """Give the owner an approval policy (fields of :class:`zerg.approvals.policy.Policy`), e.g.
    ``tools={"ssh_exec": "allow"}`` for a test about what a command does, not whether it may run."""
    from zerg import approvals
    from zerg.approvals.policy import Policy

    with pool.connection() as conn:
        approvals.set_policy(conn, owner_id, Policy(**policy))
