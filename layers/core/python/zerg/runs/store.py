"""Runs: one supervisor request/response cycle, from start to a final status. Every SQL
statement on ``runs`` lives here.

Invariants:
- A run belongs to one owner and that owner's single thread; every read here is owner-scoped.
- The run's working conversation (prompt, tool calls, tool results) lives on the run
  (``runs.working_messages``), never in ``thread_messages``.
- The thread receives exactly two messages per successful run, the user's task and the final
  answer (with provenance: run id and job ids), written in one transaction at the end. A failed
  run writes nothing to the thread.
- ``runs.tokens_*``/``cost_usd`` are the run's totals (supervisor + workers + summaries), set when
  the run ends; the ``supervisor_*`` columns accumulate while it runs.
- A cancelled run's terminal ``error`` event is written only once none of its jobs is running:
  the cancel closes the run and cancels its queued jobs; each running worker, told to stop, ends
  its commands, records its job and calls :func:`finish_cancel`; whoever sees no running job left
  writes the event, exactly once (under the run's event lock).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from zerg import observability
from zerg.llm import Usage
from zerg.runs import events, threads
from zerg.statuses import RUN_FINAL
from zerg.workers import jobs


@dataclass(frozen=True)
class RunStart:
    run_id: int
    thread_id: int
    created: bool  # False: an Idempotency-Key replay returned the existing run


def start_run(
    conn: Connection, owner_id: int, task: str, *, trigger: str = "api", idempotency_key: str | None = None
) -> RunStart:
    """Insert a running run on the owner's thread and emit ``supervisor_started``."""
    thread_id = threads.find_or_create_thread(conn, owner_id)
    row = conn.execute(
        """INSERT INTO runs (owner_id, thread_id, task, trigger, status, started_at, idempotency_key)
           VALUES (%s, %s, %s, %s, 'running', now(), %s)
           ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING id""",
        (owner_id, thread_id, task, trigger, idempotency_key),
    ).fetchone()
    if row is None:  # only reachable with an idempotency key that was used before
        existing = conn.execute(
            "SELECT id, thread_id FROM runs WHERE owner_id = %s AND idempotency_key = %s",
            (owner_id, idempotency_key),
        ).fetchone()
        return RunStart(existing["id"], existing["thread_id"], created=False)
    events.emit(conn, row["id"], owner_id, "supervisor_started",
                {"run_id": row["id"], "thread_id": thread_id, "task": task})
    observability.metric("RunsStarted", 1, "Count", trigger=trigger)
    return RunStart(row["id"], thread_id, created=True)


def get_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM runs WHERE owner_id = %s AND id = %s", (owner_id, run_id)).fetchone()


def save_working(conn: Connection, run_id: int, messages: list[dict[str, Any]], usage: Usage,
                 *, rounds: int | None = None, answer: str | None = None) -> None:
    conn.execute(
        """UPDATE runs SET working_messages = %s,
                  supervisor_tokens_in = supervisor_tokens_in + %s,
                  supervisor_tokens_out = supervisor_tokens_out + %s,
                  supervisor_cost_usd = CASE WHEN %s::numeric IS NULL THEN NULL
                                             ELSE supervisor_cost_usd + %s END,
                  spawn_rounds = COALESCE(%s, spawn_rounds),
                  result = COALESCE(%s, result)
           WHERE id = %s""",
        (Jsonb(messages), usage.tokens_in, usage.tokens_out, usage.cost_usd, usage.cost_usd, rounds, answer, run_id),
    )


def _set_totals(conn: Connection, run_id: int) -> None:
    """The run's totals: its supervisor's usage plus its workers' and summaries'."""
    j = jobs.run_usage(conn, run_id)
    conn.execute(
        """UPDATE runs SET
               tokens_in = supervisor_tokens_in + %s,
               tokens_out = supervisor_tokens_out + %s,
               cost_usd = CASE WHEN %s THEN NULL ELSE supervisor_cost_usd + %s END
           WHERE id = %s""",
        (j["tokens_in"], j["tokens_out"], j["unknown"], j["cost_usd"], run_id),
    )


def _close(conn: Connection, run_id: int, status: str, *, result: str | None = None, error: str | None = None) -> bool:
    """Move a run to a final status, once: the conditional UPDATE locks the row, so of two
    racing closers (finalize vs cancel) exactly one wins and the other sees a final run."""
    row = conn.execute(
        """UPDATE runs SET status = %s, result = COALESCE(%s, result), error = %s, finished_at = now(),
                   duration_ms = (extract(epoch FROM now() - started_at) * 1000)::bigint
            WHERE id = %s AND status <> ALL(%s) RETURNING id""",
        (status, result, error, run_id, list(RUN_FINAL)),
    ).fetchone()
    return row is not None


def _finished(status: str) -> None:
    observability.metric("RunsFinished", 1, "Count", status=status)


