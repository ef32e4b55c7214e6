"""Files the embedder refused (``memory_embedding_failures``): one row per (file, model) with the
content hash that failed, so the indexer skips that content instead of failing on it every pass.

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_memory_embedding_failures(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_embedding_failures``, for ``zerg owners export`` (content
    hashes left out: derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream(
            """SELECT id, file_id, owner_id, model, attempts, last_error, failed_at
               FROM memory_embedding_failures WHERE owner_id = %s ORDER BY id""", (owner_id,))
