"""Amazon Titan Text Embeddings V2 on Bedrock (``bedrock-runtime`` ``invoke_model``): the embedder on
AWS when Bedrock serves the models and no OpenAI key is configured. The IAM role signs; the region and
endpoint are the chat provider's (``ZERG_BEDROCK_REGION``, ``ZERG_BEDROCK_ENDPOINT_URL``).

Invariants (as for :mod:`zerg.embeddings.openai`):
- No retries inside a call: the caller's timeout is the whole budget (botocore's retries are off,
  one attempt whose read timeout is that budget).
- Titan embeds one text per request: a batch is that many requests, in order, within the budget.
- Every input is cut to :data:`MAX_CHARS` (the model reads 8,192 tokens, at most 50,000 characters);
  vectors are normalised by the model (``normalize: true``), 1,024 dimensions.
- A request the model refuses (``ValidationException``: the input itself) is a *refused*
  :class:`~zerg.embeddings.port.EmbeddingError`, so the indexer retries the batch file by file.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from zerg.embeddings.port import EmbeddingError

MODEL = "amazon.titan-embed-text-v2:0"
DIMENSION = 1024
MAX_CHARS = 8_000


class BedrockEmbedder:
    model = MODEL
    dimension = DIMENSION
    max_chars = MAX_CHARS

    def __init__(self, *, region: str | None, endpoint_url: str | None = None, timeout: float) -> None:
        import boto3  # heavy: imported where used
        import botocore.exceptions
        from botocore.config import Config

        self._errors = botocore.exceptions
        self.where = endpoint_url or f"bedrock-runtime.{region}"
        seconds = max(1, math.ceil(timeout))
        self.client = boto3.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url,
                                   config=Config(connect_timeout=min(5, seconds), read_timeout=seconds,
                                                 retries={"total_max_attempts": 1, "mode": "standard"}))

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        deadline = time.monotonic() + timeout
        vectors = []
        for text in texts:
            if time.monotonic() >= deadline:
                raise EmbeddingError(f"{self.model} at {self.where} timed out after {timeout:g} s")
            vectors.append(self._one(text[:MAX_CHARS] if text.strip() else " "))
        return vectors

    def _one(self, text: str) -> list[float]:
        errors = self._errors
        body = json.dumps({"inputText": text, "dimensions": DIMENSION, "normalize": True})
        try:
            resp: Any = self.client.invoke_model(modelId=self.model, body=body, contentType="application/json",
                                                 accept="application/json")
        except errors.ClientError as exc:
            error = exc.response.get("Error") or {}
            code = error.get("Code") or "HTTP"
            raise EmbeddingError(f"{self.model} at {self.where} answered {code}: {str(error.get('Message'))[:300]}",
                                 refused=code == "ValidationException") from None
        except (errors.ReadTimeoutError, errors.ConnectTimeoutError):
            raise EmbeddingError(f"{self.model} at {self.where} timed out") from None
        except (errors.EndpointConnectionError, errors.ConnectionClosedError) as exc:
            raise EmbeddingError(f"{self.model} unreachable at {self.where}: {exc}") from None
        answer = json.loads(resp["body"].read())
        return [float(x) for x in answer["embedding"]]
