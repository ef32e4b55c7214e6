"""The owner's single, long-lived supervisor thread ("one brain"): ``threads`` and
``thread_messages``.

Invariants:
- Exactly one supervisor thread per owner, enforced by ``UNIQUE (owner_id, kind)``;
  find-or-create is idempotent and safe under concurrent callers.
- The thread holds the user's messages and Zerg's answers only (a run's working conversation
  lives on the run); messages are appended, never edited.
- Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb


def find_or_create_thread(conn: Connection, owner_id: int) -> int:
    """Return the owner's supervisor thread id, creating it if missing."""
    row = conn.execute(
        """INSERT INTO threads (owner_id, kind) VALUES (%s, 'supervisor')
           ON CONFLICT (owner_id, kind) DO NOTHING RETURNING id""",
        (owner_id,),
    ).fetchone()
    if row:
        return row["id"]
    row = conn.execute(
        "SELECT id FROM threads WHERE owner_id = %s AND kind = 'supervisor'", (owner_id,)
    ).fetchone()
    return row["id"]


def get_thread(conn: Connection, owner_id: int) -> dict[str, Any] | None:
    """The owner's supervisor thread (id, created_at, updated_at), or None before the first run."""
    return conn.execute(
        "SELECT id, created_at, updated_at FROM threads WHERE owner_id = %s AND kind = 'supervisor'", (owner_id,)
    ).fetchone()


def append_messages(
    conn: Connection, owner_id: int, thread_id: int, run_id: int | None,
    messages: list[tuple[str, str, dict[str, Any]]],
) -> list[int]:
    """Append ``(role, content, metadata)`` messages in order and touch the thread; their ids, in order.

    Touching comes first: its row lock, held until the caller's transaction ends, makes appends to
    one thread take turns, so the messages of one call get adjacent ids even when runs of the owner
    end at the same moment (ids come from a sequence: without the lock, two runs' inserts could
    interleave as task, task, answer, answer)."""
    conn.execute("UPDATE threads SET updated_at = now() WHERE id = %s AND owner_id = %s", (thread_id, owner_id))
    return [conn.execute(
        """INSERT INTO thread_messages (thread_id, owner_id, run_id, role, content, metadata)
           VALUES (%s, %s, %s, %s, %s, %s) RETURNING id""",
        (thread_id, owner_id, run_id, role, content, Jsonb(meta)),
    ).fetchone()["id"] for role, content, meta in messages]


def messages_after(conn: Connection, owner_id: int, thread_id: int, after_id: int, *, limit: int,
                   newest: bool = False) -> list[dict[str, Any]]:
    """Messages with id > ``after_id`` (those no compaction summary covers), oldest first: the first
    ``limit`` of them, or the last ``limit`` when ``newest``. Each has id, role, content and metadata."""
    order = "DESC" if newest else "ASC"
    rows = conn.execute(
        f"""SELECT id, role, content, metadata FROM thread_messages
            WHERE owner_id = %s AND thread_id = %s AND id > %s ORDER BY id {order} LIMIT %s""",
        (owner_id, thread_id, after_id, limit),
    ).fetchall()
    return rows[::-1] if newest else rows


def count_messages_after(conn: Connection, owner_id: int, thread_id: int, after_id: int) -> int:
    """How many of the thread's messages have id > ``after_id``."""
    return conn.execute(
        "SELECT count(*) AS n FROM thread_messages WHERE owner_id = %s AND thread_id = %s AND id > %s",
        (owner_id, thread_id, after_id),
    ).fetchone()["n"]


def page_messages(conn: Connection, owner_id: int, thread_id: int, *, before_id: int, limit: int) -> list[dict[str, Any]]:
    """A page of the thread, newest first: messages with id < ``before_id``."""
    return conn.execute(
        """SELECT id, role, content, metadata, run_id, created_at FROM thread_messages
           WHERE owner_id = %s AND thread_id = %s AND id < %s ORDER BY id DESC LIMIT %s""",
        (owner_id, thread_id, before_id, limit),
    ).fetchall()


def cited_job_ids(conn: Connection, owner_id: int) -> set[int]:
    """Job ids the owner's thread messages cite as provenance (an answer's ``metadata.job_ids``,
    written by :func:`zerg.runs.store.complete_run`): the workers the conversation stands on."""
    rows = conn.execute(
        """SELECT DISTINCT cited.job_id::bigint AS job_id
           FROM thread_messages AS m,
                jsonb_array_elements_text(CASE WHEN jsonb_typeof(m.metadata->'job_ids') = 'array'
                                               THEN m.metadata->'job_ids' ELSE '[]'::jsonb END) AS cited(job_id)
           WHERE m.owner_id = %s AND cited.job_id ~ '^[0-9]{1,18}$'""",
        (owner_id,),
    ).fetchall()
    return {r["job_id"] for r in rows}


def export_threads(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's threads, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM threads WHERE owner_id = %s ORDER BY id", (owner_id,))


def export_thread_messages(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """Every message of the owner's threads, oldest first, streamed."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM thread_messages WHERE owner_id = %s ORDER BY id", (owner_id,))
