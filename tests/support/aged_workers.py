"""Workers of a given age and fate, for the retention sweep's tests."""

from __future__ import annotations

from tests.support.factories import make_finished_worker, make_run
from zerg.runs import store as runs


def age(pool, job_id: int, days: int) -> None:
    with pool.connection() as conn:
        conn.execute("UPDATE worker_jobs SET created_at = now() - make_interval(days => %s) WHERE id = %s",
                     (days, job_id))


def indexed(pool, job_id: int) -> bool:
    with pool.connection() as conn:
        return conn.execute("SELECT 1 FROM worker_jobs WHERE id = %s", (job_id,)).fetchone() is not None


def worker(pool, store, owner_id: int, tag: str, *, days_old: int, run: str = "failed") -> dict:
    """A finished worker ``days_old`` days old whose run ended ``run``: "success" (its answer on
    the thread cites it), "failed" (nothing cites it) or "running" (still going)."""
    run_id, _ = make_run(pool, owner_id, f"{tag} task")
    job_id, worker_id = make_finished_worker(pool, store, owner_id, run_id, f"{tag} worker",
                                             tool_outputs=[("ssh_exec", f"{tag} output", True)])
    with pool.connection() as conn:
        row = runs.get_run(conn, owner_id, run_id)
        if run == "success":
            runs.complete_run(conn, row, f"{tag} answer")
        elif run == "failed":
            runs.fail_run(conn, row, "failed", "boom")
    age(pool, job_id, days_old)
    return {"job_id": job_id, "worker_id": worker_id, "run_id": run_id}


def kept(pool, store, w: dict) -> bool:
    return store.exists(w["worker_id"]) and indexed(pool, w["job_id"])


def gone(pool, store, w: dict) -> bool:
    return not store.exists(w["worker_id"]) and not indexed(pool, w["job_id"])
