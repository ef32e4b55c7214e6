"""Embeddings of memory files (``memory_embeddings``): one row per (file, model).

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from psycopg import Connection


def export_memory_embeddings(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows (without the vectors: derived data, recomputed from the files) of ``memory_embeddings``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, file_id, owner_id, model, dimension, created_at FROM memory_embeddings WHERE owner_id = %s ORDER BY id", (owner_id,))


def nearest(conn: Connection, owner_id: int, model: str, vector: Sequence[float], *, limit: int,
            tags: Sequence[str] = ()) -> list[tuple[int, float]]:
    """The owner's files nearest ``vector`` among ``model``'s embeddings (and carrying every tag in
    ``tags``): (file id, cosine distance), nearest first. An exact scan: the owner, model and tag
    filters apply before the ORDER BY ... LIMIT, so a filter never shrinks the answer."""
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    rows = conn.execute(
        """SELECT e.file_id, e.embedding <=> %s::vector AS distance
           FROM memory_embeddings e JOIN memory_files f ON f.id = e.file_id AND f.owner_id = e.owner_id
           WHERE e.owner_id = %s AND e.model = %s AND e.dimension = %s AND f.tags @> %s
           ORDER BY distance, e.file_id LIMIT %s""",
        (literal, owner_id, model, len(vector), list(tags), limit)).fetchall()
    return [(r["file_id"], float(r["distance"])) for r in rows]
