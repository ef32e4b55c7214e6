"""The one composition root: which adapter serves each port, and what follows a run's close.

Entry points (the Lambda handlers, the API, the command line, the local host) ask
:func:`get_runtime` for the process's :class:`~zerg.runtime.Runtime`; everything below them takes
the runtime they are handed and builds nothing. Here, and only here:

- each part of the runtime is made from the settings (:data:`FACTORIES`): Step Functions or the
  local engine for runs and escalations, EventBridge Scheduler or the database's rows for
  schedules, SES/SNS or the outbox for email and SMS, the model provider metered by the usage
  ledger with the owner's spending cap checked before every call (:mod:`zerg.alerts.budget`);
- what approving a directive does is registered by kind (:func:`zerg.approvals.appliers.register`),
  by dotted path like the subscribers below;
- what follows a run's close is subscribed by trigger (:func:`zerg.runs.closing.subscribe`): a
  background run's inbox item and alerts, a reply's answer on its channel, the answer mail of every
  other run that asked for it. By dotted path, imported on the first close that needs it, so a
  Lambda cold start imports none of them.

The local host (``zerg.local``) is not imported from here: it registers its own run starter with
:func:`use_local_engine` when it loads, and the Lambda layer, which does not ship it, needs
``ZERG_STATE_MACHINE_ARN``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import tracing
from zerg.approvals import appliers
from zerg.config import ConfigError, Settings, get_settings
from zerg.runs import closing
from zerg.runtime import Factory, Runtime
from zerg.statuses import BACKGROUND_TRIGGERS, REPLY_TRIGGERS

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.artifacts import WorkerArtifactStore
    from zerg.embeddings import Embedder
    from zerg.llm import ChatModel
    from zerg.ports import EscalationStarter, Notifier, RunStarter, Scheduler
    from zerg.sealing import Sealer

closing.subscribe("zerg.alerts.background:on_close", triggers=BACKGROUND_TRIGGERS)
closing.subscribe("zerg.inbound.replies:on_close", triggers=REPLY_TRIGGERS)
closing.subscribe("zerg.alerts.completion_mail:on_close", triggers=None)
# A directive the owner approved (by any channel: API, CLI, SMS code, email, web, their "yes") is made
# by the directives' own code, a layer above the approvals that dispatch it.
appliers.register("directive", "zerg.inbound.directives:apply_approved")


def make_llm(settings: Settings) -> "ChatModel":
    """The model providers, unmetered: each call to its model's provider (``provider:model``, a bare name
    to ZERG_MODEL_PROVIDER's: offline without a key or endpoint, else OpenAI's Chat Completions).
    The deployment's own models are checked first: a provider they need but lack (a key, a region)
    fails here with one line (:class:`zerg.llm.providers.ModelConfigError`)."""
    from zerg.llm.providers import ProviderRouter, check_settings

    check_settings(settings)
    return ProviderRouter(settings)


def metered_llm(rt: Runtime) -> "ChatModel":
    """The provider, metered: every tagged call lands in the usage ledger, after the owner's cap and
    the run's budget (:func:`zerg.alerts.budget.before_call`)."""
    from zerg.alerts.budget import before_call
    from zerg.llm.ledger import MeteredChatModel

    metered = MeteredChatModel(make_llm(rt.settings), lambda: rt.pool, cap_check=before_call(rt.settings))
    if not tracing.active():
        return metered
    from zerg.tracing.model import TracedChatModel

    return TracedChatModel(metered)  # the chat span of every call, whichever the provider (docs/tracing.md)


def make_embedder(settings: Settings) -> "Embedder | None":
    """The configured embedder with its hard timeout, or None (memory search is full-text only)."""
    from zerg import embeddings
    from zerg.embeddings.port import BoundedEmbedder

    choice = embeddings.choose(settings)
    if choice.kind is None:
        if choice.broken:
            from zerg import observability

            observability.logger().warning("no embedder: memory search is full-text only",
                                           extra={"reason": choice.reason})
        return None
    if choice.kind == "openai":
        from zerg.embeddings.openai import OpenAIEmbedder
        from zerg.llm.keys import openai_api_key

        return BoundedEmbedder(OpenAIEmbedder(api_key=openai_api_key(settings), base_url=settings.openai_base_url,
                                              timeout=settings.embedding_timeout_s))
    if choice.kind == "bedrock":
        from zerg.embeddings.bedrock import BedrockEmbedder

        return BoundedEmbedder(BedrockEmbedder(region=settings.region_for_bedrock,
                                               endpoint_url=settings.bedrock_endpoint_url,
                                               timeout=settings.embedding_timeout_s))
    from zerg.embeddings.local import LocalEmbedder

    return BoundedEmbedder(LocalEmbedder())


def make_notifier(settings: Settings) -> "Notifier":
    """ZERG_NOTIFIER: ``local`` writes the outbox under ZERG_DATA_DIR, ``aws`` sends with SES v2 and SNS."""
    if settings.notifier == "aws":
        from zerg.notify.channels.notifier import AwsNotifier
        from zerg.notify.channels.ses import SesEmail
        from zerg.notify.channels.sns import SnsSms

        return AwsNotifier(SesEmail(), SnsSms(origination=settings.sms_origination))
    from zerg.notify.channels.outbox import OutboxNotifier

    return OutboxNotifier(settings.data_dir / "outbox")


