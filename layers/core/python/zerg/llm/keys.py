"""The model keys: ``OPENAI_API_KEY``, else (AWS) the secret named by ``ZERG_OPENAI_SECRET_ARN``, read once
per process and shared by the chat model, the embedder and the Realtime session minting; likewise
``ANTHROPIC_API_KEY`` / ``ZERG_ANTHROPIC_SECRET_ARN``. Bedrock has no key: the IAM role signs."""

from __future__ import annotations

import threading

from zerg.config import Settings

# Reading the key from Secrets Manager sits on a run's path (the model, the query embedding):
# short timeouts and one retry, and the key is read once per runtime (make_llm and the
# embedder share it; reset_runtime forgets it).
SECRET_TIMEOUT_S = 3.0
_keys: dict[str, str] = {}
_keys_lock = threading.Lock()


def openai_api_key(settings: Settings) -> str | None:
    """OPENAI_API_KEY, else (AWS) the key in ZERG_OPENAI_SECRET_ARN's secret; None for a keyless endpoint."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if key is None and settings.openai_secret_arn:  # AWS: the key lives in Secrets Manager
        key = _secret(settings.openai_secret_arn)
    return key


def anthropic_api_key(settings: Settings) -> str | None:
    """ANTHROPIC_API_KEY, else (AWS) the key in ZERG_ANTHROPIC_SECRET_ARN's secret; None: not configured."""
    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
    if key is None and settings.anthropic_secret_arn:
        key = _secret(settings.anthropic_secret_arn)
    return key


def _secret(arn: str) -> str:
    with _keys_lock:
        if arn not in _keys:
            from zerg.aws_clients import short_client

            client = short_client("secretsmanager", timeout_s=SECRET_TIMEOUT_S, attempts=2)
            _keys[arn] = client.get_secret_value(SecretId=arn)["SecretString"]
        return _keys[arn]


def forget_keys() -> None:
    """Forget the keys read (a runtime rebuilt must read them again)."""
    with _keys_lock:
        _keys.clear()
