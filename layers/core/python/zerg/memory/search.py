"""Memory search: full-text rank and vector similarity over one owner's memory files, fused.

Invariants:
- The owner (and the tags: a hit carries EVERY tag asked for) filter each side inside its query,
  before its ORDER BY ... LIMIT: another owner's rows never take a place in the top-k, and a filter
  never shrinks the answer below what the owner has.
- Three signals, each scaled to the best candidate's (so 1 is the best of this search), then
  weighted and added (:func:`combine`; weights chosen on bench.memory_quality's tune split):
  - words: BM25 over the owner's files (:mod:`zerg.memory.terms`), :data:`TEXT_CANDIDATES` of them;
  - nearness: of the query's words to each other in a file (:func:`proximity`: the rarity of the
    distinct query words inside the best window of :data:`WINDOW` words), for those candidates;
  - meaning: the cosine similarity of a file's nearest chunk (:mod:`zerg.memory.vectors`),
    :data:`VECTOR_CANDIDATES` files, scaled between the worst and the best of them.
  Each hit says which side found it: ``fulltext``, ``vector`` or ``both``.
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

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from psycopg.errors import QueryCanceled

from zerg.memory import files, terms, vectors
from zerg.memory.paths import MemoryInputError, check_tags

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

TEXT_CANDIDATES = 50  # BM25's best files, before fusion (at least 4 x limit)
VECTOR_CANDIDATES = 40  # nearest files, before fusion (at least 4 x limit)
WINDOW = 20  # words: about two lines of a conversation
NEARNESS_WORDS = 16  # the query's rarest words nearness looks at (a pasted paragraph: bounded cost)
# On bench.memory_quality's tune split (850 questions), words 1 / nearness 1 / meaning 0.7 with a
# 20-word window was in the plateau of a grid over nearness 0.5-2, meaning 0.3-1, windows 15-30.
WEIGHTS = {"words": 1.0, "nearness": 1.0, "meaning": 0.7}
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
    score: float  # the combined score (see combine): higher is better; comparable within one search only

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


def _note(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _timed_out(what: str) -> None:
    from zerg import observability

    observability.logger().warning(f"memory search: {what} took longer than {SEARCH_TIMEOUT}, left out",
                                   extra={"timeout": SEARCH_TIMEOUT})


def fuse(conn: "Connection", owner_id: int, query: str, *, vector: Sequence[float] | None, model: str | None,
         tags: Sequence[str] = (), limit: int = 5, note: str | None = None) -> SearchOutcome:
    """Full-text (BM25 and nearness) and (given a query vector of ``model``) vector candidates,
    combined, each statement under :data:`SEARCH_TIMEOUT` (full text past it: no full-text
    candidates; any other statement past it raises ``QueryCanceled``)."""
    with conn.transaction():  # SET LOCAL needs a transaction (a savepoint inside the caller's)
        files.limit_time(conn, SEARCH_TIMEOUT)
        parsed = files.text_query(conn, query)
        words: dict[int, float] = {}
        near_words: dict[int, float] = {}
        shown = parsed
        try:
            with conn.transaction():  # a savepoint: a cancelled full-text side leaves the vector side
                words, why = text_side(conn, owner_id, parsed, tags=tags, limit=max(limit * 4, TEXT_CANDIDATES))
                if parsed.lexemes:
                    n, held = terms.rarity(conn, owner_id, parsed.lexemes)
                    idf = {lex: terms.idf(n, df) for lex, df in held.items()}
                    rarest = sorted(idf, key=lambda lex: -idf[lex])[:NEARNESS_WORDS]
                    near_words = proximity(files.positions(conn, owner_id, list(words), rarest), idf)
                    shown = highlight(parsed, n, held)
                note = _note(note, why)
        except QueryCanceled:
            _timed_out("full-text search")
            words, near_words = {}, {}
            note = _note(note, f"full-text search took longer than {SEARCH_TIMEOUT}: no full-text hits")
        methods = ["fulltext"]
        meaning: dict[int, float] = {}
        if vector is not None and model is not None:
            meaning = {file_id: 1.0 - distance for file_id, distance in vectors.nearest(
                conn, owner_id, model, vector, limit=max(limit * 4, VECTOR_CANDIDATES), tags=tags)}
            methods.append("vector")
        scores = combine(words, near_words, meaning)
        # Ties: the full-text one first, then the newer.
        ranked = sorted(scores, key=lambda i: (-scores[i], i not in words, -i))[:limit]
        found = files.excerpts(conn, owner_id, ranked, shown, SNIPPET_CHARS) if ranked else {}
    hits = [Hit(path=found[i]["path"], title=found[i]["title"], snippet=snippet(found[i]["excerpt"] or ""),
                method="both" if i in words and i in meaning else "fulltext" if i in words else "vector",
                score=round(scores[i], 6))
            for i in ranked if i in found]
    return SearchOutcome(hits, methods, note)


def text_side(conn: "Connection", owner_id: int, parsed: files.TextQuery, *, tags: Sequence[str],
              limit: int) -> tuple[dict[int, float], str | None]:
    """The full-text candidates (file id -> score, best first; a substring match scores 1) and a
    note when the strict query found nothing and its words were searched instead."""
    if not parsed.lexemes:
        return {r["id"]: 1.0 for r in files.substring(conn, owner_id, parsed, tags=tags, limit=limit)}, None
    rows = terms.bm25(conn, owner_id, parsed.lexemes, tags=tags, require=parsed.strict, limit=limit)
    note = None
    if parsed.strict and not rows:
        rows = terms.bm25(conn, owner_id, parsed.lexemes, tags=tags, limit=limit)
        note = "no file matches the strict query: files holding any of its words instead"
    return {r["id"]: r["score"] for r in rows}, note


def proximity(found: dict[int, dict[str, list[int]]], idf: dict[str, float], window: int = WINDOW) -> dict[int, float]:
    """For each file (lexeme -> word positions), the most a window of ``window`` consecutive words
    holds: the sum of the rarities (``idf``) of the distinct query words in it. A question's words
    close together (in one line of a conversation) beat the same words scattered over a file."""
    out: dict[int, float] = {}
    for file_id, where in found.items():
        events = sorted((p, lex) for lex, ps in where.items() for p in ps)
        inside: dict[str, int] = {}
        best = held = 0.0
        first = 0
        for position, lex in events:
            if not inside.get(lex):
                held += idf.get(lex, 0.0)
            inside[lex] = inside.get(lex, 0) + 1
            while events[first][0] <= position - window:
                gone = events[first][1]
                inside[gone] -= 1
                if not inside[gone]:
                    held -= idf.get(gone, 0.0)
                first += 1
            best = max(best, held)
        out[file_id] = best
    return out


def highlight(parsed: files.TextQuery, n: int, held: dict[str, int]) -> files.TextQuery:
    """``parsed`` with the words an excerpt should show: those in at most half of the owner's ``n``
    files (``held``: in how many each is) when there are any (a name on every line of every
    session would otherwise pick the excerpt)."""
    if parsed.strict or len(parsed.lexemes) < 2:
        return parsed
    telling = [lex for lex in parsed.lexemes if held.get(lex, 0) * 2 <= n]
    return dataclasses.replace(parsed, match=files.any_of(telling)) if telling else parsed


def combine(words: dict[int, float], nearness: dict[int, float], meaning: dict[int, float],
            weights: dict[str, float] = WEIGHTS) -> dict[int, float]:
    """One score per candidate: each signal scaled to its best candidate's (meaning: between its
    worst and best candidates), weighted by ``weights``, added; a file a signal did not find gets 0
    from it."""
    scaled = {"words": _scaled(words), "nearness": _scaled(nearness), "meaning": _scaled(meaning, spread=True)}
    return {i: sum(weights[name] * scaled[name].get(i, 0.0) for name in scaled) for i in {*words, *meaning}}


def _scaled(scores: dict[int, float], *, spread: bool = False) -> dict[int, float]:
    """``scores`` over the best one (``spread``: from the worst, 0, to the best, 1). All equal:
    1 each (without ``spread``, 0 for a score of 0)."""
    if not scores:
        return {}
    top, low = max(scores.values()), (min(scores.values()) if spread else 0.0)
    if top - low <= 0:
        return {i: 1.0 if v > 0 or spread else 0.0 for i, v in scores.items()}
    return {i: max(0.0, (v - low) / (top - low)) for i, v in scores.items()}


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, cut at a word with an ellipsis."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"
