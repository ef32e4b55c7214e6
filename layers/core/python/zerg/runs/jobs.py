"""The ``worker_jobs`` index: one row per worker, owner-filtered, concurrency-safe. Every SQL
statement on ``worker_jobs`` lives here.

Invariants:
- The index is derived from the artifacts: :func:`reindex` rebuilds it from every worker's
  ``metadata.json`` and keeps job ids stable (they are the handles clients already hold).
- An unreadable ``metadata.json`` is reported, never read as "empty" and never overwritten.
- Status transitions are made by the system (runner, state machine), never from model output.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import Connection, errors
from psycopg.types.json import Jsonb

from zerg.artifacts.store import WorkerArtifactStore
from zerg.statuses import JOB_FINISHED, JOB_STATUSES, JOB_UNFINISHED
from zerg.timestamps import parse_iso


def create_job(
    conn: Connection, owner_id: int, task: str, *, model: str | None = None, run_id: int | None = None
) -> int:
    row = conn.execute(
        "INSERT INTO worker_jobs (owner_id, run_id, task, model) VALUES (%s, %s, %s, %s) RETURNING id",
        (owner_id, run_id, task, model),
    ).fetchone()
    return row["id"]


def get_run_job(conn: Connection, job_id: int, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """A job of ``run_id`` owned by ``owner_id`` (the state machine's ids-only payloads), or None.

    Scoped in the query itself; user-facing reads by job or worker id use
    :func:`zerg.runs.worker_artifacts.resolve_worker`."""
    return conn.execute(
        "SELECT * FROM worker_jobs WHERE id = %s AND owner_id = %s AND run_id = %s", (job_id, owner_id, run_id)
    ).fetchone()


def get_owned_job(
    conn: Connection, owner_id: int, *, job_id: int | None = None, worker_id: str | None = None
) -> dict[str, Any] | None:
    """The owner's job row by job id or by worker id (exactly one is given), or None."""
    if job_id is not None:
        return conn.execute("SELECT * FROM worker_jobs WHERE owner_id = %s AND id = %s", (owner_id, job_id)).fetchone()
    return conn.execute(
        "SELECT * FROM worker_jobs WHERE owner_id = %s AND worker_id = %s", (owner_id, worker_id)
    ).fetchone()


def job_status(conn: Connection, job_id: int) -> str | None:
    row = conn.execute("SELECT status FROM worker_jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else row["status"]


def run_jobs(conn: Connection, owner_id: int, run_id: int, ids: list[int] | None = None) -> list[dict[str, Any]]:
    """The owner's jobs of one run (all, or those in ``ids``), in spawn order."""
    if ids is None:
        return conn.execute(
            "SELECT * FROM worker_jobs WHERE owner_id = %s AND run_id = %s ORDER BY id", (owner_id, run_id)
        ).fetchall()
    return conn.execute(
        "SELECT * FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND id = ANY(%s) ORDER BY id",
        (owner_id, run_id, ids),
    ).fetchall()


def find_run_job_by_task(conn: Connection, owner_id: int, run_id: int, task: str) -> dict[str, Any] | None:
    """The first job of the run with exactly this task (a re-spawn reuses it)."""
    return conn.execute(
        "SELECT id, status FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND task = %s ORDER BY id LIMIT 1",
        (owner_id, run_id, task),
    ).fetchone()


def count_run_jobs(conn: Connection, run_id: int) -> int:
    return conn.execute("SELECT count(*) AS n FROM worker_jobs WHERE run_id = %s", (run_id,)).fetchone()["n"]


def cancel_unfinished(conn: Connection, owner_id: int, run_id: int, *, include_running: bool,
                      reason: str | None = None) -> None:
    """Cancel the run's queued jobs (and running ones, when their workers are known to be gone or
    will never be collected; a live worker records its own end: see :mod:`zerg.workers.cancellation`),
    recording ``reason`` as their error."""
    statuses = list(JOB_UNFINISHED) if include_running else ["queued"]
    conn.execute(
        """UPDATE worker_jobs SET status = 'cancelled', error = COALESCE(%s, error),
                  finished_at = COALESCE(finished_at, now())
           WHERE owner_id = %s AND run_id = %s AND status = ANY(%s)""",
        (reason, owner_id, run_id, statuses),
    )


def cancel_job(conn: Connection, job_id: int, reason: str) -> bool:
    """Cancel one unfinished job (the run's deadline stopped its worker); False if it had finished."""
    row = conn.execute(
        """UPDATE worker_jobs SET status = 'cancelled', error = %s, finished_at = COALESCE(finished_at, now())
           WHERE id = %s AND status = ANY(%s) RETURNING id""",
        (reason, job_id, list(JOB_UNFINISHED)),
    ).fetchone()
    return row is not None


def stale_running_jobs(conn: Connection, older_than_s: float) -> list[dict[str, Any]]:
    """Every owner's jobs still ``running`` although they started more than ``older_than_s`` ago
    (for the orphan reaper, never a user-facing read). A job whose worker waits for the owner's
    approval (issue 27) runs nowhere and is not stale: its wait ends by the run machine's timeout."""
    return conn.execute(
        """SELECT id, owner_id, run_id, worker_id, started_at FROM worker_jobs j
           WHERE status = 'running' AND started_at < now() - make_interval(secs => %s)
             AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.job_id = j.id AND a.status = 'pending')
           ORDER BY id""",
        (older_than_s,),
    ).fetchall()


def time_out_job(conn: Connection, job_id: int, error: str) -> bool:
    """A job whose worker outlived its timeout without a word: ``timeout``, once."""
    row = conn.execute(
        """UPDATE worker_jobs SET status = 'timeout', error = %s, finished_at = now(),
                  duration_ms = (extract(epoch FROM now() - started_at) * 1000)::bigint
           WHERE id = %s AND status = 'running' RETURNING id""",
        (error, job_id),
    ).fetchone()
    return row is not None


def run_usage(conn: Connection, run_id: int) -> dict[str, Any]:
    """Tokens and cost of a run's workers and summaries; ``unknown`` when a started job's price is."""
    return conn.execute(
        """SELECT COALESCE(SUM(tokens_in), 0) AS tokens_in, COALESCE(SUM(tokens_out), 0) AS tokens_out,
                  COALESCE(SUM(cost_usd), 0) AS cost_usd,
                  bool_or(cost_usd IS NULL AND status <> 'queued' AND tokens_in > 0) IS TRUE AS unknown
           FROM worker_jobs WHERE run_id = %s""",
        (run_id,),
    ).fetchone()


def _filters(owner_id: int, status: str | None, since: datetime | None, run_id: int | None,
             before_id: int | None) -> tuple[str, list[Any]]:
    clauses, params = ["owner_id = %s"], [owner_id]
    for clause, value in (("status = %s", status), ("created_at >= %s", since), ("run_id = %s", run_id),
                          ("id < %s", before_id)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    return " AND ".join(clauses), params


def list_jobs(
    conn: Connection, owner_id: int, *, limit: int, status: str | None = None, since: datetime | None = None,
    run_id: int | None = None, before_id: int | None = None, by_created: bool = False,
) -> list[dict[str, Any]]:
    """The owner's jobs, newest first (by id, or by creation time for the supervisor's listing).

    Rows carry ``job_id`` and a ``task`` cut to 300 characters, never result text."""
    where, params = _filters(owner_id, status, since, run_id, before_id)
    order = "created_at DESC, id DESC" if by_created else "id DESC"
    return conn.execute(
        f"""SELECT id AS job_id, run_id, worker_id, left(task, 300) AS task, model, status, summary,
                   created_at, started_at, finished_at, duration_ms, error
            FROM worker_jobs WHERE {where} ORDER BY {order} LIMIT %s""",
        [*params, limit],
    ).fetchall()


def count_jobs(conn: Connection, owner_id: int, *, status: str | None = None, since: datetime | None = None) -> int:
    where, params = _filters(owner_id, status, since, None, None)
    return conn.execute(f"SELECT count(*) AS n FROM worker_jobs WHERE {where}", params).fetchone()["n"]


def finished_workers(conn: Connection, owner_id: int, *, since: datetime, limit: int) -> list[dict[str, Any]]:
    """(id, worker_id) of the owner's finished workers created since ``since``, newest first."""
    return conn.execute(
        """SELECT id, worker_id FROM worker_jobs
           WHERE owner_id = %s AND worker_id IS NOT NULL AND status = ANY(%s) AND created_at >= %s
           ORDER BY created_at DESC, id DESC LIMIT %s""",
        (owner_id, list(JOB_FINISHED), since, limit),
    ).fetchall()


def mark_started(conn: Connection, job_id: int, worker_id: str, started_at: datetime) -> bool:
    """Claim a queued job for its worker. False (nothing changed) when it is no longer queued: it
    was cancelled meanwhile, so it must not start."""
    row = conn.execute(
        "UPDATE worker_jobs SET worker_id = %s, status = 'running', started_at = %s "
        "WHERE id = %s AND status = 'queued' RETURNING id",
        (worker_id, started_at, job_id),
    ).fetchone()
    return row is not None


def running_job_ids(conn: Connection, owner_id: int, run_id: int) -> list[int]:
    """Ids of the owner's jobs of ``run_id`` whose worker is still running."""
    rows = conn.execute(
        "SELECT id FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND status = 'running' ORDER BY id",
        (owner_id, run_id),
    ).fetchall()
    return [r["id"] for r in rows]


def mark_finished(conn: Connection, job_id: int, meta: dict[str, Any]) -> bool:
    """Copy a completed worker's metadata (status, timings, error, usage) onto its row; False when
    the row already holds exactly this outcome (a retried write whose commit had landed).

    A job the user cancelled stays ``cancelled`` (its artifacts still say what the worker did)."""
    finished_at = parse_iso(meta["finished_at"])
    return conn.execute(
        """UPDATE worker_jobs SET status = CASE WHEN status = 'cancelled' THEN status ELSE %s END,
                  error = %s, finished_at = %s, duration_ms = %s,
                  tokens_in = %s, tokens_out = %s, cost_usd = %s, tool_calls = %s
           WHERE id = %s AND finished_at IS DISTINCT FROM %s""",
        (
            meta["status"],
            meta.get("error"),
            finished_at,
            meta.get("duration_ms"),
            meta.get("tokens_in") or 0,
            meta.get("tokens_out") or 0,
            meta.get("cost_usd"),
            _tool_calls(meta),
            job_id,
            finished_at,
        ),
    ).rowcount == 1


def _tool_calls(meta: dict[str, Any]) -> Jsonb | None:
    calls = meta.get("tool_calls")
    return Jsonb(calls) if isinstance(calls, list) else None


def mark_failed_unstarted(conn: Connection, job_id: int, error: str) -> None:
    """A job whose worker never started (it crashed before creating artifacts) fails here."""
    conn.execute("UPDATE worker_jobs SET status = 'failed', error = %s, finished_at = now() WHERE id = %s", (error, job_id))


def set_summary(
    conn: Connection, job_id: int, summary: str, summary_meta: dict[str, Any], usage: Any = None
) -> None:
    """Store the derived summary; the summary model's tokens and cost count on the job."""
    tokens_in = getattr(usage, "tokens_in", 0)
    tokens_out = getattr(usage, "tokens_out", 0)
    cost = getattr(usage, "cost_usd", 0.0)
    conn.execute(
        """UPDATE worker_jobs SET summary = %s, summary_meta = %s,
                  tokens_in = tokens_in + %s, tokens_out = tokens_out + %s,
                  cost_usd = CASE WHEN %s::numeric IS NULL THEN NULL ELSE cost_usd + %s END
           WHERE id = %s""",
        (summary, Jsonb(summary_meta), tokens_in, tokens_out, cost, cost, job_id),
    )


def export_worker_jobs(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's worker index rows, in job order, streamed (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM worker_jobs WHERE owner_id = %s ORDER BY id", (owner_id,))


def owner_worker_ids(conn: Connection, owner_id: int) -> list[str]:
    """Worker ids the index gives to the owner (the ownership authority, see workers.ownership)."""
    rows = conn.execute(
        "SELECT worker_id FROM worker_jobs WHERE owner_id = %s AND worker_id IS NOT NULL ORDER BY id", (owner_id,)
    ).fetchall()
    return [r["worker_id"] for r in rows]


def worker_owners(conn: Connection, worker_ids: list[str]) -> dict[str, int]:
    """worker id -> owner id, for those of ``worker_ids`` the index knows."""
    rows = conn.execute(
        "SELECT worker_id, owner_id FROM worker_jobs WHERE worker_id = ANY(%s)", (worker_ids,)
    ).fetchall()
    return {r["worker_id"]: r["owner_id"] for r in rows}


def expired_jobs(
    conn: Connection, before: datetime, *, owner_id: int | None = None, after_id: int = 0, limit: int = 500,
) -> list[dict[str, Any]]:
    """Finished jobs created before ``before`` (every owner's, or one owner's), by id from
    ``after_id`` on: the candidates of the retention sweep (:mod:`zerg.workers.retention`)."""
    owner_clause = "" if owner_id is None else "AND owner_id = %(owner)s"
    return conn.execute(
        f"""SELECT id, owner_id, run_id, worker_id, status, created_at FROM worker_jobs
            WHERE status = ANY(%(finished)s) AND created_at < %(before)s AND id > %(after)s {owner_clause}
            ORDER BY id LIMIT %(limit)s""",
        {"finished": list(JOB_FINISHED), "before": before, "after": after_id, "owner": owner_id, "limit": limit},
    ).fetchall()


def delete_expired_job(conn: Connection, owner_id: int, job_id: int, before: datetime) -> bool:
    """Remove one job's index row, only if it is still finished and created before ``before``."""
    return conn.execute(
        "DELETE FROM worker_jobs WHERE owner_id = %s AND id = %s AND status = ANY(%s) AND created_at < %s RETURNING id",
        (owner_id, job_id, list(JOB_FINISHED), before),
    ).fetchone() is not None


def unfinished_jobs(conn: Connection, owner_id: int) -> list[int]:
    """Ids of the owner's jobs still queued or running (a failed run can leave a worker running)."""
    rows = conn.execute(
        "SELECT id FROM worker_jobs WHERE owner_id = %s AND status = ANY(%s) ORDER BY id",
        (owner_id, list(JOB_UNFINISHED)),
    ).fetchall()
    return [r["id"] for r in rows]


def unfinished_started_jobs(conn: Connection, *, run_id: int | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Queued or running jobs whose worker started (they have a worker id), of one run or of every
    owner, oldest first: the rows whose ``metadata.json`` may already say more (reconciliation)."""
    return conn.execute(
        """SELECT id, owner_id, run_id, worker_id, status FROM worker_jobs
           WHERE status = ANY(%s) AND worker_id IS NOT NULL AND (%s::bigint IS NULL OR run_id = %s)
           ORDER BY id LIMIT %s""",
        (list(JOB_UNFINISHED), run_id, run_id, limit),
    ).fetchall()


def cancel_owner_jobs(conn: Connection, owner_id: int) -> int:
    """Cancel every unfinished job of the owner (its workers stop at their next check)."""
    return conn.execute(
        """UPDATE worker_jobs SET status = 'cancelled', finished_at = COALESCE(finished_at, now())
           WHERE owner_id = %s AND status = ANY(%s)""",
        (owner_id, list(JOB_UNFINISHED)),
    ).rowcount


@dataclass
class ReindexReport:
    scanned: int = 0
    indexed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (worker_id, why)


_UPSERT_COLUMNS = (
    "owner_id, run_id, worker_id, task, model, status, summary, summary_meta, error, "
    "tokens_in, tokens_out, cost_usd, created_at, started_at, finished_at, duration_ms, tool_calls"
)
_UPDATE_SET = ", ".join(
    f"{c} = EXCLUDED.{c}" for c in (c.strip() for c in _UPSERT_COLUMNS.split(","))
)


def _row(meta: dict[str, Any]) -> tuple[Any, ...]:
    def ts(name: str) -> datetime | None:
        return parse_iso(meta[name]) if meta.get(name) else None

    status = meta.get("status")
    if status not in JOB_STATUSES or status == "queued":  # a worker with metadata has started
        raise ValueError(f"unknown status {status!r}")
    return (
        int(meta["owner_id"]),
        meta.get("supervisor_run_id"),
        meta["worker_id"],
        str(meta["task"]),
        meta.get("model"),
        status,
        meta.get("summary"),
        Jsonb(meta["summary_meta"]) if meta.get("summary_meta") is not None else None,
        meta.get("error"),
        meta.get("tokens_in") or 0,
        meta.get("tokens_out") or 0,
        meta.get("cost_usd"),
        ts("created_at") or ts("started_at"),
        ts("started_at"),
        ts("finished_at"),
        meta.get("duration_ms"),
        _tool_calls(meta),
    )


def reindex(conn: Connection, store: WorkerArtifactStore) -> ReindexReport:
    """Rebuild ``worker_jobs`` rows from every worker's ``metadata.json`` (upsert; ids kept)."""
    report = ReindexReport()
    placeholders = ", ".join(["%s"] * 17)
    for worker_id, meta in store.iter_metadata():
        report.scanned += 1
        if isinstance(meta, Exception):
            report.skipped.append((worker_id, str(meta)))
            continue
        try:
            values = _row(meta)
            job_id = meta.get("job_id")
            # An existing row is only refreshed when it is this worker's (same owner, same or no
            # worker id): after a restore that reused ids, another owner's row is never taken over.
            same = "worker_jobs.owner_id = EXCLUDED.owner_id"
            with conn.transaction():  # a savepoint: one bad row does not undo the others
                if job_id is None:
                    row = conn.execute(
                        f"INSERT INTO worker_jobs ({_UPSERT_COLUMNS}) VALUES ({placeholders}) "
                        f"ON CONFLICT (worker_id) DO UPDATE SET {_UPDATE_SET} WHERE {same} RETURNING id",
                        values,
                    ).fetchone()
                else:
                    row = conn.execute(
                        f"INSERT INTO worker_jobs (id, {_UPSERT_COLUMNS}) VALUES (%s, {placeholders}) "
                        f"ON CONFLICT (id) DO UPDATE SET {_UPDATE_SET} WHERE {same} AND "
                        "(worker_jobs.worker_id IS NULL OR worker_jobs.worker_id = EXCLUDED.worker_id) RETURNING id",
                        (int(job_id), *values),
                    ).fetchone()
            if row is None:
                report.skipped.append((worker_id, f"job {job_id} in the index belongs to another worker or owner"))
                continue
            report.indexed += 1
        except errors.ForeignKeyViolation:
            report.skipped.append((worker_id, f"owner {meta.get('owner_id')} does not exist"))
        except errors.UniqueViolation:
            report.skipped.append((worker_id, f"job {meta.get('job_id')} belongs to another worker"))
        except (KeyError, TypeError, ValueError) as exc:
            report.skipped.append((worker_id, f"metadata.json is incomplete: {exc!r}"))
    # Explicit ids were inserted: move the sequence past them so new jobs never collide.
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('worker_jobs', 'id'), GREATEST(m, 1), m > 0) "
        "FROM (SELECT COALESCE(MAX(id), 0) AS m FROM worker_jobs) AS top"
    )
    return report
