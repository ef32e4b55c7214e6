"""Escalations (``escalations``): the repeats of a critical alert, one escalation state machine
execution each, until acknowledged. Every SQL statement on the table lives here.

Invariants:
- One escalation per run (``UNIQUE (run_id)``): :func:`create` of a second one writes nothing.
- Every read and write that a request can reach is scoped by owner; :func:`orphaned` (the local
  sweep) is the one system read, and it returns ids, not content.
- ``running`` is the only status that changes; a final status (acknowledged, exhausted, failed)
  and its ``ended_at`` never change again (every UPDATE is conditional on ``status = 'running'``).
- ``repeats_sent`` never exceeds ``max_repeats``, and repeat *n* is claimed (:func:`claim_repeat`)
  by exactly one caller, no earlier than its due time (``started_at + n x interval_s``, less 10 %
  for clock skew): a retried or duplicate Repeat step finds it claimed or not yet due and sends nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, get_args

from psycopg import Connection

EscalationStatus = Literal["running", "acknowledged", "exhausted", "failed"]
ESCALATION_STATUSES: tuple[str, ...] = get_args(EscalationStatus)

# Repeat n (= repeats_sent + 1) is due n intervals after the start; it may be sent from a tenth of
# an interval (at most 30 s) earlier, so that a Wait ending a little early by the database's clock counts.
_DUE = "started_at + make_interval(secs => interval_s * (repeats_sent + 1))"
_SENDABLE = f"{_DUE} - make_interval(secs => LEAST(interval_s * 0.1, 30))"


def create(conn: Connection, owner_id: int, run_id: int, *, max_repeats: int, interval_s: int) -> dict[str, Any] | None:
    """A new running escalation of the owner's run; None when the run has one already or is not the owner's."""
    return conn.execute(
        """INSERT INTO escalations (owner_id, run_id, max_repeats, interval_s)
           SELECT owner_id, id, %s, %s FROM runs WHERE id = %s AND owner_id = %s
           ON CONFLICT (run_id) DO NOTHING RETURNING *""",
        (max_repeats, interval_s, run_id, owner_id),
    ).fetchone()


def set_execution(conn: Connection, owner_id: int, escalation_id: int, execution_arn: str) -> None:
    conn.execute("UPDATE escalations SET execution_arn = %s WHERE id = %s AND owner_id = %s",
                 (execution_arn, escalation_id, owner_id))


def get(conn: Connection, owner_id: int, escalation_id: int) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM escalations WHERE id = %s AND owner_id = %s", (escalation_id, owner_id)).fetchone()


def get_for_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM escalations WHERE run_id = %s AND owner_id = %s", (run_id, owner_id)).fetchone()


def claim_repeat(conn: Connection, owner_id: int, escalation_id: int) -> dict[str, Any] | None:
    """Claim the next repeat: the row with ``repeats_sent`` raised by one, or None when the escalation
    is not running, has sent all its repeats or its next repeat is not due yet."""
    return conn.execute(
        f"""UPDATE escalations SET repeats_sent = repeats_sent + 1
            WHERE id = %s AND owner_id = %s AND status = 'running' AND repeats_sent < max_repeats
              AND now() >= {_SENDABLE}
            RETURNING *""",
        (escalation_id, owner_id),
    ).fetchone()


def finish(conn: Connection, owner_id: int, escalation_id: int, status: EscalationStatus) -> dict[str, Any] | None:
    """End a running escalation with ``status``; the row, or None when it was not running."""
    if status == "running":
        raise ValueError("finish needs a final status")
    return conn.execute(
        """UPDATE escalations SET status = %s, ended_at = now()
           WHERE id = %s AND owner_id = %s AND status = 'running' RETURNING *""",
        (status, escalation_id, owner_id),
    ).fetchone()


def acknowledge_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """End the owner's running escalation of ``run_id`` as acknowledged; the row, or None."""
    return conn.execute(
        """UPDATE escalations SET status = 'acknowledged', ended_at = now()
           WHERE run_id = %s AND owner_id = %s AND status = 'running' RETURNING *""",
        (run_id, owner_id),
    ).fetchone()


def orphaned(conn: Connection, grace_s: float, limit: int = 100) -> list[dict[str, Any]]:
    """Running escalations of every owner whose next repeat is more than ``grace_s`` (at most one
    interval) overdue: no execution is repeating them (the local process that ran it stopped)."""
    return conn.execute(
        f"""SELECT id, owner_id, run_id, interval_s FROM escalations
            WHERE status = 'running' AND now() > {_DUE} + make_interval(secs => LEAST(interval_s, %s))
            ORDER BY id LIMIT %s""",
        (grace_s, limit),
    ).fetchall()


def export_escalations(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's escalations, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM escalations WHERE owner_id = %s ORDER BY id", (owner_id,))
