"""What memory search and the indexer need from an embedding model, and nothing more.

Invariants:
- An embedder turns texts into unit-length vectors of its ``dimension``; vectors carry the
  ``model`` that made them, and vectors of different models are never compared (the vector
  store filters on the model name).
- Every call has a hard timeout: :class:`BoundedEmbedder` runs the model on a small shared pool
  of worker threads and the caller waits at most ``timeout`` seconds. A call still running then
  is abandoned (its thread finishes on its own, never joined) and the caller gets an
  :class:`EmbeddingError`, so a slow or failing embedder degrades search to full-text and never
  delays a run by more than the timeout.
- Every failure a caller can see is an :class:`EmbeddingError` (timeout, HTTP error, a missing
  model file, a vector of the wrong size): callers catch that one class and fall back.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Protocol

# The pool the bounded calls run on: two threads (a query embedding at run start and the
# background indexer at once); a stuck call holds one until its own client timeout ends it.
_POOL_THREADS = 2
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


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


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="zerg-embed")
        return _pool


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
        future = _executor().submit(self.inner.embed, texts, timeout=timeout)
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
