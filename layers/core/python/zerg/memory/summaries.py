"""Thread compaction summaries (``conversation_summaries``): a range of thread messages replaced in the prompt by one summary.

Invariants:
- Every read is scoped by owner.
- Summaries of a thread never overlap: :func:`add_summary` writes under a per-thread transaction
  lock and only a range that starts after every existing one (``UNIQUE (thread_id,
  first_message_id)`` settles the same range written twice). Concurrent compactions therefore
  write one row, never two that cover the same message.
- The summarised messages stay in ``thread_messages``: a summary replaces them in the prompt only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

_LOCK_SPACE = 0x5A43_4D50  # advisory-lock namespace for "compaction of thread N"


def add_summary(conn: Connection, owner_id: int, thread_id: int, first_message_id: int, last_message_id: int,
                message_count: int, summary: str, run_id: int | None = None) -> int | None:
    """Record that messages ``first_message_id..last_message_id`` are summarised; the new row's id,
    or None when another compaction already covered any of them (nothing is written)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, thread_id % 2**31))
    row = conn.execute(
        """INSERT INTO conversation_summaries
               (owner_id, thread_id, first_message_id, last_message_id, message_count, summary, run_id)
           SELECT %s, %s, %s, %s, %s, %s, %s
           WHERE NOT EXISTS (SELECT 1 FROM conversation_summaries
                             WHERE thread_id = %s AND last_message_id >= %s)
           ON CONFLICT (thread_id, first_message_id) DO NOTHING
           RETURNING id""",
        (owner_id, thread_id, first_message_id, last_message_id, message_count, summary, run_id,
         thread_id, first_message_id),
    ).fetchone()
    return row["id"] if row else None


def list_summaries(conn: Connection, owner_id: int, thread_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """The thread's newest ``limit`` summaries, oldest first."""
    rows = conn.execute(
        """SELECT id, first_message_id, last_message_id, message_count, summary, run_id, created_at
           FROM conversation_summaries WHERE owner_id = %s AND thread_id = %s
           ORDER BY last_message_id DESC LIMIT %s""",
        (owner_id, thread_id, limit),
    ).fetchall()
    return rows[::-1]


def last_summarised_id(conn: Connection, owner_id: int, thread_id: int) -> int:
    """The id of the thread's last summarised message (0 when nothing is summarised yet)."""
    row = conn.execute(
        """SELECT COALESCE(max(last_message_id), 0) AS last FROM conversation_summaries
           WHERE owner_id = %s AND thread_id = %s""",
        (owner_id, thread_id),
    ).fetchone()
    return row["last"]


def export_conversation_summaries(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``conversation_summaries``, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM conversation_summaries WHERE owner_id = %s ORDER BY id", (owner_id,))
