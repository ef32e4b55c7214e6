"""What memory search and the indexer need from an embedding model, and nothing more.

Invariants:
- An embedder turns texts into unit-length vectors of its ``dimension``; vectors carry the
  ``model`` that made them, and vectors of different models are never compared (the vector
  store filters on the model name).
- Every call has a hard timeout: :class:`BoundedEmbedder` runs the model on a small pool of
  worker threads and the caller waits at most ``timeout`` seconds. A call still running then
  is abandoned (its thread finishes on its own, never joined) and the caller gets an
  :class:`EmbeddingError`, so a slow or failing embedder degrades search to full-text and never
  delays a run by more than the timeout. The one exception is a local model's one-time load
  (``warm``, seconds, once per process), done before the timed call: a first search on a slow
  machine must not lose its vector to loading the weights.
- Queries never wait behind batches: calls made inside :func:`background` (the indexer) run on
  their own pool, a query's on another.
- The pools' threads are daemon threads: a process exits without waiting for an abandoned call
  (``concurrent.futures`` pools are joined at interpreter exit); the local model's own exit hook
  waits for a pass in flight (:mod:`zerg.embeddings.local`).
- Every failure a caller can see is an :class:`EmbeddingError` (timeout, HTTP error, a missing
  model file, a vector of the wrong size): callers catch that one class and fall back.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

# Two threads per pool: a query embedding at run start and a search at once; the background
# indexer's kicker and sweep. A stuck call holds a thread until its own client timeout ends it.
_POOL_THREADS = 2
_pools: dict[str, "_DaemonPool"] = {}
_pools_lock = threading.Lock()
_background: contextvars.ContextVar[bool] = contextvars.ContextVar("zerg_embed_background", default=False)


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Embedding calls in this block are background work (the indexer's batches): they run on the
    background pool, so a query's call never queues behind them."""
    token = _background.set(True)
    try:
        yield
    finally:
        _background.reset(token)


class _DaemonPool:
    """A fixed set of daemon threads taking calls off one queue (see the module's invariants)."""

    def __init__(self, name: str, threads: int) -> None:
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, fn))
        return future

    def _work(self) -> None:
        while True:
            future, fn = self._queue.get()
            if not future.set_running_or_notify_cancel():  # cancelled while queued: never starts
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 -- whatever it is, the caller sees it
                future.set_exception(exc)


def _executor() -> _DaemonPool:
    kind = "background" if _background.get() else "query"
    with _pools_lock:
        if kind not in _pools:
            _pools[kind] = _DaemonPool(f"zerg-embed-{kind}", _POOL_THREADS)
        return _pools[kind]


class EmbeddingError(RuntimeError):
    """The embedder gave no vectors (timeout, unreachable, bad answer); the message says why.

    ``refused``: the model rejected the input itself (HTTP 400, 413, 422) and would reject it
    again; anything else (timeout, 429, 5xx, unreachable, a local model failing) is transient."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class Embedder(Protocol):
    model: str  # the name stored with each vector (memory_embeddings.model)
    dimension: int
    max_chars: int  # longer input is cut here first: the model reads no further anyway

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        """One unit vector per text, in order, within ``timeout`` seconds, or :class:`EmbeddingError`."""
        ...


class BoundedEmbedder:
    """Wraps an embedder so each call returns within its timeout, whatever the model does."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimension = inner.dimension
        self.max_chars = inner.max_chars

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        if not texts:
            return []
        texts = [t[: self.max_chars] for t in texts]
        inner = self.inner
        warm = getattr(inner, "warm", None)
        if warm is not None:  # a local model's one-time load is not what the timeout bounds
            try:
                warm()
            except Exception as exc:
                raise EmbeddingError(f"{self.model}: {type(exc).__name__}: {exc}") from exc
        future = _executor().submit(lambda: inner.embed(texts, timeout=timeout))
        try:
            vectors = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # still queued behind stuck calls: never starts; running: abandoned
            raise EmbeddingError(f"{self.model}: no answer within {timeout:g} s") from None
        except EmbeddingError:
            raise
        except Exception as exc:  # the model's own failure, whatever its type
            raise EmbeddingError(f"{self.model}: {type(exc).__name__}: {exc}") from exc
        if len(vectors) != len(texts) or any(len(v) != self.dimension for v in vectors):
            raise EmbeddingError(f"{self.model}: expected {len(texts)} vectors of {self.dimension} dimensions")
        return vectors
