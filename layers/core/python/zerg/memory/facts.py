"""Organisational memory (``org_memory``): add-only facts, preferences, decisions about the owner.

Invariants:
- Every read and every change is scoped by owner; another owner's id is "not found".
- Add-only with dedup: :func:`add_fact` never edits a memory's content and never deletes one. A new
  memory whose content (lower-cased, whitespace collapsed) equals or is contained in one the owner
  already has is a duplicate: nothing is added and the existing memory's importance is bumped —
  to the new importance when that is higher, by one (capped at 10) when they are equal, unchanged
  when it is lower — and its ``updated_at`` refreshed (a repeated mention is recent again). One
  way only: an existing memory contained in a *longer* new one does not make the new one a
  duplicate (it says more; dropping it would lose what a model extracted, and add-only keeps both).
- Concurrent adds for one owner are serialised (a per-owner advisory lock until the transaction
  ends), so two extractions of the same fact never both insert it.
- Only :func:`forget_fact` removes a memory: the owner's explicit request (API, CLI, the
  supervisor's ``forget_fact`` tool), never a model's own decision during extraction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the CLI imports this module to build its parser: keep it light
    from psycopg import Connection

Category = Literal["fact", "decision", "preference", "insight", "reminder", "profile"]
CATEGORIES: tuple[str, ...] = ("fact", "decision", "preference", "insight", "reminder", "profile")
Writer = Literal["user", "supervisor", "worker", "system"]
PROFILE_LIMIT = 20  # seed 002: the owner's profile memories (up to 20) are always shown

_LOCK_SPACE = 0x5A4F524D  # advisory-lock namespace for "org memory of owner N"
_COLUMNS = "id, category, content, tags, importance, writer, source_run_id, created_at, updated_at"
_NORMAL = "lower(regexp_replace(btrim(content), '\\s+', ' ', 'g'))"


@dataclass(frozen=True)
class Added:
    """What :func:`add_fact` did: ``created`` a new row, or bumped the duplicate ``id``."""

    id: int
    created: bool
    importance: int


def normalise(text: str) -> str:
    """The form duplicates are compared in (the SQL expression does the same to stored rows)."""
    return " ".join(text.split()).lower()


def add_fact(conn: Connection, owner_id: int, category: Category, content: str, *, importance: int = 5,
             tags: Sequence[str] = (), writer: Writer = "system", source_run_id: int | None = None) -> Added:
    """Add one memory, or bump the owner's existing duplicate of it (see the module invariants)."""
    content = " ".join(content.split())
    if not content:
        raise ValueError("a memory needs some content")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, owner_id % 2**31))
        dup = conn.execute(
            f"""SELECT id, importance FROM org_memory
                WHERE owner_id = %s AND strpos({_NORMAL}, %s) > 0
                ORDER BY importance DESC, updated_at DESC, id LIMIT 1""",
            (owner_id, normalise(content)),
        ).fetchone()
        if dup is not None:
            row = conn.execute(
                """UPDATE org_memory SET updated_at = now(),
                          importance = CASE WHEN importance = %s THEN LEAST(importance + 1, 10)
                                            ELSE GREATEST(importance, %s) END
                   WHERE id = %s AND owner_id = %s RETURNING id, importance""",
                (importance, importance, dup["id"], owner_id),
            ).fetchone()
            return Added(row["id"], False, row["importance"])
        row = conn.execute(
            """INSERT INTO org_memory (owner_id, category, content, tags, importance, writer, source_run_id)
               VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id, importance""",
            (owner_id, category, content, list(tags), importance, writer, source_run_id),
        ).fetchone()
    return Added(row["id"], True, row["importance"])


def list_facts(conn: Connection, owner_id: int, *, category: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The owner's memories, most important first, then most recently updated."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM org_memory
            WHERE owner_id = %s AND (%s::text IS NULL OR category = %s)
            ORDER BY importance DESC, updated_at DESC, id DESC LIMIT %s""",
        (owner_id, category, category, limit),
    ).fetchall()


def profile_facts(conn: Connection, owner_id: int, limit: int = PROFILE_LIMIT) -> list[dict[str, Any]]:
    """The owner's ``profile`` memories (up to ``limit``), by importance then recency."""
    return list_facts(conn, owner_id, category="profile", limit=limit)


def top_facts(conn: Connection, owner_id: int, limit: int) -> list[dict[str, Any]]:
    """The owner's ``limit`` most important memories other than the profile, then most recent."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM org_memory WHERE owner_id = %s AND category <> 'profile'
            ORDER BY importance DESC, updated_at DESC, id DESC LIMIT %s""",
        (owner_id, limit),
    ).fetchall()


def forget_fact(conn: Connection, owner_id: int, fact_id: int) -> dict[str, Any] | None:
    """Delete one of the owner's memories; the deleted row, or None (absent, or another owner's)."""
    return conn.execute(
        f"DELETE FROM org_memory WHERE owner_id = %s AND id = %s RETURNING {_COLUMNS}", (owner_id, fact_id)
    ).fetchone()


def export_org_memory(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``org_memory``, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM org_memory WHERE owner_id = %s ORDER BY id", (owner_id,))
