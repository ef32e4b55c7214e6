"""Runs: one supervisor request/response cycle, from start to a final status. Every SQL
statement on ``runs`` lives here.

Invariants:
- A run belongs to one owner and that owner's single thread; every read here is owner-scoped.
- The run's own messages (the supervisor's tool calls and their results) live on the run
  (``runs.working_messages``), never in ``thread_messages``; the prompt, the thread and the task are
  assembled afresh for every inference (:mod:`zerg.supervisor.context`), never stored here.
- The thread receives exactly two messages per successful run, the user's task and the final
  answer (with provenance: run id and job ids), written in one transaction at the end, adjacent
  even when runs of the owner overlap (:func:`zerg.runs.threads.append_messages` locks the thread
  first). So does a run that reached its deadline and answered with what existed (it ends
  ``timeout``). A failed, cancelled or interrupted run writes nothing to the thread, nor does a
  background run whose assessment is ``info`` (:mod:`zerg.alerts.background`).
- A run that does not succeed ends with one ``error`` event ``{run_id, status, message, partial:
  [{job_id, status, summary}]}``, written in the transaction that closes it (for a cancel: once its
  last running worker stopped, see below); its unfinished jobs are cancelled with the same reason.
- ``runs.tokens_*``/``cost_usd`` are the run's totals (supervisor + workers + summaries), set when
  the run ends; the ``supervisor_*`` columns accumulate while it runs.
- A cancelled run's terminal ``error`` event is written only once none of its jobs is running:
  the cancel closes the run and cancels its queued jobs; each running worker, told to stop, ends
  its commands, records its job and calls :func:`finish_cancel`; whoever sees no running job left
  writes the event, exactly once (under the run's event lock).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

from psycopg import Connection
from psycopg.types.json import Jsonb

from zerg import observability, text
from zerg.llm import Usage
from zerg.llm.ledger import usage_by_component, usage_by_job
from zerg.runs import events, jobs, threads
from zerg.statuses import RUN_FINAL, RUN_UNFINISHED

# What started a run (the CHECK on ``runs.trigger``; tests/test_runs_list.py holds the two in step).
RunTrigger = Literal["api", "cli", "schedule", "email", "sms"]
RUN_TRIGGERS: tuple[str, ...] = get_args(RunTrigger)


@dataclass(frozen=True)
class RunStart:
    run_id: int
    thread_id: int
    created: bool  # False: an Idempotency-Key replay returned the existing run


def start_run(
    conn: Connection, owner_id: int, task: str, *, trigger: str = "api", idempotency_key: str | None = None,
    context: dict[str, Any] | None = None, preferences: dict[str, Any] | None = None,
) -> RunStart:
    """Insert a running run on the owner's thread and emit ``supervisor_started``.

    ``context`` and ``preferences`` are what the request was sent with (the API validated them):
    kept on this run only, read by its supervisor (the ``[CLIENT CONTEXT]`` layer, the answer's
    verbosity) and by its close (``notify_on_complete``). A replay keeps the first request's. A
    worker's retry marks its run with ``context.retried_job`` (its task is no words of the owner:
    :mod:`zerg.runs.owner_words`)."""
    thread_id = threads.find_or_create_thread(conn, owner_id)
    row = conn.execute(
        """INSERT INTO runs (owner_id, thread_id, task, trigger, status, started_at, idempotency_key,
                             context, preferences)
           VALUES (%s, %s, %s, %s, 'running', now(), %s, %s, %s)
           ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING id""",
        (owner_id, thread_id, task, trigger, idempotency_key,
         Jsonb(context) if context else None, Jsonb(preferences) if preferences else None),
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


ESTIMATE_SAMPLE = 20  # the owner's latest comparable runs the estimate looks at


def estimated_duration_s(conn: Connection, owner_id: int, trigger: str, *, default_s: int, cap_s: float) -> int:
    """How long a new run of ``trigger`` will likely take, in whole seconds: the median duration of
    the owner's last :data:`ESTIMATE_SAMPLE` runs of that trigger that answered (``success`` or
    ``timeout``), rounded up, between 1 and ``cap_s`` (the run deadline); ``default_s`` (also
    capped) when there is none."""
    row = conn.execute(
        """SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS median_ms FROM (
               SELECT duration_ms FROM runs
               WHERE owner_id = %s AND trigger = %s AND status IN ('success', 'timeout') AND duration_ms IS NOT NULL
               ORDER BY id DESC LIMIT %s) recent""",
        (owner_id, trigger, ESTIMATE_SAMPLE),
    ).fetchone()
    median_ms = row["median_ms"] if row else None
    seconds = default_s if median_ms is None else math.ceil(median_ms / 1000)
    return int(max(1, min(seconds, cap_s)))


def get_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM runs WHERE owner_id = %s AND id = %s", (owner_id, run_id)).fetchone()


def budget_row(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """What a run's budget is decided from (checked before every model call: a narrow read, never
    the working messages): ``{id, owner_id, trigger, preferences}``."""
    return conn.execute("SELECT id, owner_id, trigger, preferences FROM runs WHERE owner_id = %s AND id = %s",
                        (owner_id, run_id)).fetchone()


def next_run_on_thread(conn: Connection, owner_id: int, run_id: int, *,
                       excluding: tuple[str, ...] = ()) -> int | None:
    """The id of the first run after ``run_id`` on the same thread of the owner, skipping runs whose
    trigger is one of ``excluding``; None when there is none (or ``run_id`` is not the owner's)."""
    row = conn.execute(
        """SELECT n.id FROM runs r
           JOIN runs n ON n.owner_id = r.owner_id AND n.thread_id = r.thread_id AND n.id > r.id
           WHERE r.owner_id = %s AND r.id = %s AND n.trigger <> ALL(%s)
           ORDER BY n.id LIMIT 1""",
        (owner_id, run_id, list(excluding)),
    ).fetchone()
    return None if row is None else row["id"]


def save_working(conn: Connection, run_id: int, messages: list[dict[str, Any]], usage: Usage,
                 *, rounds: int | None = None, answer: str | None = None, read_untrusted: bool = False) -> None:
    """The supervisor's turn: its working messages, its usage, and whether its model read
    untrusted text (once true, a run stays so)."""
    conn.execute(
        """UPDATE runs SET working_messages = %s, read_untrusted = read_untrusted OR %s,
                  supervisor_tokens_in = supervisor_tokens_in + %s,
                  supervisor_tokens_out = supervisor_tokens_out + %s,
                  supervisor_cost_usd = CASE WHEN %s::numeric IS NULL THEN NULL
                                             ELSE supervisor_cost_usd + %s END,
                  spawn_rounds = COALESCE(%s, spawn_rounds),
                  result = COALESCE(%s, result)
           WHERE id = %s""",
        (Jsonb(messages), read_untrusted, usage.tokens_in, usage.tokens_out, usage.cost_usd, usage.cost_usd, rounds,
         answer, run_id),
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


def complete_run(conn: Connection, run: dict[str, Any], answer: str, *, to_thread: bool = True,
                 thread_answer: str | None = None) -> bool:
    """Success: the thread gets the task and the answer, atomically; the run its totals.

    A background run's ``info`` result stays off the thread (``to_thread=False``); a warning
    shows its rendered assessment (``thread_answer``) while the run keeps the model's answer.
    False (and nothing written) when the run was already closed, e.g. cancelled meanwhile."""
    with conn.transaction():
        if not _close(conn, run["id"], "success", result=answer):
            return False
        job_ids = [r["id"] for r in jobs.run_jobs(conn, run["owner_id"], run["id"])]
        if to_thread:
            threads.append_messages(conn, run["owner_id"], run["thread_id"], run["id"], [
                ("user", run["task"], {"run_id": run["id"], "trigger": run["trigger"]}),
                ("assistant", thread_answer or answer, {"run_id": run["id"], "job_ids": job_ids, **_untrusted(run)}),
            ])
        _set_totals(conn, run["id"])
        events.emit(conn, run["id"], run["owner_id"], "supervisor_complete", {"run_id": run["id"], "result": answer})
    _finished("success")
    return True


def _untrusted(run: dict[str, Any]) -> dict[str, Any]:
    """The thread metadata of an answer whose run read untrusted text: later runs see it as data
    (:func:`zerg.supervisor.context.thread_view`)."""
    return {"read_untrusted": True} if run.get("read_untrusted") else {}


def error_payload(conn: Connection, run: dict[str, Any], status: str, message: str) -> dict[str, Any]:
    """The closing ``error`` event of a run that did not succeed: what became of each worker."""
    partial = [{"job_id": j["id"], "status": j["status"], "summary": j["summary"]}
               for j in jobs.run_jobs(conn, run["owner_id"], run["id"])]
    return {"run_id": run["id"], "status": status, "message": message, "partial": partial}


def fail_run(conn: Connection, run: dict[str, Any], status: str, message: str, *,
             cancel_running: bool | None = None) -> dict[str, Any] | None:
    """Close a run that will not answer (``failed``, ``timeout``, ``interrupted``): record why,
    cancel its unfinished jobs with that reason and emit ``error`` with the partial results.

    Running jobs are cancelled too unless the run merely ``failed`` (its state machine may still
    be collecting them); ``cancel_running`` overrides. Returns the event payload, or None when the
    run was already closed (nothing is written then)."""
    cancel_running = status != "failed" if cancel_running is None else cancel_running
    with conn.transaction():
        if not _close(conn, run["id"], status, error=message):
            return None
        jobs.cancel_unfinished(conn, run["owner_id"], run["id"], include_running=cancel_running, reason=message)
        payload = error_payload(conn, run, status, message)
        _set_totals(conn, run["id"])
        events.emit(conn, run["id"], run["owner_id"], "error", payload)
    _finished(status)
    return payload


def complete_at_deadline(conn: Connection, run: dict[str, Any], answer: str, message: str, *,
                         to_thread: bool = True, thread_answer: str | None = None) -> bool:
    """The run's deadline came and the supervisor answered with what existed: the thread gets the
    task and that answer (as :func:`complete_run` decides), the run ends ``timeout`` and its
    ``error`` event carries the answer too.

    False (and nothing written) when the run was already closed."""
    with conn.transaction():
        if not _close(conn, run["id"], "timeout", result=answer, error=message):
            return False
        jobs.cancel_unfinished(conn, run["owner_id"], run["id"], include_running=True, reason=message)
        payload = error_payload(conn, run, "timeout", message)
        if to_thread:
            threads.append_messages(conn, run["owner_id"], run["thread_id"], run["id"], [
                ("user", run["task"], {"run_id": run["id"], "trigger": run["trigger"]}),
                ("assistant", thread_answer or answer, {
                    "run_id": run["id"], "job_ids": [p["job_id"] for p in payload["partial"]], "status": "timeout",
                    **_untrusted(run)}),
            ])
        _set_totals(conn, run["id"])
        events.emit(conn, run["id"], run["owner_id"], "error", {**payload, "result": answer})
    _finished("timeout")
    return True


def stop_at_budget(conn: Connection, run: dict[str, Any], answer: str, message: str, *,
                   to_thread: bool = True) -> bool:
    """The run's budget is spent: it ends ``failed`` with ``message`` (why) and ``answer`` (the
    partial answer built from the workers that finished) as its result; the thread gets the task and
    that answer (unless ``to_thread`` is False: a background run); unfinished jobs are cancelled and
    the ``error`` event carries the answer too. False (nothing written) when the run was closed."""
    with conn.transaction():
        if not _close(conn, run["id"], "failed", result=answer, error=message):
            return False
        conn.execute("UPDATE runs SET budget_stopped_at = now() WHERE id = %s", (run["id"],))
        jobs.cancel_unfinished(conn, run["owner_id"], run["id"], include_running=True, reason=message)
        payload = error_payload(conn, run, "failed", message)
        if to_thread:
            threads.append_messages(conn, run["owner_id"], run["thread_id"], run["id"], [
                ("user", run["task"], {"run_id": run["id"], "trigger": run["trigger"]}),
                ("assistant", answer, {
                    "run_id": run["id"], "job_ids": [p["job_id"] for p in payload["partial"]], "status": "failed",
                    **_untrusted(run)}),
            ])
        _set_totals(conn, run["id"])
        events.emit(conn, run["id"], run["owner_id"], "error", {**payload, "result": answer, "budget": True})
    _finished("failed")
    return True


def mark_deadline_reached(conn: Connection, run_id: int) -> bool:
    """Record, once, that the run's deadline came near (its workers stop; the supervisor must answer)."""
    row = conn.execute(
        """UPDATE runs SET deadline_reached_at = now()
           WHERE id = %s AND deadline_reached_at IS NULL AND status <> ALL(%s) RETURNING id""",
        (run_id, list(RUN_FINAL)),
    ).fetchone()
    return row is not None


def run_document(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The run as the API shows it (seed 5.1): status, timings, result, workers, usage."""
    run = get_run(conn, owner_id, run_id)
    if run is None:
        return None
    spend = {u["job_id"]: u for u in usage_by_job(conn, owner_id, run_id)}
    workers = [{"job_id": j["id"], **{k: j[k] for k in ("worker_id", "task", "status", "duration_ms", "summary", "error",
                                                       "started_at", "finished_at")},
                # Its worker's and summary's model calls, from the ledger (issue 27: spend per worker).
                "usage": _job_usage(spend.get(j["id"])),
                **_evidence(j)}
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
        # A run that hit its deadline answered with what existed: that answer is its result too; so
        # is the partial answer of a run stopped at its budget (``budget_stopped``).
        "result": (run["result"] if run["status"] == "success" or run["deadline_reached_at"]
                   or run["budget_stopped_at"] else None),
        "budget_stopped": run["budget_stopped_at"] is not None,
        "error": run["error"],
        "workers": workers,
        "tokens_used": run["tokens_in"] + run["tokens_out"],
        "tokens_in": run["tokens_in"],
        "tokens_out": run["tokens_out"],
        "cost_usd": float(run["cost_usd"]) if run["cost_usd"] is not None else None,
        # From the ledger: every call of the run, its summaries', memory's and intent's too.
        "usage_by_component": usage_by_component(conn, owner_id, run_id),
    }


def _evidence(job: dict[str, Any]) -> dict[str, Any]:
    """What a worker shows as a source under the answer (issue 29): a title from its task, the
    first command it ran and its tool calls (from its index row; [] until it finished)."""
    calls = [c for c in job.get("tool_calls") or [] if isinstance(c, dict)]
    command = next((c["command"] for c in calls if c.get("command")), None)
    return {"title": text.title(job["task"]) or f"Worker {job['id']}", "command": command,
            "tool_calls": [{k: c.get(k) for k in _CALL_FIELDS} for c in calls]}


def worker_facts(job: dict[str, Any]) -> dict[str, Any]:
    """A worker's index row as its detail shows it: outcome, times, summary and its calls."""
    return {**{k: job.get(k) for k in ("summary", "error", "started_at", "finished_at", "duration_ms")},
            **_evidence(job)}


_CALL_FIELDS = ("path", "tool", "ok", "exit_code", "exit_signal", "command", "started_at", "duration_ms")


def _job_usage(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "cost_known": True}
    return {k: row[k] for k in ("calls", "tokens_in", "tokens_out", "cost_usd", "cost_known")}


def list_runs(conn: Connection, owner_id: int, *, status: str | None = None, trigger: str | None = None,
              limit: int = 20, before_id: int | None = None) -> list[dict[str, Any]]:
    """The owner's runs, newest first (``runs_owner_id``), optionally of one status and trigger,
    with ids below ``before_id`` (the next page)."""
    rows = conn.execute(
        """SELECT id, thread_id, task, trigger, status, created_at, started_at, finished_at, duration_ms,
                  tokens_in, tokens_out, cost_usd
           FROM runs
           WHERE owner_id = %s AND (%s::text IS NULL OR status = %s) AND (%s::text IS NULL OR trigger = %s)
             AND (%s::bigint IS NULL OR id < %s)
           ORDER BY id DESC LIMIT %s""",
        (owner_id, status, status, trigger, trigger, before_id, before_id, limit),
    ).fetchall()
    return [{**r, "cost_usd": float(r["cost_usd"]) if r["cost_usd"] is not None else None} for r in rows]


def cancel_run(conn: Connection, owner_id: int, run_id: int, *,
               reason: str = "cancelled by the user") -> dict[str, Any] | None:
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
        if _close(conn, run_id, "cancelled", error=reason):
            jobs.cancel_unfinished(conn, owner_id, run_id, include_running=False, reason=reason)
            _set_totals(conn, run_id)
            finish_cancel(conn, owner_id, run_id)
    return get_run(conn, owner_id, run_id)


def mark_awaiting_approval(conn: Connection, owner_id: int, run_id: int) -> bool:
    """A worker of the run waits for the owner's answer (issue 27): ``running`` -> ``awaiting_approval``."""
    return conn.execute(
        """UPDATE runs SET status = 'awaiting_approval', awaiting_since = now()
           WHERE id = %s AND owner_id = %s AND status = 'running' RETURNING id""",
        (run_id, owner_id),
    ).fetchone() is not None


def mark_resumed(conn: Connection, owner_id: int, run_id: int) -> bool:
    """No worker of the run waits any more: ``awaiting_approval`` -> ``running`` (a closed run stays closed);
    the time it waited is added to ``approval_wait_s``, so its deadline moves on by as much."""
    return conn.execute(
        """UPDATE runs SET status = 'running', awaiting_since = NULL,
                  approval_wait_s = approval_wait_s + GREATEST(0, extract(epoch FROM now() - awaiting_since))
           WHERE id = %s AND owner_id = %s AND status = 'awaiting_approval' RETURNING id""",
        (run_id, owner_id),
    ).fetchone() is not None


def finish_cancel(conn: Connection, owner_id: int, run_id: int) -> bool:
    """Write a cancelled run's terminal ``error`` event if none of its jobs is running and it has
    none yet; True if this call wrote it. Call it in the transaction that records a job's end."""
    events.lock_run(conn, run_id)  # serialises the closers: the last one sees every other's job ended
    if run_status(conn, owner_id, run_id) != "cancelled" or events.is_closed(conn, run_id):
        return False
    if jobs.running_job_ids(conn, owner_id, run_id):
        return False
    _set_totals(conn, run_id)  # now with the stopped workers' usage
    run = get_run(conn, owner_id, run_id)
    events.emit(conn, run_id, owner_id, "error", error_payload(conn, run, "cancelled", run["error"]))
    _finished("cancelled")
    return True


def finish_abandoned_cancel(conn: Connection, owner_id: int, run_id: int) -> bool:
    """A cancelled run whose running workers will never record their end (their process is gone or
    going): cancel their jobs here, with the run's reason, and write the terminal event."""
    with conn.transaction():
        run = get_run(conn, owner_id, run_id)
        if run is None or run["status"] != "cancelled":
            return False
        jobs.cancel_unfinished(conn, owner_id, run_id, include_running=True, reason=run["error"])
        return finish_cancel(conn, owner_id, run_id)


def cancelled_awaiting_workers(conn: Connection) -> list[dict[str, Any]]:
    """Every owner's cancelled runs that still have a running job (their terminal event waits for
    it), for the orphan sweep: who executes each, and the database's clock."""
    return conn.execute(
        """SELECT r.id, r.owner_id, r.executor, r.heartbeat_at, now() AS db_now FROM runs r
           WHERE r.status = 'cancelled'
             AND r.id IN (SELECT run_id FROM worker_jobs WHERE status = 'running') ORDER BY r.id"""
    ).fetchall()


def run_status(conn: Connection, owner_id: int, run_id: int) -> str | None:
    row = conn.execute("SELECT status FROM runs WHERE owner_id = %s AND id = %s", (owner_id, run_id)).fetchone()
    return None if row is None else row["status"]


def has_running_run(conn: Connection, owner_id: int) -> bool:
    """Whether the owner has a run in status ``running`` (intent routing: a follow-up stays with it)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE owner_id = %s AND status = 'running') AS running", (owner_id,)
    ).fetchone()["running"]


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


def claim(conn: Connection, run_id: int, executor: str) -> bool:
    """Record that ``executor`` (this process) executes the run, and its first heartbeat."""
    row = conn.execute(
        "UPDATE runs SET executor = %s, heartbeat_at = now() WHERE id = %s AND status <> ALL(%s) RETURNING id",
        (executor, run_id, list(RUN_FINAL)),
    ).fetchone()
    return row is not None


def heartbeat(conn: Connection, executor: str) -> int:
    """The executor is alive: stamp every unfinished run it executes; return how many."""
    return conn.execute(  # status = ANY(unfinished), not <> ALL(final): the partial index runs_unfinished
        "UPDATE runs SET heartbeat_at = now() WHERE executor = %s AND status = ANY(%s)",
        (executor, list(RUN_UNFINISHED)),
    ).rowcount


def unfinished_runs_of_every_owner(conn: Connection) -> list[dict[str, Any]]:
    """Every owner's unfinished runs, for the system's own sweeps (the orphan reaper), never a
    user-facing read: who executes each, its last heartbeat, and the database's clock."""
    return conn.execute(
        """SELECT id, owner_id, thread_id, task, trigger, status, result, executor, heartbeat_at,
                  execution_arn, started_at, created_at, deadline_reached_at, approval_wait_s, awaiting_since,
                  now() AS db_now
           FROM runs WHERE status = ANY(%s) ORDER BY id""",
        (list(RUN_UNFINISHED),),
    ).fetchall()


def never_started(conn: Connection, triggers: tuple[str, ...], limit: int = 100) -> list[int]:
    """Runs of ``triggers`` written ``running`` whose execution was never started (neither an
    executor nor an execution ARN), oldest first: what a crash between a run's row and its start
    left, for the system's own sweeps (not owner-scoped)."""
    return [r["id"] for r in conn.execute(
        """SELECT id FROM runs WHERE status = 'running' AND trigger = ANY(%s) AND execution_arn IS NULL
             AND executor IS NULL ORDER BY id LIMIT %s""", (list(triggers), limit)).fetchall()]


RECENTLY_CLOSED_BATCH = 200


def recently_closed(conn: Connection, triggers: tuple[str, ...], within_s: float, grace_s: float,
                    after_id: int = 0, limit: int = RECENTLY_CLOSED_BATCH) -> list[dict[str, Any]]:
    """Runs of ``triggers`` that closed (any final status but ``cancelled``: the owner stopped
    those) between ``within_s`` and ``grace_s`` seconds ago, ids above ``after_id``, by id: id and
    owner only. For the system's own sweeps (not owner-scoped)."""
    return conn.execute(
        """SELECT id, owner_id FROM runs
           WHERE trigger = ANY(%s) AND status = ANY(%s) AND id > %s
             AND finished_at >= now() - make_interval(secs => %s) AND finished_at < now() - make_interval(secs => %s)
           ORDER BY id LIMIT %s""",
        (list(triggers), [s for s in RUN_FINAL if s != "cancelled"], after_id, within_s, grace_s, limit)).fetchall()


def executed_by(conn: Connection, executor: str, run_ids: list[int]) -> list[dict[str, Any]]:
    """Those of ``run_ids`` that ``executor`` claimed and that have not ended (to close when that
    process stops)."""
    return conn.execute(
        "SELECT * FROM runs WHERE id = ANY(%s) AND executor = %s AND status <> ALL(%s) ORDER BY id",
        (run_ids, executor, list(RUN_FINAL)),
    ).fetchall()


def run_of_execution(conn: Connection, run_id: int, execution_arn: str, owner_id: int | None) -> dict[str, Any] | None:
    """The run a Step Functions execution executes: the run's recorded execution ARN must be this
    one; a run whose ARN was never recorded (its starter died right after starting it) matches
    only with the owner the execution's input names."""
    return conn.execute(
        """SELECT * FROM runs WHERE id = %s
             AND (execution_arn = %s OR (execution_arn IS NULL AND owner_id = %s))""",
        (run_id, execution_arn, owner_id),
    ).fetchone()


def export_runs(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """Every run of the owner with its working conversation, oldest first, streamed."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM runs WHERE owner_id = %s ORDER BY id", (owner_id,))
