"""OpenAI ``text-embedding-3-small`` (or any OpenAI-compatible ``/v1/embeddings``) through the
official client: the embedder whenever a model key or endpoint is configured, on AWS too.

Invariants:
- No retries inside a call (``max_retries=0``): the caller's timeout is the whole budget, and a
  failed call leaves the file stale for the indexer's next pass instead of retrying now.
- Errors name the model and endpoint, never the key. An answer that rejects the input itself
  (HTTP 400, 413, 422) is a *refused* :class:`~zerg.embeddings.port.EmbeddingError`: the indexer
  retries that batch file by file and records the file that fails alone.
- Every input is cut to :data:`MAX_BYTES` of UTF-8: the model reads 8,191 tokens, and a token is
  never less than one byte of UTF-8 (byte-level BPE), so 8,000 bytes always fit, whatever the
  script (8,000 CJK characters or emoji are 24-32 KB and far more than 8,191 tokens). ASCII text
  is cut where it was before (8,000 characters).
"""

from __future__ import annotations

from typing import Any

from zerg.embeddings.port import EmbeddingError

MODEL = "text-embedding-3-small"
DIMENSION = 1536
MAX_BYTES = 8_000  # < 8,191 tokens for any text (see the invariants)
REFUSED = frozenset({400, 413, 422})


class OpenAIEmbedder:
    model = MODEL
    dimension = DIMENSION
    max_chars = 8_000  # and MAX_BYTES: for ASCII the two are the same cut

    def __init__(self, *, api_key: str | None, base_url: str | None, timeout: float) -> None:
        import openai  # heavy: imported where used

        self._openai = openai
        self.base_url = base_url or "https://api.openai.com/v1"
        self.client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                    timeout=timeout)

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        # The API rejects empty input; one space embeds as "nothing" just the same.
        inputs = [cut_utf8(t, MAX_BYTES) if t.strip() else " " for t in texts]
        try:
            resp: Any = self.client.embeddings.create(model=self.model, input=inputs, timeout=timeout)
        except self._openai.APIStatusError as exc:
            raise EmbeddingError(f"{self.model} at {self.base_url} answered HTTP {exc.status_code}: "
                                 f"{str(exc.message)[:300]}", refused=exc.status_code in REFUSED) from None
        except self._openai.APITimeoutError:
            raise EmbeddingError(f"{self.model} at {self.base_url} timed out after {timeout:g} s") from None
        except self._openai.APIConnectionError as exc:
            raise EmbeddingError(f"{self.model} unreachable at {self.base_url}: {exc}") from None
        rows = sorted(resp.data, key=lambda d: d.index)
        return [list(map(float, row.embedding)) for row in rows]


def cut_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, on a character boundary."""
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")
