"""Background (re-)embedding of memory files: a file's vector follows its content hash.

Invariants:
- A file is *stale* for the configured embedder's model when it has no vectors of that model, or
  ones computed from another ``content_hash`` (an edit): :func:`embed_pending` embeds stale files
  in batches, each file as its overlapping chunks (:mod:`zerg.memory.chunks`: each within what the
  model reads, the title above each), and replaces the file's vectors with the new chunks' and the
  hash they were computed from. Unchanged content is never embedded twice.
- Until its vector exists a file is still found by full-text search; nothing waits for embedding.
- It never raises into its callers: a transient failure of the embedder (timeout, 429, 5xx,
  unreachable) or of the database stops the pass with one log line and leaves the files stale
  for the next pass, recording nothing.
- One file cannot block the others: when the model refuses a batch's input, the batch is sent
  again file by file; a file refused alone is recorded (``memory_embedding_failures``) and, once
  the same content was refused :data:`~zerg.memory.embed_failures.GIVE_UP_AFTER` times, left
  out of later passes until it is edited. A file is sent at most once per pass.
- No database connection is held while the model runs.
- Passes of one runtime run one at a time (the post-run pass waits for the background one, then
  finds its files embedded), so the same file is not embedded twice at once; across processes
  :func:`zerg.memory.vectors.store` serialises on the file's row.
- Who runs it: locally, :func:`kick` (after a memory write) wakes one background thread per
  process, which coalesces kicks; ``zerg serve``'s housekeeping runs a pass every
  :data:`SWEEP_EVERY_S`. On Lambda :func:`kick` does nothing (a thread would be frozen with the
  container): the post-run Remember step calls :func:`embed_pending` for the run's owner, and
  the ``embed`` housekeeping rule (every 15 minutes) runs :func:`run_sweep` on ingress, which
  starts no batch once the Lambda's ``should_stop`` says its time is nearly up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.embeddings.port import EmbeddingError, background
from zerg.memory import chunks, embed_failures, vectors

if TYPE_CHECKING:
    from zerg.embeddings import Embedder
    from zerg.runtime import Runtime

BATCH = 8  # files per batch
TEXTS_PER_CALL = 8  # chunks per call to the embedder (a batch's files have one or more each)
# A background call is not on anyone's critical path: it gets longer than a query's timeout
# (8 chunks of ~200 tokens are ~1,600 tokens: 1.5-3 s on the local model on 2 busy cores; 32 of
# them took more than 30 s while the test suite ran beside).
BATCH_TIMEOUT_S = 30.0
PASS_LIMIT = 256  # files per pass: a big backlog is worked off over several passes
SWEEP_EVERY_S = 60.0

_passes_lock = threading.Lock()


def _one_pass_at_a_time(rt: "Runtime") -> threading.Lock:
    """The runtime's pass lock, kept on it like its parts (per runtime: a test's runtime never
    waits behind another's pass)."""
    with _passes_lock:
        return rt.__dict__.setdefault("_memory_indexer_pass", threading.Lock())


def embed_pending(rt: "Runtime", *, owner_id: int | None = None, limit: int | None = None,
                  should_stop: Callable[[], bool] | None = None, batch_timeout_s: float | None = None) -> int:
    """Embed up to ``limit`` (default :data:`PASS_LIMIT`) stale files of ``owner_id``, or of every
    owner; returns how many were stored. 0 without an embedder. No batch starts once
    ``should_stop()``; ``batch_timeout_s`` replaces :data:`BATCH_TIMEOUT_S` (a Lambda's margin)."""
    limit = PASS_LIMIT if limit is None else limit
    try:
        embedder = rt.embedder
    except Exception:  # a secret that cannot be read, say: logged, and search stays full-text
        observability.logger().warning("memory indexer: no embedder", exc_info=True)
        return 0
    if embedder is None:
        return 0
    with _one_pass_at_a_time(rt):
        return _pass(rt, embedder, owner_id, limit, should_stop, batch_timeout_s)


def _pass(rt: "Runtime", embedder: "Embedder", owner_id: int | None, limit: int,
          should_stop: Callable[[], bool] | None, batch_timeout_s: float | None) -> int:
    done, tried = 0, set()  # tried: files this pass already sent (a refused one is not sent again now)
    timeout = batch_timeout_s or max(BATCH_TIMEOUT_S, rt.settings.embedding_timeout_s)
    try:
        while done < limit and not (should_stop is not None and should_stop()):
            with rt.pool.connection() as conn:
                files = vectors.stale(conn, embedder.model, owner_id=owner_id, limit=min(BATCH, limit - done),
                                      max_chars=chunks.MAX_CHUNKS * chunks.CHUNK_CHARS, exclude=sorted(tried))
            if not files:
                break
            tried.update(f["file_id"] for f in files)
            with background():  # its own pool: a query's embedding never waits behind this batch
                done += _embed_batch(rt, embedder, files, timeout)
    except Exception as exc:  # a transient EmbeddingError, a database outage: next pass tries again
        observability.logger().warning("memory indexer: pass stopped, files stay stale for the next one", extra={
            "model": embedder.model, "owner_id": owner_id, "embedded": done,
            "reason": f"{type(exc).__name__}: {exc}"})
    return done


