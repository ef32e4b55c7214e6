"""The process's wiring: settings, database pool, artifact store and model, built once.

Handlers call :func:`get_runtime`; nothing here holds request state, so a Lambda container
(or the local engine) can serve any owner's invocations one after another.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from zerg.config import Settings, get_settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.artifacts import WorkerArtifactStore
    from zerg.llm import ChatModel


@dataclass
class Runtime:
    settings: Settings

    @cached_property
    def pool(self) -> "ConnectionPool":
        from zerg.db import get_pool

        return get_pool(self.settings)

    @cached_property
    def store(self) -> "WorkerArtifactStore":
        from zerg.artifacts import get_store

        return get_store(self.settings)

    @cached_property
    def llm(self) -> "ChatModel":
        return make_llm(self.settings)


def make_llm(settings: Settings) -> "ChatModel":
    if settings.offline:  # no key, no endpoint: the deterministic playbook provider
        from zerg.llm.offline import OfflineChatModel

        return OfflineChatModel(ssh_hosts=list(settings.ssh_hosts))
    from zerg.llm.openai_provider import OpenAIChatModel

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if key is None and settings.openai_secret_arn:  # AWS: the key lives in Secrets Manager
        import boto3

        key = boto3.client("secretsmanager").get_secret_value(SecretId=settings.openai_secret_arn)["SecretString"]
    return OpenAIChatModel(
        api_key=key,
        base_url=settings.openai_base_url,
        max_retries=settings.llm_max_retries,
        timeout=settings.llm_timeout_s,
    )


_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    """The process-wide runtime; rebuilt when the settings object changed (tests)."""
    global _runtime
    settings = get_settings()
    if _runtime is None or _runtime.settings is not settings:
        _runtime = Runtime(settings)
    return _runtime
