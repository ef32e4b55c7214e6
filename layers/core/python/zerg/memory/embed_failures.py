"""Files the embedder refused (``memory_embedding_failures``): one row per (file, model) with the
content hash that failed, so the indexer skips that content instead of failing on it every pass.

Invariants:
- Only a refusal of the file's own text is recorded (the model rejected it when sent alone); a
  transient failure (timeout, 429, 5xx, unreachable) never is.
- A file is skipped (``vectors.stale`` leaves it out) once the *same* content has failed
  :data:`GIVE_UP_AFTER` times; an edit (another content hash) makes it eligible again, and its
  next :func:`record` starts counting from 1.
- A stored vector clears the file's row (:func:`clear`).
- Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

GIVE_UP_AFTER = 3  # failures of the same content before the indexer stops trying it
ERROR_CHARS = 1_000  # last_error is cut here (the column's limit)


def record(conn: Connection, owner_id: int, file_id: int, model: str, content_hash: str, error: str) -> int:
    """One more failure of this content of the file under ``model``; returns its attempts (0: the
    file is gone or not the owner's). Another content hash than the recorded one starts at 1."""
    row = conn.execute(
        """INSERT INTO memory_embedding_failures (file_id, owner_id, model, content_hash, last_error)
           SELECT f.id, f.owner_id, %s, %s, %s FROM memory_files f WHERE f.id = %s AND f.owner_id = %s
           ON CONFLICT (file_id, model) DO UPDATE
           SET attempts = CASE WHEN memory_embedding_failures.content_hash = EXCLUDED.content_hash
                               THEN memory_embedding_failures.attempts + 1 ELSE 1 END,
               content_hash = EXCLUDED.content_hash, last_error = EXCLUDED.last_error, failed_at = now()
           RETURNING attempts""",
        (model, content_hash, error[:ERROR_CHARS], file_id, owner_id)).fetchone()
    return row["attempts"] if row else 0


def clear(conn: Connection, owner_id: int, file_id: int, model: str) -> None:
    """The file has a vector of ``model`` now: forget its failures."""
    conn.execute("DELETE FROM memory_embedding_failures WHERE file_id = %s AND owner_id = %s AND model = %s",
                 (file_id, owner_id, model))


def attempts(conn: Connection, owner_id: int, file_id: int, model: str) -> int:
    """How often the file's recorded content failed under ``model`` (0: no record)."""
    row = conn.execute(
        "SELECT attempts FROM memory_embedding_failures WHERE file_id = %s AND owner_id = %s AND model = %s",
        (file_id, owner_id, model)).fetchone()
    return row["attempts"] if row else 0


def export_memory_embedding_failures(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_embedding_failures``, for ``zerg owners export`` (content
    hashes left out: derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream(
            """SELECT id, file_id, owner_id, model, attempts, last_error, failed_at
               FROM memory_embedding_failures WHERE owner_id = %s ORDER BY id""", (owner_id,))
