"""Memory search: full-text rank and vector similarity over one owner's memory files, fused.

Invariants:
- The owner (and the tags: a hit carries EVERY tag asked for) filter each side inside its query,
  before its ORDER BY ... LIMIT: another owner's rows never take a place in the top-k, and a filter
  never shrinks the answer below what the owner has.
- Both sides fetch ``4 x limit`` candidates; reciprocal rank fusion (k = 60) merges the two
  rankings. Each hit says which side found it: ``fulltext``, ``vector`` or ``both``.
- The query is embedded before any database work, outside any transaction, within the embedder's
  hard timeout (``ZERG_EMBEDDING_TIMEOUT_S``). No embedder, or an :class:`~zerg.embeddings.EmbeddingError` (timeout, outage): the
  search is full-text only and says why (``SearchOutcome.note``); it never fails for it.
- Only vectors of the query's own model are compared (the vector side filters on the model name).
- Snippets are short (at most 300 characters): an excerpt around the query's words, else the start.
- Bounded in time: every statement of a search runs under :data:`SEARCH_TIMEOUT` (it sits on a
  run's critical path: recall at plan and at every resume). Full text past it gives no full-text
  hits and a note (the vector side still answers); anything else past it gives no hits and a note.
  Either way it is logged, and the search returns.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from psycopg.errors import QueryCanceled

from zerg.memory import files, vectors
from zerg.memory.paths import MemoryInputError, check_tags

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

RRF_K = 60
CANDIDATES_PER_HIT = 4
SNIPPET_CHARS = 300
MAX_LIMIT = 50
MAX_QUERY_CHARS = 1_000
METHODS = ("fulltext", "vector", "both")
SEARCH_TIMEOUT = "2s"  # per statement (PostgreSQL interval syntax)


class QueryEmbedder(Protocol):
    """What search needs of an embedder (the embeddings port's ``Embedder``)."""

    model: str

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]: ...


@dataclass(frozen=True)
class Hit:
    path: str
    title: str
    snippet: str
    method: str  # fulltext, vector or both
    score: float  # the fused reciprocal-rank score: higher is better

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "snippet": self.snippet, "method": self.method,
                "score": self.score}


@dataclass(frozen=True)
class SearchOutcome:
    hits: list[Hit]
    methods: list[str]  # the sides that ran: ["fulltext"] or ["fulltext", "vector"]
    note: str | None = None  # why a side did not run or answer (no embedder, a timeout), when one did not