def complete_run(conn: Connection, run: dict[str, Any], answer: str) -> bool:
    """Success: the thread gets the task and the answer, atomically; the run its totals.

    False (and nothing written) when the run was already closed, e.g. cancelled meanwhile."""
    with conn.transaction():
        if not _close(conn, run["id"], "success", result=answer):
            return False
        job_ids = [r["id"] for r in jobs.run_jobs(conn, run["owner_id"], run["id"])]
        threads.append_messages(conn, run["owner_id"], run["thread_id"], run["id"], [
            ("user", run["task"], {"run_id": run["id"], "trigger": run["trigger"]}),
            ("assistant", answer, {"run_id": run["id"], "job_ids": job_ids}),
        ])
        _set_totals(conn, run["id"])
        events.emit(conn, run["id"], run["owner_id"], "supervisor_complete", {"run_id": run["id"], "result": answer})
    _finished("success")
    return True


def fail_run(conn: Connection, run: dict[str, Any], status: str, message: str) -> dict[str, Any] | None:
    """Failure/timeout: record it, cancel jobs that never started, emit ``error`` with partial
    results. None when the run was already closed."""
    with conn.transaction():
        if not _close(conn, run["id"], status, error=message):
            return None
        jobs.cancel_unfinished(conn, run["owner_id"], run["id"], include_running=False)
        workers = [{"job_id": j["id"], "status": j["status"], "summary": j["summary"]}
                   for j in jobs.run_jobs(conn, run["owner_id"], run["id"])]
        _set_totals(conn, run["id"])
        details = {"status": status, "workers": workers, "partial_result": run.get("result")}
        events.emit(conn, run["id"], run["owner_id"], "error", {"run_id": run["id"], "message": message, "details": details})
    _finished(status)
    return details


def run_document(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The run as the API shows it (seed 5.1): status, timings, result, workers, usage."""
    run = get_run(conn, owner_id, run_id)
    if run is None:
        return None
    workers = [{"job_id": j["id"], **{k: j[k] for k in ("worker_id", "task", "status", "duration_ms", "summary", "error")}}
               for j in jobs.run_jobs(conn, owner_id, run_id)]
    return {
        "run_id": run["id"],
        "thread_id": run["thread_id"],
        "status": run["status"],
        "trigger": run["trigger"],
        "task": run["task"],
        "started_at": run["started_at"],
        "completed_at": run["finished_at"],
        "duration_ms": run["duration_ms"],
        "result": run["result"] if run["status"] == "success" else None,
        "error": run["error"],
        "workers": workers,
        "tokens_used": run["tokens_in"] + run["tokens_out"],
        "tokens_in": run["tokens_in"],
        "tokens_out": run["tokens_out"],
        "cost_usd": float(run["cost_usd"]) if run["cost_usd"] is not None else None,
    }


def cancel_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """Mark a running run cancelled and its queued jobs with it (they never start); write the closing
    ``error`` event now if no job is running, else leave it to the last worker to stop
    (:func:`finish_cancel`). Stopping those workers is
    :func:`zerg.workers.cancellation.stop_run_workers`, after this transaction commits.

    Returns the run (None if not the owner's). A finished run is returned unchanged.
    """
    run = get_run(conn, owner_id, run_id)
    if run is None:
        return None
    with conn.transaction():
        if _close(conn, run_id, "cancelled", error="cancelled by the user"):
            jobs.cancel_unfinished(conn, owner_id, run_id, include_running=False)
            _set_totals(conn, run_id)
            finish_cancel(conn, owner_id, run_id)
    return get_run(conn, owner_id, run_id)


def finish_cancel(conn: Connection, owner_id: int, run_id: int) -> bool:
    """Write a cancelled run's terminal ``error`` event if none of its jobs is running and it has
    none yet; True if this call wrote it. Call it in the transaction that records a job's end."""
    events.lock_run(conn, run_id)  # serialises the closers: the last one sees every other's job ended
    if run_status(conn, owner_id, run_id) != "cancelled" or events.is_closed(conn, run_id):
        return False
    if jobs.running_job_ids(conn, owner_id, run_id):
        return False
    _set_totals(conn, run_id)  # now with the stopped workers' usage
    events.emit(conn, run_id, owner_id, "error", {"run_id": run_id, "message": "cancelled by the user"})
    _finished("cancelled")
    return True


def run_status(conn: Connection, owner_id: int, run_id: int) -> str | None:
    row = conn.execute("SELECT status FROM runs WHERE owner_id = %s AND id = %s", (owner_id, run_id)).fetchone()
    return None if row is None else row["status"]


def set_execution_arn(conn: Connection, run_id: int, arn: str) -> None:
    conn.execute("UPDATE runs SET execution_arn = %s WHERE id = %s", (arn, run_id))


def release_idempotency_key(conn: Connection, run_id: int) -> None:
    """Free a failed start's key: the client was told to retry, and a retry must start a new run."""
    conn.execute("UPDATE runs SET idempotency_key = NULL WHERE id = %s", (run_id,))


def run_totals(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT duration_ms, tokens_in, tokens_out, cost_usd FROM runs WHERE owner_id = %s AND id = %s",
        (owner_id, run_id),
    ).fetchone()


def unfinished_runs(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's runs that have not reached a final status (id, status, execution_arn)."""
    return conn.execute(
        "SELECT id, status, execution_arn FROM runs WHERE owner_id = %s AND status <> ALL(%s) ORDER BY id",
        (owner_id, list(RUN_FINAL)),
    ).fetchall()


def export_runs(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """Every run of the owner with its working conversation, oldest first, streamed."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM runs WHERE owner_id = %s ORDER BY id", (owner_id,))
