"""Organisational memory (``org_memory``): add-only facts, preferences, decisions about the owner.

Invariants:
- Every read and every change is scoped by owner; another owner's id is "not found".
- Add-only with dedup: :func:`add_fact` never edits a memory's content and never deletes one. A new
  memory whose content (lower-cased, whitespace collapsed) equals or is contained in one the owner
  already has is a duplicate: nothing is added and the existing memory's importance is bumped —
  to the new importance when that is higher, by one when they are equal (up to the caller's
  ``ceiling``: 10, or 6 for an extraction the owner's words do not support, so repeating an
  injected memory never lifts it), unchanged when it is lower — and its ``updated_at`` refreshed
  (a repeated mention is recent again). One
  way only: an existing memory contained in a *longer* new one does not make the new one a
  duplicate (it says more; dropping it would lose what a model extracted, and add-only keeps both).
- Concurrent adds for one owner are serialised (a per-owner advisory lock until the transaction
  ends), so two extractions of the same fact never both insert it.
- Forgetting is reversible for :data:`FORGET_KEEP_DAYS`: :func:`forget_fact` (the owner's request
  through the API, the CLI, or the supervisor's ``forget_fact`` tool, which acts only on a memory
  the owner's own words of the run designate: :mod:`zerg.tools.fact_tools`) sets ``forgotten_at``; a forgotten memory is invisible to every
  read (list, profile, top, recall) and :func:`restore_fact` brings it back within those days;
  :func:`prune_forgotten` deletes it after them. Extraction never forgets anything.
- A forgotten memory still counts for dedup: extracting it again adds nothing and bumps nothing
  (``Added.forgotten``), so a forgotten fact does not come back silently from the next run that
  mentions it. The owner restores it, or states it again after the prune.
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
FORGET_KEEP_DAYS = 30  # a forgotten memory is restorable this long, then pruned
PRUNE_BATCH = 5_000

_LOCK_SPACE = 0x5A4F524D  # advisory-lock namespace for "org memory of owner N"
_COLUMNS = "id, category, content, tags, importance, writer, source_run_id, created_at, updated_at, forgotten_at"
_NORMAL = "lower(regexp_replace(btrim(content), '\\s+', ' ', 'g'))"


@dataclass(frozen=True)
class Added:
    """What :func:`add_fact` did: ``created`` a new row, or bumped the duplicate ``id`` (left alone
    when that duplicate is ``forgotten``)."""

    id: int
    created: bool
    importance: int
    forgotten: bool = False


def normalise(text: str) -> str:
    """The form duplicates are compared in (the SQL expression does the same to stored rows)."""
    return " ".join(text.split()).lower()


def add_fact(conn: Connection, owner_id: int, category: Category, content: str, *, importance: int = 5,
             tags: Sequence[str] = (), writer: Writer = "system", source_run_id: int | None = None,
             ceiling: int = 10) -> Added:
    """Add one memory, or bump the owner's existing duplicate of it (see the module invariants)."""
    content, ceiling = " ".join(content.split()), min(ceiling, 10)
    importance = min(importance, ceiling)
    if not content:
        raise ValueError("a memory needs some content")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, owner_id % 2**31))
        dup = conn.execute(
            f"""SELECT id, importance, forgotten_at FROM org_memory
                WHERE owner_id = %s AND strpos({_NORMAL}, %s) > 0
                ORDER BY forgotten_at IS NULL DESC, importance DESC, updated_at DESC, id LIMIT 1""",
            (owner_id, normalise(content)),
        ).fetchone()
        if dup is not None and dup["forgotten_at"] is not None:  # the owner forgot it: it stays forgotten
            return Added(dup["id"], False, dup["importance"], forgotten=True)
        if dup is not None:
            row = conn.execute(
                """UPDATE org_memory SET updated_at = now(),
                          importance = CASE WHEN importance = %s THEN GREATEST(importance, LEAST(importance + 1, %s))
                                            ELSE GREATEST(importance, %s) END
                   WHERE id = %s AND owner_id = %s RETURNING id, importance""",
                (importance, ceiling, importance, dup["id"], owner_id),
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
            WHERE owner_id = %s AND forgotten_at IS NULL AND (%s::text IS NULL OR category = %s)
            ORDER BY importance DESC, updated_at DESC, id DESC LIMIT %s""",
        (owner_id, category, category, limit),
    ).fetchall()


def list_forgotten(conn: Connection, owner_id: int, *, category: str | None = None,
                   limit: int = 50) -> list[dict[str, Any]]:
    """The owner's memories forgotten in the last :data:`FORGET_KEEP_DAYS` days (restorable), newest first."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM org_memory
            WHERE owner_id = %s AND forgotten_at >= now() - make_interval(days => %s)
              AND (%s::text IS NULL OR category = %s)
            ORDER BY forgotten_at DESC, id DESC LIMIT %s""",
        (owner_id, FORGET_KEEP_DAYS, category, category, limit),
    ).fetchall()


def profile_facts(conn: Connection, owner_id: int, limit: int = PROFILE_LIMIT) -> list[dict[str, Any]]:
    """The owner's ``profile`` memories (up to ``limit``), by importance then recency."""
    return list_facts(conn, owner_id, category="profile", limit=limit)


def top_facts(conn: Connection, owner_id: int, limit: int) -> list[dict[str, Any]]:
    """The owner's ``limit`` most important memories other than the profile, then most recent."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM org_memory
            WHERE owner_id = %s AND category <> 'profile' AND forgotten_at IS NULL
            ORDER BY importance DESC, updated_at DESC, id DESC LIMIT %s""",
        (owner_id, limit),
    ).fetchall()


