"""Previous versions of memory files (``memory_file_versions``): kept 30 days, restorable.
Every SQL statement on the table lives here.

Invariants:
- Every read is scoped by owner; versions are keyed by path, so a deleted file's versions outlive it.
- A version is written in the same transaction as the change that replaced it (the caller's).
- Versions older than :data:`KEEP_DAYS` are neither listed nor restorable, whether or not the daily
  :func:`prune` has removed them yet: the promise is "30 days", not "until the sweep runs".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

KEEP_DAYS = 30
REASONS = ("overwrite", "edit", "delete", "restore")
LIST_COLUMNS = ("id, path, title, tags, writer, writer_run_id, written_at, reason, replaced_at, "
                "octet_length(content) AS size")
PRUNE_BATCH = 5_000


def export_memory_file_versions(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_file_versions``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, owner_id, path, title, content, tags, metadata, writer, writer_run_id, written_at, reason, replaced_at FROM memory_file_versions WHERE owner_id = %s ORDER BY id", (owner_id,))


def keep(conn: Connection, file: dict[str, Any], reason: str) -> int:
    """Keep ``file`` (a ``memory_files`` row with its content) as a previous version; its id."""
    if reason not in REASONS:
        raise ValueError(f"unknown version reason {reason!r}")
    return conn.execute(
        """INSERT INTO memory_file_versions (owner_id, path, title, content, tags, metadata, writer, writer_run_id,
                                             content_hash, written_at, reason)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id""",
        (file["owner_id"], file["path"], file["title"], file["content"], list(file["tags"]), Jsonb(file["metadata"]),
         file["writer"], file["writer_run_id"], file["content_hash"], file["updated_at"], reason)).fetchone()["id"]


def list_for_path(conn: Connection, owner_id: int, path: str, limit: int = 100) -> list[dict[str, Any]]:
    """The owner's kept versions of ``path``, newest first (without content)."""
    return conn.execute(
        "SELECT " + LIST_COLUMNS + " FROM memory_file_versions WHERE owner_id = %s AND path = %s "
        "AND replaced_at >= now() - make_interval(days => %s) ORDER BY replaced_at DESC, id DESC LIMIT %s",
        (owner_id, path, KEEP_DAYS, limit)).fetchall()


def get(conn: Connection, owner_id: int, version_id: int) -> dict[str, Any] | None:
    """One of the owner's kept versions, with its content and metadata."""
    return conn.execute(
        "SELECT " + LIST_COLUMNS + ", content, metadata FROM memory_file_versions WHERE id = %s AND owner_id = %s "
        "AND replaced_at >= now() - make_interval(days => %s)", (version_id, owner_id, KEEP_DAYS)).fetchone()


def prune(conn: Connection, days: int = KEEP_DAYS, batch: int = PRUNE_BATCH) -> int:
    """Delete up to ``batch`` versions (every owner's) replaced more than ``days`` ago; how many."""
    return conn.execute(
        """DELETE FROM memory_file_versions WHERE id IN (
               SELECT id FROM memory_file_versions WHERE replaced_at < now() - make_interval(days => %s)
               ORDER BY replaced_at LIMIT %s)""", (days, batch)).rowcount
