"""Memory files and vectors written straight into the tables, for tests of the vector side.

The memory-files service owns writing files for real; these helpers only need rows to exist (and
thousands of vectors fast, by COPY), so they stay out of the library on purpose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def content_hash(title: str, content: str) -> str:
    return hashlib.sha256((title + "\n" + content).encode()).hexdigest()


def add_file(conn, owner_id: int, path: str, content: str, *, title: str = "", tags: Sequence[str] = ()) -> int:
    return conn.execute(
        """INSERT INTO memory_files (owner_id, path, title, content, tags, writer, content_hash)
           VALUES (%s, %s, %s, %s, %s, 'user', %s) RETURNING id""",
        (owner_id, path, title, content, list(tags), content_hash(title, content))).fetchone()["id"]


def edit_file(conn, owner_id: int, file_id: int, content: str) -> str:
    """New content (and hash) for the file; returns the new hash."""
    row = conn.execute("SELECT title FROM memory_files WHERE id = %s AND owner_id = %s",
                       (file_id, owner_id)).fetchone()
    new_hash = content_hash(row["title"], content)
    conn.execute("UPDATE memory_files SET content = %s, content_hash = %s, updated_at = now() WHERE id = %s",
                 (content, new_hash, file_id))
    return new_hash


def add_files_with_vectors(conn, owner_id: int, prefix: str, vectors: Iterable[Sequence[float]], *,
                           model: str, tags: Sequence[str] = ()) -> list[int]:
    """One file per vector (``{prefix}/{i}.md``) and its embedding under ``model``, by COPY."""
    vectors = list(vectors)
    with conn.cursor() as cur:
        with cur.copy("COPY memory_files (owner_id, path, content, tags, writer, content_hash) FROM STDIN") as copy:
            for i in range(len(vectors)):
                copy.write_row((owner_id, f"{prefix}/{i}.md", f"note {i}", list(tags), "user", content_hash("", f"note {i}")))
    by_path = {r["path"]: r["id"] for r in conn.execute(
        "SELECT id, path FROM memory_files WHERE owner_id = %s AND path LIKE %s", (owner_id, f"{prefix}/%")).fetchall()}
    ids = [by_path[f"{prefix}/{i}.md"] for i in range(len(vectors))]
    with conn.cursor() as cur:
        with cur.copy("COPY memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash) "
                      "FROM STDIN") as copy:
            for fid, (i, vector) in zip(ids, enumerate(vectors)):
                copy.write_row((fid, owner_id, model, len(vector), "[" + ",".join(f"{x:.7g}" for x in vector) + "]",
                                content_hash("", f"note {i}")))
    return ids
