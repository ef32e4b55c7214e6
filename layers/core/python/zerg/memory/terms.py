"""Term statistics of memory files (``memory_terms``) and the BM25 ranking they allow.

The database keeps the table (migration 0019's trigger on ``memory_files``): for each file, one row
per lexeme of its ``search`` tsvector with the lexeme's frequency and the file's length in tokens,
and one row with the empty lexeme (the file itself: its length counts the owner's files and their
average length). No code here writes it.

Invariants:
- Every statement is scoped by ``owner_id`` first (the primary key starts with it): a word's rarity,
  the average length and the ranking are the owner's own; another owner's files neither take a
  place in the ranking nor change a score.
- BM25 (Robertson/Sparck Jones idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, always positive) over
  the query's distinct lexemes: a word in every file weighs almost nothing, a rare one a lot, and a
  long file earns no more for its length (``b``). Only the files holding a query word are read, from
  the index (``tf`` is in it): the cost follows the query's words, not the owner's whole memory.
- Tags filter inside the ranking statement, before the LIMIT.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from psycopg import Connection

# Okapi BM25's usual constants. On bench/memory_quality.py's tune split, with nearness and meaning
# fused, k1 0.9-2.0 and b 0.4-0.9 were within 0.02 of each other at recall@1 and 0.005 at @5.
K1 = 1.2
B = 0.75

BM25_SQL = """
WITH corpus AS MATERIALIZED (
    SELECT count(*) AS n, greatest(avg(length), 1.0) AS avgdl FROM memory_terms WHERE owner_id = %(owner)s AND lexeme = ''),
postings AS MATERIALIZED (
    SELECT lexeme, file_id, tf, length FROM memory_terms WHERE owner_id = %(owner)s AND lexeme = ANY(%(terms)s)),
rarity AS MATERIALIZED (
    SELECT p.lexeme, ln(1 + (c.n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
    FROM postings p CROSS JOIN corpus c GROUP BY p.lexeme, c.n),
scored AS (
    SELECT p.file_id, sum(r.idf * p.tf * (%(k1)s + 1)
                          / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.avgdl))) AS score
    FROM postings p JOIN rarity r USING (lexeme) CROSS JOIN corpus c
    GROUP BY p.file_id)
SELECT s.file_id AS id, s.score::float8 AS score FROM scored s
{files}
ORDER BY s.score DESC, s.file_id DESC LIMIT %(limit)s"""
FILES_SQL = """JOIN memory_files f ON f.id = s.file_id AND f.owner_id = %(owner)s AND f.tags @> %(tags)s
    AND (%(require)s::tsquery IS NULL OR f.search @@ %(require)s::tsquery)"""


def bm25(conn: Connection, owner_id: int, lexemes: Sequence[str], *, tags: Sequence[str] = (),
         require: str | None = None, limit: int, k1: float = K1, b: float = B) -> list[dict[str, Any]]:
    """The owner's ``limit`` best files for ``lexemes`` (normalised as ``to_tsvector`` makes them) by
    BM25, best first: (id, score). Files holding none of the words are not returned, nor files
    without every tag in ``tags`` or (given ``require``, a tsquery's text form) not matching it."""
    terms = sorted({lex for lex in lexemes if lex})
    if not terms or limit < 1:
        return []
    query = BM25_SQL.format(files=FILES_SQL if tags or require else "")
    return conn.execute(query, {"owner": owner_id, "terms": terms, "tags": list(tags), "require": require,
                                "limit": limit, "k1": float(k1), "b": float(b)}).fetchall()


def idf(n: int, df: int) -> float:
    """A word's rarity among ``n`` files when ``df`` of them hold it, as :data:`BM25_SQL` weighs it."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def rarity(conn: Connection, owner_id: int, lexemes: Sequence[str]) -> tuple[int, dict[str, int]]:
    """How many files the owner has, and how many of them hold each of ``lexemes`` (one held by
    none is left out)."""
    rows = conn.execute("SELECT lexeme, count(*) AS n FROM memory_terms WHERE owner_id = %s AND lexeme = ANY(%s) "
                        "GROUP BY lexeme", (owner_id, sorted({*lexemes, ""}))).fetchall()
    held = {r["lexeme"]: r["n"] for r in rows}
    return held.pop("", 0), held


def export_memory_terms(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``memory_terms``, for ``zerg owners export`` (derived from the files, as
    the owner's words: their lexemes)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT owner_id, lexeme, file_id, tf, length FROM memory_terms WHERE owner_id = %s "
                              "ORDER BY file_id, lexeme", (owner_id,))
