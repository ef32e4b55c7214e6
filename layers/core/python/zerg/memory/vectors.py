"""Embeddings of memory files (``memory_embeddings``): one row per (file, model).

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_memory_embeddings(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows (without the vectors: derived data, recomputed from the files) of ``memory_embeddings``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, file_id, owner_id, model, dimension, created_at FROM memory_embeddings WHERE owner_id = %s ORDER BY id", (owner_id,))
