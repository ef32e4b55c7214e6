"""Memory files (``memory_files``): the owner's small virtual file system of notes and episodes.
Every SQL statement on the table lives here; :mod:`zerg.memory.filesystem` composes them.

Invariants:
- Every statement is scoped by ``owner_id``, applied in the WHERE clause before any ORDER BY or
  LIMIT: a path names a file only within its owner, and no ranking ever sees another owner's rows.
- Reads return :data:`COLUMNS` (content only where asked for); sizes are UTF-8 bytes.
- Grep is bounded here, in the database: a per-statement timeout, at most ``limit`` matching lines,
  each cut to ``line_chars``; the whole-content ``~*`` test comes first so a trigram index (where
  ``pg_trgm`` exists) can skip files that cannot match.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

COLUMNS = ("id, owner_id, path, title, tags, metadata, writer, writer_run_id, content_hash, created_at, updated_at, "
           "last_accessed_at, octet_length(content) AS size")
# Touch last_accessed_at at most this often: each touch rewrites the row (and its tsvector).
TOUCH_EVERY = "1 minute"
GREP_TIMEOUT = "5s"
# ts_headline: a short excerpt around the matches (the document's start when none match).
HEADLINE = 'MaxWords=35, MinWords=15, ShortWord=2, MaxFragments=2, FragmentDelimiter=" … ", StartSel="", StopSel=""'


def export_memory_files(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_files``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, owner_id, path, title, content, tags, metadata, writer, writer_run_id, created_at, updated_at, last_accessed_at FROM memory_files WHERE owner_id = %s ORDER BY id", (owner_id,))


def get(conn: Connection, owner_id: int, path: str, *, lock: bool = False) -> dict[str, Any] | None:
    """The owner's file at ``path`` with its content (``lock``: FOR UPDATE, for a write that follows)."""
    return conn.execute(
        "SELECT " + COLUMNS + ", content FROM memory_files WHERE owner_id = %s AND path = %s"
        + (" FOR UPDATE" if lock else ""), (owner_id, path)).fetchone()


def touch(conn: Connection, owner_id: int, file_id: int) -> None:
    """Record a read (at most once a minute per file)."""
    conn.execute(
        "UPDATE memory_files SET last_accessed_at = now() WHERE id = %s AND owner_id = %s "
        "AND (last_accessed_at IS NULL OR last_accessed_at < now() - %s::interval)", (file_id, owner_id, TOUCH_EVERY))


def list_prefix(conn: Connection, owner_id: int, prefix: str, limit: int) -> list[dict[str, Any]]:
    """The owner's files whose path starts with ``prefix``, by path, without content."""
    return conn.execute(
        "SELECT " + COLUMNS + " FROM memory_files WHERE owner_id = %s AND starts_with(path, %s) "
        "ORDER BY path COLLATE \"C\" LIMIT %s", (owner_id, prefix, limit)).fetchall()


def count_prefix(conn: Connection, owner_id: int, prefix: str) -> int:
    return conn.execute("SELECT count(*) AS n FROM memory_files WHERE owner_id = %s AND starts_with(path, %s)",
                        (owner_id, prefix)).fetchone()["n"]


def insert(conn: Connection, owner_id: int, path: str, *, title: str, content: str, tags: Sequence[str],
           metadata: dict[str, Any], writer: str, writer_run_id: int | None, content_hash: str) -> dict[str, Any] | None:
    """A new file; None when the path is taken (a concurrent writer got there first)."""
    return conn.execute(
        """INSERT INTO memory_files (owner_id, path, title, content, tags, metadata, writer, writer_run_id, content_hash)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (owner_id, path) DO NOTHING
           RETURNING """ + COLUMNS + ", content",
        (owner_id, path, title, content, list(tags), Jsonb(metadata), writer, writer_run_id, content_hash)).fetchone()


def replace(conn: Connection, owner_id: int, file_id: int, *, title: str, content: str, tags: Sequence[str],
            metadata: dict[str, Any], writer: str, writer_run_id: int | None, content_hash: str) -> dict[str, Any]:
    """New content for an existing file (the caller kept the previous version)."""
    return conn.execute(
        """UPDATE memory_files SET title = %s, content = %s, tags = %s, metadata = %s, writer = %s,
                  writer_run_id = %s, content_hash = %s, updated_at = now()
           WHERE id = %s AND owner_id = %s RETURNING """ + COLUMNS + ", content",
        (title, content, list(tags), Jsonb(metadata), writer, writer_run_id, content_hash, file_id, owner_id)).fetchone()