def _embed_batch(rt: "Runtime", embedder: "Embedder", files: list[dict[str, Any]], timeout: float) -> int:
    """Store the batch's vectors; if the model refused the batch, each file alone, recording the
    ones it refuses alone. A transient failure raises (the pass stops, nothing recorded)."""
    try:
        _store(rt, embedder, files, _embed(embedder, files, timeout))
        return len(files)
    except EmbeddingError as exc:
        if not exc.refused:
            raise
        if len(files) == 1:
            _refused(rt, embedder, files[0], exc)
            return 0
    stored = 0
    for f in files:  # one of them is refused: find it, and embed the others
        try:
            _store(rt, embedder, [f], _embed(embedder, [f], timeout))
            stored += 1
        except EmbeddingError as exc:
            if not exc.refused:
                raise
            _refused(rt, embedder, f, exc)
    return stored


def _embed(embedder: "Embedder", files: list[dict[str, Any]], timeout: float) -> list[list[vectors.Chunk]]:
    """Each file's chunks with their vectors, in order; :data:`TEXTS_PER_CALL` chunks per call."""
    cut = [chunks.spans(f["content"]) for f in files]
    texts = [chunks.chunk_text(f["title"], f["content"], span) for f, spans in zip(files, cut) for span in spans]
    embedded: list[list[float]] = []
    for i in range(0, len(texts), TEXTS_PER_CALL):
        embedded += embedder.embed(texts[i:i + TEXTS_PER_CALL], timeout=timeout)
    out, at = [], 0
    for spans in cut:
        out.append([vectors.Chunk(start, end, embedded[at + n]) for n, (start, end) in enumerate(spans)])
        at += len(spans)
    return out


def _store(rt: "Runtime", embedder: "Embedder", files: list[dict[str, Any]],
           embedded: list[list[vectors.Chunk]]) -> None:
    with rt.pool.connection() as conn:
        for f, file_chunks in zip(files, embedded):
            vectors.store(conn, f["owner_id"], f["file_id"], embedder.model, file_chunks, f["content_hash"])
            embed_failures.clear(conn, f["owner_id"], f["file_id"], embedder.model)


def _refused(rt: "Runtime", embedder: "Embedder", f: dict[str, Any], exc: EmbeddingError) -> None:
    with rt.pool.connection() as conn:
        attempts = embed_failures.record(conn, f["owner_id"], f["file_id"], embedder.model, f["content_hash"], str(exc))
    observability.logger().warning("memory indexer: the model refused a file", extra={
        "model": embedder.model, "owner_id": f["owner_id"], "file_id": f["file_id"], "attempts": attempts,
        "skipped_from_now": attempts >= embed_failures.GIVE_UP_AFTER, "reason": str(exc)[:300]})


def run_sweep(rt: "Runtime", should_stop: Callable[[], bool] | None = None, *,
              batch_timeout_s: float | None = None) -> dict[str, int]:
    """Housekeeping: passes over every owner's stale files until none is left, a pass falls short
    (the embedder failed) or ``should_stop()`` (checked before every batch); counts for the log."""
    embedded = 0
    while True:
        done = embed_pending(rt, should_stop=should_stop, batch_timeout_s=batch_timeout_s)
        embedded += done
        if done < PASS_LIMIT or (should_stop is not None and should_stop()):
            return {"embedded": embedded}


class _Kicker:
    """One daemon thread that runs :func:`embed_pending` for each owner kicked since its last pass."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, int], tuple["Runtime", int]] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def kick(self, rt: "Runtime", owner_id: int) -> None:
        with self._lock:
            self._pending[(id(rt), owner_id)] = (rt, owner_id)  # coalesced: one pass per owner
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="zerg-memory-indexer", daemon=True)
                self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                work, self._pending = list(self._pending.values()), {}
            for rt, owner_id in work:
                while embed_pending(rt, owner_id=owner_id) == PASS_LIMIT:  # a backlog: keep going
                    pass


_kicker = _Kicker()


def kick(rt: "Runtime", owner_id: int) -> None:
    """Embed the owner's new or changed files soon, off the caller's path. Never raises; a no-op on
    Lambda and without an embedder."""
    from zerg.hosting import lambda_environment

    try:
        if lambda_environment(rt.settings) or rt.embedder is None:
            return
        _kicker.kick(rt, owner_id)
    except Exception:
        observability.logger().warning("memory indexer: kick failed", exc_info=True, extra={"owner_id": owner_id})
