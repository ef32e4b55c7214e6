"""Memory files (``memory_files``): the owner's small virtual file system of notes and episodes.
Every SQL statement on the table lives here; :mod:`zerg.memory.filesystem` composes them.

Invariants:
- Every statement is scoped by ``owner_id``, applied in the WHERE clause before any ORDER BY or
  LIMIT: a path names a file only within its owner, and no ranking ever sees another owner's rows.
- Reads return :data:`COLUMNS` (content only where asked for); sizes are UTF-8 bytes.
- Grep is bounded here, in the database: a per-statement timeout, at most ``limit`` matching lines,
  each cut to ``line_chars``; the whole-content ``~*`` test (newline-sensitive, so ``^`` and ``$``
  mean what they mean per line) comes first so a trigram index (where ``pg_trgm`` exists) can skip
  files that cannot match.
- Full-text search never scans the owner's content: the query is parsed first (:func:`text_query`);
  its ranking reads the term statistics (:mod:`zerg.memory.terms`), and here only the candidates'
  positions and excerpts are read; the substring fallback reads a bounded window
  (:data:`SUBSTRING_FILES` x :data:`SUBSTRING_CHARS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

COLUMNS = ("id, owner_id, path, title, tags, metadata, writer, writer_run_id, content_hash, created_at, updated_at, "
           "last_accessed_at, octet_length(content) AS size")
# Touch last_accessed_at at most this often: each touch rewrites the row (and its tsvector).
TOUCH_EVERY = "1 minute"
GREP_TIMEOUT = "5s"
# The substring fallback of full-text search reads at most this many of the owner's newest files,
# each up to this many characters: its cost is bounded, whatever the owner holds.
SUBSTRING_FILES = 500
SUBSTRING_CHARS = 65_536
# ts_headline: a short excerpt around the matches (the document's start when none match), found in
# the file's first EXCERPT_CHARS characters (parsing costs ~0.5 ms per KB, and a search shows up to 50).
EXCERPT_CHARS = 32_768
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


def limit_time(conn: Connection, timeout: str) -> None:
    """Cancel any later statement of the caller's transaction that runs past ``timeout`` (e.g.
    ``"2s"``): psycopg's ``QueryCanceled``. Lasts until the transaction ends (``SET LOCAL``)."""
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))


_OPTIONS = re.compile(r"^\(\?([bceimnpqstwx]*)\)")  # an ARE's embedded options, "(?i)"


def per_line(pattern: str) -> str:
    """``pattern`` in newline-sensitive mode (the ARE option ``n``: ``^`` and ``$`` match at each
    line, ``.`` never crosses one), so the test on a whole file agrees with the test on its lines.
    Options the pattern sets itself (``(?i)``) are kept, after ``n``: they win. (A ``***``
    director never gets here: it is not a valid Python pattern, refused before the database.)"""
    options = _OPTIONS.match(pattern)
    if options:
        return f"(?n{options[1]}){pattern[options.end():]}"
    return f"(?n){pattern}"


def grep(conn: Connection, owner_id: int, pattern: str, prefix: str, *, limit: int, line_chars: int) -> list[dict[str, Any]]:
    """Lines of the owner's files (under ``prefix``) matching the POSIX regular expression
    ``pattern`` case-insensitively, by path then line number: (path, line_no, line, line_length).
    ``^`` and ``$`` anchor at each line. Raises psycopg's ``InvalidRegularExpression`` for a
    pattern PostgreSQL refuses and ``QueryCanceled`` past :data:`GREP_TIMEOUT`."""
    limit_time(conn, GREP_TIMEOUT)
    return conn.execute(
        """SELECT f.path, l.n AS line_no, left(l.line, %s) AS line, length(l.line) AS line_length
           FROM memory_files f
           CROSS JOIN LATERAL regexp_split_to_table(f.content, E'\\n') WITH ORDINALITY AS l(line, n)
           WHERE f.owner_id = %s AND starts_with(f.path, %s) AND f.content ~* %s AND l.line ~* %s
           ORDER BY f.path COLLATE "C", l.n LIMIT %s""",
        (line_chars, owner_id, prefix, per_line(pattern), pattern, limit)).fetchall()


STRICT = "strict:"  # the explicit query syntax: what follows is read with operators


@dataclass(frozen=True)
class TextQuery:
    """How full text reads one query (:func:`text_query`)."""

    text: str  # the query as typed, without the explicit syntax's prefix
    lexemes: list[str]  # its words as the index holds them (stemmed, no stop words): ranked by these
    strict: str | None  # explicit syntax only: the tsquery a file must match, in PostgreSQL's text form
    match: str | None  # the tsquery an excerpt shows the words of (strict, else any of the words)


