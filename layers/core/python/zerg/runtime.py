"""The process's wiring: settings, database pool, artifact store, model and run starter, built
once per process.

Handlers call :func:`get_runtime`; nothing here holds request state, so a Lambda container
(or the local engine) can serve any owner's invocations one after another. The runtime is built
from the settings of the moment it is first asked for; :func:`reset_runtime` (tests, a host that
changes its configuration) closes what it started and forgets it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from zerg.config import Settings, get_settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.alerts.escalation_starter import EscalationStarter
    from zerg.alerts.notifier import Notifier
    from zerg.artifacts import WorkerArtifactStore
    from zerg.embeddings import Embedder
    from zerg.llm import ChatModel
    from zerg.runs.starter import RunStarter
    from zerg.schedules.scheduler import Scheduler
    from zerg.sealing import Sealer


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
        """The configured provider, metered: every tagged call lands in the usage ledger."""
        from zerg.llm.ledger import MeteredChatModel

        return MeteredChatModel(make_llm(self.settings), lambda: self.pool)

    @cached_property
    def embedder(self) -> "Embedder | None":
        """Text to vectors for memory search (ZERG_EMBEDDINGS), with its hard timeout; None: full-text only."""
        from zerg.embeddings import make_embedder

        return make_embedder(self.settings)

    @cached_property
    def sealer(self) -> "Sealer":
        """Seals owners' connector secrets: KMS on AWS, a local key file otherwise."""
        from zerg.sealing import get_sealer

        return get_sealer(self.settings)

    @cached_property
    def notifier(self) -> "Notifier":
        """Email and SMS: SES v2 + SNS on AWS, the outbox under ZERG_DATA_DIR locally (ZERG_NOTIFIER)."""
        from zerg.alerts.notifier import make_notifier

        return make_notifier(self.settings)

    @cached_property
    def starter(self) -> "RunStarter":
        """Step Functions on AWS, the in-process local engine when hosted locally."""
        from zerg.runs.starter import make_starter

        return make_starter(self.settings)

    @cached_property
    def scheduler(self) -> "Scheduler":
        """What makes schedules fire: EventBridge Scheduler with ZERG_SCHEDULE_GROUP, else the local ticker's rows."""
        from zerg.schedules.scheduler import make_scheduler

        return make_scheduler(self.settings, lambda: self.pool)

    @cached_property
    def escalation_starter(self) -> "EscalationStarter":
        """Critical alerts' repeats: Step Functions on AWS, the run starter's local engine otherwise."""
        from zerg.alerts.escalation_starter import make_escalation_starter

        return make_escalation_starter(self.settings, lambda: self.starter)

    def close(self) -> None:
        """Stop what this runtime started (the local engine); the shared pools stay (see db)."""
        self.__dict__.pop("escalation_starter", None)  # its executions run on the starter's engine
        starter = self.__dict__.pop("starter", None)
        if starter is not None:
            starter.close()


def make_llm(settings: Settings) -> "ChatModel":
    if settings.offline:  # no key, no endpoint: the deterministic playbook provider
        from zerg.llm.offline import OfflineChatModel

        return OfflineChatModel(ssh_hosts=list(settings.ssh_hosts))
    from zerg.llm.openai_provider import OpenAIChatModel

    return OpenAIChatModel(
        api_key=openai_api_key(settings),
        base_url=settings.openai_base_url,
        max_retries=settings.llm_max_retries,
        timeout=settings.llm_timeout_s,
    )


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
        arn = settings.openai_secret_arn
        with _keys_lock:
            if arn not in _keys:
                from zerg.aws_clients import short_client

                client = short_client("secretsmanager", timeout_s=SECRET_TIMEOUT_S, attempts=2)
                _keys[arn] = client.get_secret_value(SecretId=arn)["SecretString"]
            key = _keys[arn]
    return key


_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide runtime, built on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = Runtime(get_settings())
        return _runtime


def reset_runtime() -> None:
    """Close and forget the process-wide runtime; the next :func:`get_runtime` builds a new one
    from the settings of that moment."""
    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    with _keys_lock:
        _keys.clear()
    if runtime is not None:
        runtime.close()
