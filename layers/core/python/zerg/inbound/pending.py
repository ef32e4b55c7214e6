"""The ``pending_directives`` table: a directive only the owner may decide, waiting for their "yes".

Invariants:
- The owner has at most one open question: the ``pending`` rows of one run (a run may ask for
  several changes at once; they are one question). Asking supersedes every pending row of the
  owner's other runs, and the same run's row for the same action and args (:func:`ask`), so a
  "yes" confirms the latest question only.
- ``shown_at`` is set when Zerg appended the question, word for word, to the asking run's answer
  (:func:`mark_shown`); a question never shown is never confirmed (:func:`open_question`).
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

ACTIONS = ("create_schedule", "delete_schedule", "set_preference", "update_schedule")
STATUSES = ("pending", "done", "expired", "superseded")
TTL = timedelta(hours=24)  # a question the owner did not answer within a day is no longer asked
QUESTION_START = "[Zerg] Waiting for your yes"  # how the question Zerg appends to an answer begins


def disarm(text: str) -> str:
    """A model's answer with any imitation of the question's opening quoted, so the only question
    in an answer that reads as Zerg's is the one Zerg appends after it."""
    return text.replace(QUESTION_START, "[quoted] Waiting for your yes")


def split_question(answer: str) -> tuple[str, str | None]:
    """(the answer's own text, the question Zerg appended to it or None): whoever shortens an
    answer (an SMS, a mail) shortens the first and keeps the question whole."""
    head, sep, question = answer.rpartition(f"\n\n{QUESTION_START}")
    return (head, f"{QUESTION_START}{question}") if sep else (answer, None)


def ask(conn: Connection, owner_id: int, run_id: int, action: str, args: dict[str, Any], summary: str,
        ttl: timedelta = TTL) -> dict[str, Any]:
    """Record the question (superseding the owner's pending rows of other runs, and this run's for
    the same action and args) and return the new row."""
    conn.execute(
        """UPDATE pending_directives SET status = 'superseded', decided_at = now()
           WHERE owner_id = %s AND status = 'pending'
             AND (run_id IS DISTINCT FROM %s OR (action = %s AND args = %s))""",
        (owner_id, run_id, action, Jsonb(args)))
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


def asked_by(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The pending rows the run ``run_id`` asked, oldest first: its question, not yet shown."""
    return conn.execute(
        """SELECT * FROM pending_directives WHERE owner_id = %s AND run_id = %s AND status = 'pending'
           ORDER BY id""", (owner_id, run_id)).fetchall()


def mark_shown(conn: Connection, owner_id: int, run_id: int) -> int:
    """The run's pending rows were shown to the owner (appended to its answer); how many."""
    return conn.execute(
        """UPDATE pending_directives SET shown_at = now()
           WHERE owner_id = %s AND run_id = %s AND status = 'pending' AND shown_at IS NULL""",
        (owner_id, run_id)).rowcount


def open_question(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's open question: the shown, pending rows of the newest asking run, oldest first,
    locked until the transaction ends; [] when there is none (or the newest was never shown)."""
    newest = conn.execute(
        """SELECT run_id FROM pending_directives WHERE owner_id = %s AND status = 'pending'
           ORDER BY id DESC LIMIT 1""", (owner_id,)).fetchone()
    if newest is None:
        return []
    return conn.execute(
        """SELECT * FROM pending_directives
           WHERE owner_id = %s AND run_id = %s AND status = 'pending' AND shown_at IS NOT NULL
           ORDER BY id FOR UPDATE""", (owner_id, newest["run_id"])).fetchall()


def has_open_question(conn: Connection, owner_id: int) -> bool:
    """Whether a shown, pending, unexpired question waits for the owner's yes (intent routing)."""
    return conn.execute(
        """SELECT EXISTS (SELECT 1 FROM pending_directives WHERE owner_id = %s AND status = 'pending'
                          AND shown_at IS NOT NULL AND expires_at > now()) AS open""", (owner_id,)).fetchone()["open"]


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