def text_query(conn: Connection, query: str) -> TextQuery:
    """Parse ``query`` once (a small statement, no table read). A natural question is its words,
    whatever it holds (quotes, "or", a hyphen): never an operator. Only after :data:`STRICT`
    are quotes (a phrase), ``or`` and ``-word`` operators (``websearch_to_tsquery``), and a file
    must match them. No words left (only stop words or symbols): a substring match."""
    text, strict = query, query[:len(STRICT)].lower() == STRICT
    if strict:
        text = query[len(STRICT):].strip() or query
    row = conn.execute(
        """SELECT CASE WHEN %(strict)s THEN websearch_to_tsquery('english', %(q)s)::text END AS strict,
                  CASE WHEN %(strict)s THEN numnode(websearch_to_tsquery('english', %(q)s)) ELSE 0 END AS nodes,
                  tsvector_to_array(to_tsvector('english', %(q)s)) AS lexemes""",
        {"q": text, "strict": strict}).fetchone()
    lexemes = sorted(row["lexemes"] or [])
    required = row["strict"] if row["nodes"] > 0 else None
    return TextQuery(text, lexemes, required, required or any_of(lexemes))


def any_of(lexemes: Sequence[str]) -> str | None:
    """The tsquery (text form) matching any of ``lexemes``; None for none. Each is quoted as tsquery
    input wants (' and \\ escaped): taken as it is, never parsed again."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes) or None


def substring(conn: Connection, owner_id: int, query: TextQuery, *, tags: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """The owner's files carrying every tag in ``tags`` whose title or content holds ``query`` as
    a case-insensitive substring, newest first: (id, rank 0). Reads only the owner's newest
    :data:`SUBSTRING_FILES` files, each up to :data:`SUBSTRING_CHARS` characters: bounded whatever
    the owner holds."""
    return conn.execute(SUBSTRING_SQL, {"q": query.text, "owner": owner_id, "tags": list(tags), "limit": limit,
                                        "files": SUBSTRING_FILES, "chars": SUBSTRING_CHARS}).fetchall()


SUBSTRING_SQL = """SELECT f.id, 0.0 AS rank
    FROM (SELECT id, title, content, updated_at FROM memory_files
          WHERE owner_id = %(owner)s AND tags @> %(tags)s ORDER BY updated_at DESC, id DESC LIMIT %(files)s) f
    WHERE strpos(lower(left(f.content, %(chars)s)), lower(%(q)s)) > 0 OR strpos(lower(f.title), lower(%(q)s)) > 0
    ORDER BY f.updated_at DESC, f.id DESC LIMIT %(limit)s"""


def positions(conn: Connection, owner_id: int, file_ids: Sequence[int], lexemes: Sequence[str]) -> dict[int, dict[str, list[int]]]:
    """Where each of ``lexemes`` occurs in each of the owner's files in ``file_ids`` (word positions
    in the ``search`` tsvector, the title's first), by file id then lexeme; a file holding none of
    them is left out. Only those lexemes are taken out of each tsvector (marked, then filtered)."""
    if not file_ids or not lexemes:
        return {}
    rows = conn.execute(
        """SELECT f.id, u.lexeme, u.positions
           FROM memory_files f
           CROSS JOIN LATERAL unnest(ts_filter(setweight(setweight(f.search, 'D'), 'A', %(lexemes)s::text[]), '{a}')) AS u
           WHERE f.owner_id = %(owner)s AND f.id = ANY(%(ids)s)""",
        {"owner": owner_id, "ids": list(file_ids), "lexemes": list(lexemes)}).fetchall()
    out: dict[int, dict[str, list[int]]] = {}
    for r in rows:
        out.setdefault(r["id"], {})[r["lexeme"]] = list(r["positions"] or [])
    return out


def excerpts(conn: Connection, owner_id: int, file_ids: Sequence[int], query: TextQuery, chars: int) -> dict[int, dict[str, Any]]:
    """Path, title and a short excerpt of each of the owner's files in ``file_ids``, by id: around
    the query's words where they occur (in the first :data:`EXCERPT_CHARS`), else around the query
    as a substring, else the start."""
    rows = conn.execute(
        """SELECT id, path, title,
                  CASE WHEN %(match)s::tsquery IS NOT NULL AND search @@ %(match)s::tsquery
                       THEN ts_headline('english', left(content, %(window)s), %(match)s::tsquery, %(opts)s)
                       ELSE substr(content, greatest(1, strpos(lower(left(content, %(scan)s)), lower(%(q)s)) - %(before)s),
                                   %(chars)s)
                  END AS excerpt
           FROM memory_files WHERE owner_id = %(owner)s AND id = ANY(%(ids)s)""",
        {"match": query.match, "q": query.text, "opts": HEADLINE, "window": EXCERPT_CHARS, "scan": SUBSTRING_CHARS,
         "before": chars // 3, "chars": chars, "owner": owner_id, "ids": list(file_ids)}).fetchall()
    return {r["id"]: r for r in rows}