def delete(conn: Connection, owner_id: int, file_id: int) -> bool:
    return conn.execute("DELETE FROM memory_files WHERE id = %s AND owner_id = %s RETURNING id",
                        (file_id, owner_id)).fetchone() is not None


def grep(conn: Connection, owner_id: int, pattern: str, prefix: str, *, limit: int, line_chars: int) -> list[dict[str, Any]]:
    """Lines of the owner's files (under ``prefix``) matching the POSIX regular expression
    ``pattern`` case-insensitively, by path then line number: (path, line_no, line, line_length).
    Raises psycopg's ``InvalidRegularExpression`` for a pattern PostgreSQL refuses and
    ``QueryCanceled`` past :data:`GREP_TIMEOUT`."""
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (GREP_TIMEOUT,))
    return conn.execute(
        """SELECT f.path, l.n AS line_no, left(l.line, %s) AS line, length(l.line) AS line_length
           FROM memory_files f
           CROSS JOIN LATERAL regexp_split_to_table(f.content, E'\\n') WITH ORDINALITY AS l(line, n)
           WHERE f.owner_id = %s AND starts_with(f.path, %s) AND f.content ~* %s AND l.line ~* %s
           ORDER BY f.path COLLATE "C", l.n LIMIT %s""",
        (line_chars, owner_id, prefix, pattern, pattern, limit)).fetchall()


def fulltext(conn: Connection, owner_id: int, query: str, *, tags: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """The owner's files carrying every tag in ``tags`` that match ``query``, best first: (id, rank).

    ``websearch_to_tsquery`` reads the query (quotes, ``or``, ``-word``); a query without those
    operators matches files holding ANY of its words, ranked by ``ts_rank_cd`` with a bonus for
    holding all of them, so a question ("what is the backup server called?") finds the note that
    answers it. A query PostgreSQL reduces to nothing (only stop words or symbols) matches the text
    as a case-insensitive substring instead (rank 0, newest first)."""
    return conn.execute(
        """WITH q AS (SELECT websearch_to_tsquery('english', %(q)s) AS strict,
                             plainto_tsquery('english', %(q)s) AS plain),
                m AS (SELECT strict, CASE WHEN strict::text ~ '[!|<]' THEN strict
                                          ELSE replace(plain::text, '&', '|')::tsquery END AS loose FROM q)
           SELECT f.id, ts_rank_cd(f.search, m.loose) + ts_rank_cd(f.search, m.strict) AS rank
           FROM memory_files f, m
           WHERE f.owner_id = %(owner)s AND f.tags @> %(tags)s AND numnode(m.strict) > 0 AND f.search @@ m.loose
           UNION ALL
           SELECT f.id, 0.0 AS rank FROM memory_files f, m
           WHERE f.owner_id = %(owner)s AND f.tags @> %(tags)s AND numnode(m.strict) = 0
             AND (strpos(lower(f.content), lower(%(q)s)) > 0 OR strpos(lower(f.title), lower(%(q)s)) > 0)
           ORDER BY rank DESC, id DESC LIMIT %(limit)s""",
        {"q": query, "owner": owner_id, "tags": list(tags), "limit": limit}).fetchall()


def excerpts(conn: Connection, owner_id: int, file_ids: Sequence[int], query: str, chars: int) -> dict[int, dict[str, Any]]:
    """Path, title and a short excerpt of each of the owner's files in ``file_ids``, by id: around
    the query's words where they occur, else around the query as a substring, else the start."""
    rows = conn.execute(
        """WITH q AS (SELECT websearch_to_tsquery('english', %(q)s) AS strict,
                             replace(plainto_tsquery('english', %(q)s)::text, '&', '|') AS loose)
           SELECT f.id, f.path, f.title,
                  CASE WHEN numnode(q.strict) > 0 AND f.search @@ q.loose::tsquery
                       THEN ts_headline('english', left(f.content, 100000), q.loose::tsquery, %(opts)s)
                       ELSE substr(f.content, greatest(1, strpos(lower(f.content), lower(%(q)s)) - %(before)s), %(chars)s)
                  END AS excerpt
           FROM memory_files f, q WHERE f.owner_id = %(owner)s AND f.id = ANY(%(ids)s)""",
        {"q": query, "opts": HEADLINE, "before": chars // 3, "chars": chars, "owner": owner_id,
         "ids": list(file_ids)}).fetchall()
    return {r["id"]: r for r in rows}
