"""OpenAI ``text-embedding-3-small`` (or any OpenAI-compatible ``/v1/embeddings``) through the
official client: the embedder whenever a model key or endpoint is configured, on AWS too.

Invariants:
- No retries inside a call (``max_retries=0``): the caller's timeout is the whole budget, and a
  failed call leaves the file stale for the indexer's next pass instead of retrying now.
- Errors name the model and endpoint, never the key.
"""

from __future__ import annotations

from typing import Any

MODEL = "text-embedding-3-small"
DIMENSION = 1536


class OpenAIEmbedder:
    model = MODEL
    dimension = DIMENSION
    # The model reads 8,191 tokens; a character is at most about one token outside rare scripts.
    max_chars = 8_000

    def __init__(self, *, api_key: str | None, base_url: str | None, timeout: float) -> None:
        import openai  # heavy: imported where used

        self._openai = openai
        self.base_url = base_url or "https://api.openai.com/v1"
        self.client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                    timeout=timeout)

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        from zerg.embeddings.port import EmbeddingError

        # The API rejects empty input; one space embeds as "nothing" just the same.
        inputs = [t if t.strip() else " " for t in texts]
        try:
            resp: Any = self.client.embeddings.create(model=self.model, input=inputs, timeout=timeout)
        except self._openai.APIStatusError as exc:
            raise EmbeddingError(f"{self.model} at {self.base_url} answered HTTP {exc.status_code}: "
                                 f"{str(exc.message)[:300]}") from None
        except self._openai.APITimeoutError:
            raise EmbeddingError(f"{self.model} at {self.base_url} timed out after {timeout:g} s") from None
        except self._openai.APIConnectionError as exc:
            raise EmbeddingError(f"{self.model} unreachable at {self.base_url}: {exc}") from None
        rows = sorted(resp.data, key=lambda d: d.index)
        return [list(map(float, row.embedding)) for row in rows]
