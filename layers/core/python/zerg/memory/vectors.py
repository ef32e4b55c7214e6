"""Embeddings of memory files (``memory_embeddings``): one row per (file, model, chunk).

A file's vectors are those of its overlapping chunks (:mod:`zerg.memory.chunks` cuts them, each
within what the model reads); a file is as near to a query as its nearest chunk.

Invariants:
- Every read is scoped by owner, and the owner (and tag) filter applies *before* the top-k: a
  filter never shrinks the answer. The owner is never post-filtered out of a global top-k.
- Vectors of different models are never compared: every query names its model, and a vector whose
  size is not the model's is an error (:class:`VectorSizeError`), never a silent miss.
- :func:`nearest` takes one of two paths, same answer up to the index's approximation:
  - *index*: the model's partial HNSW index (migration 0007) with pgvector >= 0.8 iterative scans,
    so the scan goes on past ``hnsw.ef_search`` until ``limit`` rows of this owner (and tags) are
    found; the query repeats the index's exact expression (``embedding::vector(N)``, the model as a
    literal) or the planner cannot use it. Candidates are re-ordered exactly afterwards. If the scan
    still comes back short (``hnsw.max_scan_tuples`` reached under a very selective filter), the
    exact path answers instead.
  - *exact*: a scan of the owner's rows of that model (index ``memory_embeddings_owner``) with the
    uncast distance, which no HNSW index matches. Taken when the owner has fewer than
    :data:`EXACT_SCAN_BELOW` rows of the model (it is as fast there, and exact), when pgvector is
    older than 0.8 (a filtered HNSW scan would lose rows) or for a model without an index.
- A file's vectors go with it (``ON DELETE CASCADE``). All of a file's chunks for a model are
  replaced together (:func:`store`, one transaction), so they are current while chunk 0's
  ``content_hash`` equals the file's, and :func:`stale` lists the files for which it does not.
- Every path ranks files, not chunks: a file appears once, at its best chunk's distance.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from psycopg import Connection, sql

from zerg.memory.embed_failures import GIVE_UP_AFTER

# The models with an HNSW index in migration 0007, and the dimension the index casts to.
INDEXED = {"all-MiniLM-L6-v2": 384, "text-embedding-3-small": 1536}
# Below this many rows of the owner for a model, the exact scan is used. bench/memory.py (384-d,
# 2 busy cores, p50): exact costs ~2.5 us a row (2,000 rows 5.4 ms, 4,000 8.7 ms, 20,000 55 ms);
# the index path costs 3-4 ms for an owner holding 20% of the table but more as the owner's share
# shrinks (iterative scans walk past other owners' rows): in a 100k-row table 27 ms at 1,000 rows,
# 11.7 ms at 2,000, 6.7 ms at 4,000. The two cross near 3,000 rows there (near 1,500 at 10k).
EXACT_SCAN_BELOW = 3_000
# The HNSW candidate list: pgvector's default is 40; at 100, recall@10 against the exact answer
# was 0.985-0.99 at 10k and 100k rows.
EF_SEARCH = 100
# The index path reads this many chunks per file asked for, then keeps each file's best: files
# whose chunks crowd the top (a long file near the query) cannot leave it short of files.
CHUNKS_PER_FILE = 4


class VectorSizeError(ValueError):
    """A vector whose number of dimensions is not its model's."""


@dataclass(frozen=True)
class Chunk:
    """One chunk's vector and the characters of the file's content it covers (``end`` exclusive)."""

    start: int
    end: int
    vector: Sequence[float]


