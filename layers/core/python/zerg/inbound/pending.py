"""The ``pending_directives`` table: a destructive directive waiting for the owner's "yes".

Invariants:
- At most one ``pending`` row per owner, action and args counts: asking again supersedes the older
  ones (:func:`ask`), so a "yes" confirms the latest question only.
- A row is decided once: ``pending`` becomes ``done``, ``expired`` or ``superseded`` by a
  conditional UPDATE (``WHERE status = 'pending'``), never back.
- Every statement is scoped by owner; what may confirm a row (the user's yes as their next request
  after the asking run, not expired) is decided by :mod:`zerg.inbound.directives`, which reads the
  rows here.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

ACTIONS = ("delete_schedule", "set_preference", "update_schedule")
STATUSES = ("pending", "done", "expired", "superseded")
TTL = timedelta(hours=24)  # a question the owner did not answer within a day is no longer asked


def ask(conn: Connection, owner_id: int, run_id: int, action: str, args: dict[str, Any], summary: str,
        ttl: timedelta = TTL) -> dict[str, Any]:
    """Record the question (superseding the owner's older pending ones for the same action and
    args) and return the new row."""
    conn.execute(
        """UPDATE pending_directives SET status = 'superseded', decided_at = now()
           WHERE owner_id = %s AND action = %s AND args = %s AND status = 'pending'""",
        (owner_id, action, Jsonb(args)))
    return conn.execute(
        """INSERT INTO pending_directives (owner_id, run_id, action, args, summary, expires_at)
           VALUES (%s, %s, %s, %s, %s, now() + %s) RETURNING *""",
        (owner_id, run_id, action, Jsonb(args), summary, ttl)).fetchone()


def expire_overdue(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """Mark the owner's pending rows past their time ``expired``; returns them."""
    return conn.execute(
        """UPDATE pending_directives SET status = 'expired', decided_at = now()
           WHERE owner_id = %s AND status = 'pending' AND expires_at <= now()
           RETURNING id, action, args, summary""", (owner_id,)).fetchall()


def latest_pending(conn: Connection, owner_id: int, action: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The owner's newest pending row for ``action`` and ``args``, locked until the transaction ends."""
    return conn.execute(
        """SELECT * FROM pending_directives WHERE owner_id = %s AND action = %s AND args = %s AND status = 'pending'
           ORDER BY id DESC LIMIT 1 FOR UPDATE""", (owner_id, action, Jsonb(args))).fetchone()


def mark_done(conn: Connection, owner_id: int, pending_id: int) -> bool:
    """``pending`` → ``done``; False when it was decided meanwhile."""
    row = conn.execute(
        """UPDATE pending_directives SET status = 'done', decided_at = now()
           WHERE id = %s AND owner_id = %s AND status = 'pending' RETURNING id""", (pending_id, owner_id)).fetchone()
    return row is not None


def list_for_owner(conn: Connection, owner_id: int, limit: int = 50) -> list[dict[str, Any]]:
    """The owner's directives, newest first."""
    return conn.execute("SELECT * FROM pending_directives WHERE owner_id = %s ORDER BY id DESC LIMIT %s",
                        (owner_id, limit)).fetchall()


def export_pending_directives(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    yield from conn.execute("SELECT * FROM pending_directives WHERE owner_id = %s ORDER BY id", (owner_id,))