_local_starter: Callable[[Settings], "RunStarter"] | None = None


def use_local_engine(starter: Callable[[Settings], "RunStarter"]) -> None:
    """The local host's run starter, for a process without ``ZERG_STATE_MACHINE_ARN`` (``zerg.local``
    calls this when it loads)."""
    global _local_starter
    _local_starter = starter


def make_starter(settings: Settings) -> "RunStarter":
    """Step Functions when ``ZERG_STATE_MACHINE_ARN`` is set, else the local host's engine."""
    if settings.state_machine_arn:
        from zerg.runs.stepfunctions import StepFunctionsStarter

        return StepFunctionsStarter(settings)
    if _local_starter is None:  # the Lambda layer has no local engine: AWS must name the state machine
        raise ConfigError("ZERG_STATE_MACHINE_ARN is not set and the local engine is not installed")
    return _local_starter(settings)


def make_scheduler(settings: Settings, pool: Callable[[], "ConnectionPool"]) -> "Scheduler":
    """EventBridge Scheduler when ZERG_SCHEDULE_GROUP is set (with its role, target and DLQ), else the ticker's rows."""
    if not settings.schedule_group:
        from zerg.schedules.scheduler import LocalScheduler

        return LocalScheduler(pool)
    settings.check()  # the role, the target and the DLQ are set (ConfigError naming the missing one otherwise)
    from zerg.schedules.eventbridge import EventBridgeScheduler

    return EventBridgeScheduler(settings.schedule_group, role_arn=settings.scheduler_role_arn or "",
                                target_arn=settings.schedule_target_arn or "", dlq_arn=settings.schedule_dlq_arn or "")


def make_escalation_starter(settings: Settings, run_starter: Callable[[], Any]) -> "EscalationStarter":
    """Step Functions when ``ZERG_ESCALATION_STATE_MACHINE_ARN`` is set, else the local engine of
    ``run_starter()`` (the runtime's run starter, asked for lazily)."""
    from zerg.alerts import escalation_starter

    if settings.escalation_state_machine_arn:
        return escalation_starter.StepFunctionsEscalationStarter(settings)
    return escalation_starter.LocalEscalationStarter(run_starter)


def _pool(rt: Runtime) -> "ConnectionPool":
    from zerg.db import get_pool

    return get_pool(rt.settings)


def make_store(settings: Settings | None = None) -> "WorkerArtifactStore":
    """The artifact store the configuration names (local directory or S3 bucket)."""
    settings = settings or get_settings()
    if settings.artifact_backend == "s3":
        from zerg.artifacts.s3 import S3ArtifactStore

        return S3ArtifactStore(settings.artifact_bucket or "")
    from zerg.artifacts.local import LocalArtifactStore

    return LocalArtifactStore(settings.artifact_root)


def make_sealer(settings: Settings | None = None) -> "Sealer":
    """KMS when ``ZERG_KMS_KEY_ID`` is set; else AES-GCM under ``ZERG_DATA_DIR/sealing.key``, refused
    on Lambda, where the data dir does not outlive the container."""
    from zerg import hosting
    from zerg.sealing import LOCAL_KEY_FILE, SealError

    settings = settings or get_settings()
    if settings.kms_key_id:
        from zerg.sealing.kms import KMSSealer

        return KMSSealer(settings.kms_key_id)
    if hosting.may_be_lambda(settings):
        raise SealError("ZERG_KMS_KEY_ID must be set on Lambda: a local key file would not outlive the container")
    from zerg.sealing.local import LocalSealer

    return LocalSealer(settings.data_dir / LOCAL_KEY_FILE)


FACTORIES: dict[str, Factory] = {
    "pool": _pool,
    "store": lambda rt: make_store(rt.settings),
    "llm": metered_llm,
    "embedder": lambda rt: make_embedder(rt.settings),
    "sealer": lambda rt: make_sealer(rt.settings),
    "notifier": lambda rt: make_notifier(rt.settings),
    "starter": lambda rt: make_starter(rt.settings),
    "scheduler": lambda rt: make_scheduler(rt.settings, lambda: rt.pool),
    "escalation_starter": lambda rt: make_escalation_starter(rt.settings, lambda: rt.starter),
}


def build_runtime(settings: Settings) -> Runtime:
    """A runtime for ``settings`` with every part made as configured (on first use)."""
    return Runtime(settings, FACTORIES)


_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide runtime, built on first use from the settings of that moment."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime(get_settings())
            runtime = _runtime
            from zerg.tracing.setup import configure

            configure(runtime.settings, lambda: runtime.pool)  # OpenTelemetry is loaded only when tracing is on
        return _runtime


def reset_runtime() -> None:
    """Close and forget the process-wide runtime (tests, a host that changed its configuration);
    the next :func:`get_runtime` builds a new one, and reads the model key again."""
    from zerg.llm.keys import forget_keys

    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    forget_keys()
    if runtime is not None:
        from zerg.tracing.setup import shutdown

        shutdown()  # what was recorded is exported before the runtime's pool closes
        runtime.close()
