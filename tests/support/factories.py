"""Rows a test needs before the code under test runs (owners, threads, runs, jobs)."""

from __future__ import annotations

from zerg import jobs
from zerg.threads import find_or_create_thread


def make_run(pool, owner_id: int, task: str = "a task") -> tuple[int, int]:
    """(run_id, thread_id) of a new running run on the owner's thread."""
    with pool.connection() as conn:
        thread_id = find_or_create_thread(conn, owner_id)
        row = conn.execute(
            "INSERT INTO runs (owner_id, thread_id, task, status, started_at) "
            "VALUES (%s, %s, %s, 'running', now()) RETURNING id",
            (owner_id, thread_id, task),
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
