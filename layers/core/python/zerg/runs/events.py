"""The run event log (``run_events``): the SSE contract, one row per event.

Invariants:
- Every event is a row first; its id is the SSE event id, so a client reconnecting with
  ``Last-Event-ID`` misses nothing and sees nothing twice.
- A run's events become visible in id order: ids come from a sequence, so two concurrent
  transactions could otherwise commit ids 11 before 10, and a reader that saw 11 would never ask
  for 10. :func:`emit` takes a per-run transaction lock first, so a later id of the same run can
  only be allocated after the earlier one's transaction has ended. A run's start and end
  and its approvals (``FEED_EVENTS``) also take a per-owner lock, so those become visible in id order across the
  owner's runs too (the owner-wide feed, :func:`owner_feed`, reads them by id); other events never
  wait for another run. (A transaction emitting for two runs must not emit a feed event first.)
- There is one way to emit an event (:func:`emit`) and one list of event types (the seed's
  contract); an unknown type is a programming error, refused.
- Nothing follows a run's terminal event (``supervisor_complete`` or ``error``): under the same
  per-run lock, :func:`emit` drops an event for a run whose last event is terminal (a worker of a
  cancelled or failed run that finished late) and returns None.
- Reads are scoped by owner.
- The owner-wide feed announces runs: ``run_started`` (from ``supervisor_started``, with the
  run's trigger) and ``run_finished`` (from the terminal event, with the run's final status);
  and a run's call waiting for the owner: ``approval_requested`` (the approval's id and the exact
  call, never the model's reason) and ``approval_answered`` (its status). Its ids are the
  ``run_events`` ids, so it resumes like a run's stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from zerg import observability

EVENT_TYPES = frozenset(
    {
        "supervisor_started",  # {run_id, thread_id, task}
        "supervisor_thinking",  # {message}
        "worker_spawned",  # {job_id, task, model}
        "worker_started",  # {job_id, worker_id}
        "worker_complete",  # {job_id, worker_id, status, duration_ms}
        "worker_summary_ready",  # {job_id, worker_id, summary}
        "approval_requested",  # {job_id, approval_id, tool, arguments, reason, expires_at}: the run waits (issue 27)
        "approval_answered",  # {job_id, approval_id, status}: the worker goes on (approved, denied, expired, cancelled)
        "memory_changed",  # {memory: file|fact, path | fact_id, action, writer}: a model changed the owner's memory
        "answer_delta",  # {offset, text, reset?}: the supervisor's answer as it is written (zerg.supervisor.answer_stream)
        "supervisor_complete",  # {run_id, result}
        "error",  # {run_id, message, details?}
    }
)
TERMINAL_EVENTS = frozenset({"supervisor_complete", "error"})
NOTIFY_CHANNEL = "zerg_run_events"
_LOCK_SPACE = 0x5A455645  # advisory-lock namespace for "events of run N"
_OWNER_LOCK_SPACE = 0x5A45564F  # advisory-lock namespace for "events of owner N"
# What the owner-wide feed announces: runs starting and ending, and a run's calls waiting for the owner.
FEED_EVENTS = frozenset({"supervisor_started", "approval_requested", "approval_answered", *TERMINAL_EVENTS})
TIMELINE_MAX = 2000  # a run's timeline (GET /api/jarvis/runs/{id}/events) shows at most this many events


def lock_run(conn: Connection, run_id: int) -> None:
    """Take the run's event lock until the transaction ends (what :func:`emit` does first)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, run_id % 2**31))


def is_closed(conn: Connection, run_id: int) -> bool:
    """Whether the run's last event is terminal (hold :func:`lock_run` for an answer that lasts)."""
    row = conn.execute(
        "SELECT event_type FROM run_events WHERE run_id = %s ORDER BY id DESC LIMIT 1", (run_id,)
    ).fetchone()
    return row is not None and row["event_type"] in TERMINAL_EVENTS