def store(conn: Connection, owner_id: int, file_id: int, model: str, chunks: Sequence[Chunk],
          content_hash: str) -> bool:
    """Replace the file's vectors for ``model`` by ``chunks`` (chunk 0 first), computed from the
    content of ``content_hash``; False (nothing stored) when the file is not the owner's (or is gone)."""
    if not chunks:
        raise ValueError("a file's vectors need at least one chunk")
    literals = [_vector_literal(model, c.vector) for c in chunks]
    with conn.transaction():
        # The row lock serialises two passes storing the same file (the CLI's post-run pass and the
        # background indexer): the second waits, then replaces the first's chunks; with a shared
        # lock both would insert chunk 0 and the second would fail on the unique key.
        owned = conn.execute("SELECT id FROM memory_files WHERE id = %s AND owner_id = %s FOR NO KEY UPDATE",
                             (file_id, owner_id)).fetchone()
        if owned is None:
            return False
        conn.execute("DELETE FROM memory_embeddings WHERE file_id = %s AND model = %s", (file_id, model))
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash,
                                                  chunk, chunk_start, chunk_end)
                   VALUES (%s, %s, %s, %s, %s::vector, %s, %s, %s, %s)""",
                [(file_id, owner_id, model, len(c.vector), literal, content_hash, n, c.start, c.end)
                 for n, (c, literal) in enumerate(zip(chunks, literals))])
    return True


def stale(conn: Connection, model: str, *, owner_id: int | None = None, limit: int,
          max_chars: int | None = None, exclude: Sequence[int] = ()) -> list[dict[str, Any]]:
    """Files with no vector for ``model``, or one of other content: file_id, owner_id, title,
    content (the first ``max_chars``), content_hash. Most recently updated first. Left out: files
    in ``exclude`` (already tried in this pass) and content the model refused
    :data:`~zerg.memory.embed_failures.GIVE_UP_AFTER` times (an edit makes it eligible again)."""
    owner = sql.SQL("AND f.owner_id = %s") if owner_id is not None else sql.SQL("")
    content = sql.SQL("left(f.content, %s)") if max_chars is not None else sql.SQL("f.content")
    query = sql.SQL(
        """SELECT f.id AS file_id, f.owner_id, f.title, {content} AS content, f.content_hash
           FROM memory_files f LEFT JOIN memory_embeddings e ON e.file_id = f.id AND e.model = %s AND e.chunk = 0
           WHERE (e.id IS NULL OR e.content_hash <> f.content_hash) {owner}
             AND NOT (f.id = ANY(%s))
             AND NOT EXISTS (SELECT 1 FROM memory_embedding_failures x
                             WHERE x.file_id = f.id AND x.model = %s AND x.content_hash = f.content_hash
                               AND x.attempts >= %s)
           ORDER BY f.updated_at DESC, f.id LIMIT %s""").format(content=content, owner=owner)
    params = [*([max_chars] if max_chars is not None else []), model,
              *([owner_id] if owner_id is not None else []), list(exclude), model, GIVE_UP_AFTER, limit]
    return conn.execute(query, params).fetchall()


def nearest(conn: Connection, owner_id: int, model: str, vector: Sequence[float], *, limit: int,
            tags: Sequence[str] = ()) -> list[tuple[int, float]]:
    """The owner's ``limit`` files nearest to ``vector`` under ``model`` (with every tag in
    ``tags``): (file_id, cosine distance of the file's nearest chunk), nearest first, on the path
    :func:`plan` picks."""
    _vector_literal(model, vector)  # a wrong size is an error on either path
    if limit < 1:
        return []
    if plan(conn, owner_id, model) == "index":
        rows = index_scan(conn, owner_id, model, vector, limit=limit, tags=tags)
        if len(rows) >= limit:
            return rows
    return exact_scan(conn, owner_id, model, vector, limit=limit, tags=tags)


def plan(conn: Connection, owner_id: int, model: str) -> Literal["index", "exact"]:
    """Which path :func:`nearest` takes for this owner and model now (see the module's rules)."""
    if model not in INDEXED:
        return "exact"
    row = conn.execute(
        """SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS version,
                  (SELECT count(*) FROM (SELECT 1 FROM memory_embeddings WHERE owner_id = %s AND model = %s
                                         LIMIT %s) AS owned) AS owned""",
        (owner_id, model, EXACT_SCAN_BELOW)).fetchone()
    if row["owned"] < EXACT_SCAN_BELOW or not iterative_scans(row["version"]):
        return "exact"
    return "index"


def iterative_scans(version: str | None) -> bool:
    """pgvector ``version`` has HNSW iterative scans (0.8.0 and later)."""
    try:
        return tuple(int(p) for p in (version or "0").split(".")[:2]) >= (0, 8)
    except ValueError:
        return False


def index_scan_sql(model: str, vector: Sequence[float], owner_id: int, *, limit: int,
                   tags: Sequence[str] = ()) -> sql.Composed:
    """The index path's query, every value a literal (it shares one round trip with its settings,
    which only the simple query protocol allows); public for the EXPLAIN test."""
    dims = INDEXED[model]
    join, where = _tag_filter(bool(tags))
    return sql.SQL(
        """WITH candidates AS MATERIALIZED (
               SELECT e.file_id, e.embedding::vector({dims}) <=> {vector}::vector({dims}) AS distance
               FROM memory_embeddings e {join}
               WHERE e.model = {model} AND e.owner_id = {owner} {where}
               ORDER BY distance LIMIT {chunks})
           SELECT file_id, min(distance) AS distance FROM candidates GROUP BY file_id
           ORDER BY distance, file_id LIMIT {limit}""").format(
        dims=sql.Literal(dims), vector=sql.Literal(_vector_literal(model, vector)), model=sql.Literal(model),
        owner=sql.Literal(int(owner_id)), chunks=sql.Literal(int(limit) * CHUNKS_PER_FILE),
        limit=sql.Literal(int(limit)), join=join, where=where.format(sql.Literal(list(tags))) if tags else where)


def exact_scan_sql(*, tags: bool) -> sql.Composed:
    """The exact path's query (params: vector, owner_id, model, dimension[, tags], limit)."""
    join, where = _tag_filter(tags)
    where = where.format(sql.Placeholder()) if tags else where
    return sql.SQL(
        """SELECT e.file_id, min(e.embedding <=> %s::vector) AS distance
           FROM memory_embeddings e {join}
           WHERE e.owner_id = %s AND e.model = %s AND e.dimension = %s {where}
           GROUP BY e.file_id ORDER BY distance, e.file_id LIMIT %s""").format(join=join, where=where)


def index_scan(conn: Connection, owner_id: int, model: str, vector: Sequence[float], *, limit: int,
               tags: Sequence[str] = ()) -> list[tuple[int, float]]:
    """The index path alone (pgvector >= 0.8, an indexed model): may come back short, see :func:`nearest`.

    One round trip: the scan settings (SET LOCAL: this transaction only; the whole of it when the
    caller holds one) and the query go together."""
    if model not in INDEXED:
        raise ValueError(f"model {model!r} has no HNSW index")
    # relaxed_order: fewer tuples visited than strict_order; the outer query re-orders exactly.
    query = sql.SQL("SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {ef}; {scan}").format(
        ef=sql.Literal(min(max(EF_SEARCH, limit * CHUNKS_PER_FILE), 1000)), scan=index_scan_sql(model, vector, owner_id, limit=limit, tags=tags))
    cur = conn.execute(query)
    while cur.description is None and cur.nextset():  # past the two SETs' results
        pass
    return [(r["file_id"], float(r["distance"])) for r in cur.fetchall()]


def exact_scan(conn: Connection, owner_id: int, model: str, vector: Sequence[float], *, limit: int,
               tags: Sequence[str] = ()) -> list[tuple[int, float]]:
    """The exact path: every chunk of the owner for this model (and size), the true top ``limit`` files."""
    literal = _vector_literal(model, vector)
    params: list[Any] = [literal, owner_id, model, len(vector), *([list(tags)] if tags else []), limit]
    rows = conn.execute(exact_scan_sql(tags=bool(tags)), params).fetchall()
    return [(r["file_id"], float(r["distance"])) for r in rows]


def _tag_filter(tags: bool) -> tuple[sql.SQL, sql.SQL]:
    """The join and condition of a tag filter; the condition's value is ``%s``, or ``{}`` to format."""
    if not tags:
        return sql.SQL(""), sql.SQL("")
    return (sql.SQL("JOIN memory_files f ON f.id = e.file_id AND f.owner_id = e.owner_id"),
            sql.SQL("AND f.tags @> {}::text[]"))


def _vector_literal(model: str, vector: Sequence[float]) -> str:
    """pgvector's text form, after checking the size against the model and that every value is finite."""
    want = INDEXED.get(model)
    if want is not None and len(vector) != want:
        raise VectorSizeError(f"model {model} makes {want}-dimensional vectors, not {len(vector)}")
    if not vector:
        raise VectorSizeError("an empty vector")
    if not all(math.isfinite(x) for x in vector):
        raise ValueError("a vector with a NaN or infinite value")
    return ("[" + ",".join(["%.8g"] * len(vector)) + "]") % tuple(vector)  # one format call: ~0.1 ms for 1536


def export_memory_embeddings(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows (without the vectors: derived data, recomputed from the files) of ``memory_embeddings``, for ``zerg owners export`` (content hashes left out:
    derived, and the export refuses any column named like a hash)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT id, file_id, owner_id, model, dimension, chunk, chunk_start, chunk_end, created_at "
                              "FROM memory_embeddings WHERE owner_id = %s ORDER BY id", (owner_id,))