def check_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise MemoryInputError("query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise MemoryInputError(f"query is {len(query)} characters; at most {MAX_QUERY_CHARS}")
    if "\x00" in query:
        raise MemoryInputError("query contains the NUL character")
    return query.strip()


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise MemoryInputError(f"limit must be between 1 and {MAX_LIMIT}, not {limit!r}")
    return limit


def embed_query(embedder: QueryEmbedder | None, query: str, timeout_s: float) -> tuple[list[float] | None, str | None]:
    """(the query's vector, None), or (None, why there is none)."""
    if embedder is None:
        return None, "no embedder is configured: full-text search only"
    from zerg.embeddings import EmbeddingError

    started = time.monotonic()
    try:
        (vector,) = embedder.embed([query], timeout=timeout_s)
    except EmbeddingError as exc:
        from zerg import observability

        observability.logger().warning("memory search: query not embedded, full-text only", extra={
            "reason": str(exc)[:300], "elapsed_ms": int((time.monotonic() - started) * 1000)})
        return None, f"the embedder failed ({str(exc)[:200]}): full-text search only"
    return vector, None


def runtime_embedder(rt: "Runtime") -> QueryEmbedder | None:
    """The runtime's embedder; None (full-text only) when there is none or it cannot be built."""
    try:
        return rt.embedder
    except Exception:  # e.g. the model key's secret cannot be read: search still answers, by full text
        from zerg import observability

        observability.logger().warning("memory search: no embedder, full-text only", exc_info=True)
        return None


_RUNTIME: Any = object()  # "the runtime's embedder" (None means: none)


def search_memory(rt: "Runtime", owner_id: int, query: str, *, tags: Any = (), limit: int = 5,
                  embedder: QueryEmbedder | None = _RUNTIME, timeout_s: float | None = None) -> SearchOutcome:
    """The owner's best ``limit`` files for ``query`` (with every tag in ``tags``). The embedder is
    the runtime's unless one is given (None: full-text only); ``timeout_s`` bounds embedding the
    query (default ``ZERG_EMBEDDING_TIMEOUT_S``; the embedder enforces it)."""
    query, tags, limit = check_query(query), check_tags(list(tags)), check_limit(limit)
    if embedder is _RUNTIME:
        embedder = runtime_embedder(rt)
    timeout_s = rt.settings.embedding_timeout_s if timeout_s is None else timeout_s
    vector, note = embed_query(embedder, query, timeout_s)  # before the transaction: never holds a connection
    model = embedder.model if vector is not None else None
    try:
        with rt.pool.connection() as conn:
            return fuse(conn, owner_id, query, vector=vector, model=model, tags=tags, limit=limit, note=note)
    except QueryCanceled:  # outside the connection's block: the aborted transaction is rolled back
        _timed_out("search")
        return SearchOutcome([], ["fulltext"] + (["vector"] if model else []),
                             _note(note, f"the search took longer than {SEARCH_TIMEOUT}: no hits"))


def search(rt: "Runtime", owner_id: int, query: str, *, tags: Any = (), limit: int = 5,
           embedder: QueryEmbedder | None = _RUNTIME) -> list[Hit]:
    """Just the hits of :func:`search_memory`."""
    return search_memory(rt, owner_id, query, tags=tags, limit=limit, embedder=embedder).hits


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the rankings holding it."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def _note(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _timed_out(what: str) -> None:
    from zerg import observability

    observability.logger().warning(f"memory search: {what} took longer than {SEARCH_TIMEOUT}, left out",
                                   extra={"timeout": SEARCH_TIMEOUT})


def fuse(conn: "Connection", owner_id: int, query: str, *, vector: Sequence[float] | None, model: str | None,
         tags: Sequence[str] = (), limit: int = 5, note: str | None = None) -> SearchOutcome:
    """Full-text and (given a query vector of ``model``) vector candidates, fused by rank, each
    statement under :data:`SEARCH_TIMEOUT` (full text past it: no full-text candidates; any other
    statement past it raises ``QueryCanceled``)."""
    candidates = limit * CANDIDATES_PER_HIT
    with conn.transaction():  # SET LOCAL needs a transaction (a savepoint inside the caller's)
        files.limit_time(conn, SEARCH_TIMEOUT)
        parsed = files.text_query(conn, query)
        try:
            with conn.transaction():  # a savepoint: a cancelled full-text side leaves the vector side
                text_ids = [r["id"] for r in files.fulltext(conn, owner_id, parsed, tags=tags, limit=candidates)]
        except QueryCanceled:
            _timed_out("full-text search")
            text_ids, note = [], _note(note, f"full-text search took longer than {SEARCH_TIMEOUT}: no full-text hits")
        methods = ["fulltext"]
        vector_ids: list[int] = []
        if vector is not None and model is not None:
            vector_ids = [file_id for file_id, _ in vectors.nearest(conn, owner_id, model, vector, limit=candidates,
                                                                    tags=tags)]
            methods.append("vector")
        scores = rrf([text_ids, vector_ids])
        text_set, vector_set = set(text_ids), set(vector_ids)
        # Ties (one file found by each side at the same rank): the full-text one first, then the newer.
        ranked = sorted(scores, key=lambda i: (-scores[i], i not in text_set, -i))[:limit]
        found = files.excerpts(conn, owner_id, ranked, parsed, SNIPPET_CHARS) if ranked else {}
    hits = [Hit(path=found[i]["path"], title=found[i]["title"], snippet=snippet(found[i]["excerpt"] or ""),
                method="both" if i in text_set and i in vector_set else "fulltext" if i in text_set else "vector",
                score=round(scores[i], 6))
            for i in ranked if i in found]
    return SearchOutcome(hits, methods, note)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, cut at a word with an ellipsis."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"