def get_fact(conn: Connection, owner_id: int, fact_id: int) -> dict[str, Any] | None:
    """One of the owner's memories that is not forgotten, or None (absent, forgotten, another owner's)."""
    return conn.execute(
        f"SELECT {_COLUMNS} FROM org_memory WHERE owner_id = %s AND id = %s AND forgotten_at IS NULL",
        (owner_id, fact_id)).fetchone()


def forget_fact(conn: Connection, owner_id: int, fact_id: int) -> dict[str, Any] | None:
    """Forget one of the owner's memories (restorable for :data:`FORGET_KEEP_DAYS` days); the row, or
    None (absent, already forgotten, or another owner's)."""
    return conn.execute(
        f"""UPDATE org_memory SET forgotten_at = now()
            WHERE owner_id = %s AND id = %s AND forgotten_at IS NULL RETURNING {_COLUMNS}""", (owner_id, fact_id)
    ).fetchone()


def restore_fact(conn: Connection, owner_id: int, fact_id: int) -> dict[str, Any] | None:
    """Bring back a memory the owner forgot less than :data:`FORGET_KEEP_DAYS` days ago; the row, or
    None (absent, not forgotten, forgotten too long ago, or another owner's)."""
    return conn.execute(
        f"""UPDATE org_memory SET forgotten_at = NULL
            WHERE owner_id = %s AND id = %s AND forgotten_at >= now() - make_interval(days => %s)
            RETURNING {_COLUMNS}""", (owner_id, fact_id, FORGET_KEEP_DAYS)
    ).fetchone()


def prune_forgotten(conn: Connection, days: int = FORGET_KEEP_DAYS, batch: int = PRUNE_BATCH) -> int:
    """Delete up to ``batch`` memories (every owner's) forgotten more than ``days`` ago; how many."""
    return conn.execute(
        """DELETE FROM org_memory WHERE id IN (
               SELECT id FROM org_memory WHERE forgotten_at < now() - make_interval(days => %s)
               ORDER BY forgotten_at LIMIT %s)""", (days, batch)).rowcount


def has_run_facts(conn: Connection, owner_id: int, run_id: int) -> bool:
    """Whether any memory of the owner (forgotten ones included) was extracted from ``run_id``."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM org_memory WHERE owner_id = %s AND source_run_id = %s) AS found",
        (owner_id, run_id)).fetchone()["found"]


def export_org_memory(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``org_memory``, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM org_memory WHERE owner_id = %s ORDER BY id", (owner_id,))
