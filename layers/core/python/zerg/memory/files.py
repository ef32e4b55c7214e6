"""Memory files (``memory_files``): the owner's small virtual file system of notes and episodes.

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_memory_files(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_files``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, owner_id, path, title, content, tags, metadata, writer, writer_run_id, created_at, updated_at, last_accessed_at FROM memory_files WHERE owner_id = %s ORDER BY id", (owner_id,))