def emit(conn: Connection, run_id: int, owner_id: int, event_type: str, payload: dict[str, Any]) -> int | None:
    """Append one event; return its id, or None when the run's terminal event was already written
    (the event is dropped). Listeners on ``zerg_run_events`` are woken on commit."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    lock_run(conn, run_id)
    if event_type in FEED_EVENTS:  # then the owner's (always in this order): the feed's ids appear in order
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_OWNER_LOCK_SPACE, owner_id % 2**31))
    row = conn.execute(  # inserted only while the run's last event is not terminal (one round trip)
        """INSERT INTO run_events (run_id, owner_id, event_type, payload)
           SELECT %s, %s, %s, %s
            WHERE COALESCE((SELECT event_type FROM run_events WHERE run_id = %s ORDER BY id DESC LIMIT 1), '')
                  <> ALL(%s)
           RETURNING id""",
        (run_id, owner_id, event_type, Jsonb(payload), run_id, list(TERMINAL_EVENTS)),
    ).fetchone()
    if row is None:
        observability.logger().info("event after the run's terminal event dropped",
                                    extra={"run_id": run_id, "event_type": event_type})
        return None
    conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(run_id)))
    return row["id"]


def terminal_event_id(conn: Connection, owner_id: int, run_id: int) -> int | None:
    """The id of the owner's run's final event (``supervisor_complete`` or ``error``), if any."""
    row = conn.execute(
        "SELECT max(id) AS id FROM run_events WHERE owner_id = %s AND run_id = %s AND event_type = ANY(%s)",
        (owner_id, run_id, list(TERMINAL_EVENTS)),
    ).fetchone()
    return row["id"]


def list_events(
    conn: Connection, owner_id: int, run_id: int, *, after_id: int = 0, limit: int = 1000
) -> list[dict[str, Any]]:
    """The owner's events of ``run_id`` with id > ``after_id``, oldest first."""
    return conn.execute(
        """SELECT id, event_type, payload, created_at FROM run_events
           WHERE owner_id = %s AND run_id = %s AND id > %s ORDER BY id LIMIT %s""",
        (owner_id, run_id, after_id, limit),
    ).fetchall()


def timeline(conn: Connection, owner_id: int, run_id: int) -> tuple[list[dict[str, Any]], bool]:
    """The owner's run's events, oldest first, at most :data:`TIMELINE_MAX`, and whether more exist."""
    rows = list_events(conn, owner_id, run_id, limit=TIMELINE_MAX + 1)
    return rows[:TIMELINE_MAX], len(rows) > TIMELINE_MAX


def latest_event_id(conn: Connection, owner_id: int) -> int:
    """The id of the owner's newest feed event (0 when none): where a new feed client starts.

    Only feed events count: they commit in id order (each holds the owner's lock until its
    transaction ends), while a worker event of another run may commit with a higher id before a
    run start with a lower one does; starting past that start would lose it for good."""
    row = conn.execute("SELECT max(id) AS id FROM run_events WHERE owner_id = %s AND event_type = ANY(%s)",
                       (owner_id, sorted(FEED_EVENTS))).fetchone()
    return row["id"] or 0


def owner_feed(conn: Connection, owner_id: int, *, after_id: int, limit: int = 500) -> list[dict[str, Any]]:
    """The owner's run starts and ends after ``after_id``, oldest first: ``{id, kind, payload}``
    with ``kind`` ``run_started`` (``{run_id, thread_id, task, trigger}``) or ``run_finished``
    (``{run_id, status}``: the run's status for ``supervisor_complete``, the event's for ``error``),
    ``approval_requested`` (``{run_id, thread_id, approval_id, tool, arguments, expires_at}``) or
    ``approval_answered`` (``{run_id, thread_id, approval_id, status}``)."""
    rows = conn.execute(
        """SELECT e.id, e.run_id, e.event_type, e.payload, r.thread_id, r.task, r.trigger, r.status
           FROM run_events e JOIN runs r ON r.id = e.run_id AND r.owner_id = e.owner_id
           WHERE e.owner_id = %s AND e.id > %s AND e.event_type = ANY(%s)
           ORDER BY e.id LIMIT %s""",
        (owner_id, after_id, list(FEED_EVENTS), limit),
    ).fetchall()
    return [_announcement(r) for r in rows]


def _announcement(row: dict[str, Any]) -> dict[str, Any]:
    if row["event_type"] in ("approval_requested", "approval_answered"):  # never the model's reason: ids and the call
        keys = ("approval_id", "tool", "arguments", "expires_at") if row["event_type"] == "approval_requested" \
            else ("approval_id", "status")
        return {"id": row["id"], "kind": row["event_type"], "payload": {
            "run_id": row["run_id"], "thread_id": row["thread_id"], **{k: row["payload"].get(k) for k in keys}}}
    if row["event_type"] == "supervisor_started":
        return {"id": row["id"], "kind": "run_started", "payload": {
            "run_id": row["run_id"], "thread_id": row["thread_id"], "task": row["task"], "trigger": row["trigger"]}}
    status = row["status"] if row["event_type"] == "supervisor_complete" else row["payload"].get("status", row["status"])
    return {"id": row["id"], "kind": "run_finished", "payload": {"run_id": row["run_id"], "status": status}}


def export_run_events(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """Every event of the owner's runs, in id order, streamed (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM run_events WHERE owner_id = %s ORDER BY id", (owner_id,))
