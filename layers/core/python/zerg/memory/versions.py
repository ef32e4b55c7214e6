"""Previous versions of memory files (``memory_file_versions``): kept 30 days, restorable.

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_memory_file_versions(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_file_versions``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, owner_id, path, title, content, tags, metadata, writer, writer_run_id, written_at, reason, replaced_at FROM memory_file_versions WHERE owner_id = %s ORDER BY id", (owner_id,))
