"""Which provider serves a model: ``provider:model`` ids, the provider of a bare name, and the one
line a misconfigured provider fails with.

A model id is ``provider:model`` when the part before the first ``:`` is one of :data:`PROVIDERS`
(``bedrock:amazon.nova-pro-v1:0``, ``anthropic:claude-haiku-4-5``, ``openai:gpt-4.1`` for the
Responses API, ``openai-chat:llama3.1:8b`` for Chat Completions at ``OPENAI_BASE_URL``). Any other id
is a bare name for ``ZERG_MODEL_PROVIDER``'s provider (:attr:`zerg.config.Settings.default_provider`;
``auto``: Chat Completions with an OpenAI key or endpoint, else offline), as before issue 28. A
word-only prefix that names no provider (``gemini:…``) is refused as an unknown provider, unless the
bare names go to a compatible server of its own (``OPENAI_BASE_URL``), whose ids carry ``:tags``
(``mistral:latest``), or it is an OpenAI fine-tune (``ft:…``).

:class:`ProviderRouter` is the one :class:`~zerg.llm.port.ChatModel` the runtime holds: each call goes
to its model's provider, built on first use and kept. :func:`check_model` is the fail-fast check:
the configuration a model needs (a key, a region) is there, else :class:`ModelConfigError` with one
line naming what to set.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from zerg.config import ConfigError, Settings
from zerg.llm.port import ChatModel, ChatResult, LLMError

PROVIDERS = ("bedrock", "anthropic", "openai", "openai-chat", "offline")
_WORD = re.compile(r"[a-z][a-z-]*")


class ModelConfigError(ConfigError):
    """A model that cannot be asked as configured; the message is one line saying what to set."""


def split(model: str, settings: Settings) -> tuple[str, str]:
    """(provider, the model id that provider is sent) of ``model``."""
    head, sep, rest = model.partition(":")
    if sep and head in PROVIDERS:
        if not rest:
            raise ModelConfigError(f"model {model!r}: no model id after {head}:")
        return head, rest
    default = settings.default_provider
    tagged = default == "openai-chat" and bool(settings.openai_base_url)
    if sep and _WORD.fullmatch(head) and head != "ft" and not tagged:
        raise ModelConfigError(f"model {model!r}: unknown provider {head!r} (use bedrock:, anthropic:, openai:, "
                               "openai-chat: or a bare model name)")
    return default, model


def check_model(settings: Settings, model: str) -> tuple[str, str]:
    """``split(model)``, after checking the provider has what it needs (no network call)."""
    provider, name = split(model, settings)
    if provider == "anthropic" and not (settings.anthropic_api_key or settings.anthropic_secret_arn):
        raise ModelConfigError(f"model {model!r} needs ANTHROPIC_API_KEY (or ZERG_ANTHROPIC_SECRET_ARN on AWS)")
    if provider == "bedrock" and not settings.region_for_bedrock:
        raise ModelConfigError(f"model {model!r} needs a region: set ZERG_BEDROCK_REGION (or AWS_REGION)")
    if provider == "bedrock" and settings.bedrock_model_ids:  # AWS: the role may invoke these and no others
        allowed = sorted({m.strip() for m in settings.bedrock_model_ids.split(",") if m.strip()})
        if name not in allowed:
            raise ModelConfigError(f"model {model!r} is not one this deployment may invoke on Bedrock "
                                   f"(ZERG_BEDROCK_MODEL_IDS: {', '.join(allowed)}; the CDK app's bedrock_models adds more)")
    if provider in ("openai", "openai-chat") and not (
            settings.openai_api_key or settings.openai_secret_arn or settings.openai_base_url):
        raise ModelConfigError(f"model {model!r} needs OPENAI_API_KEY (or ZERG_OPENAI_SECRET_ARN on AWS, or "
                               "OPENAI_BASE_URL for a compatible server)")
    return provider, name


def deployment_models(settings: Settings) -> dict[str, str]:
    """The models the deployment's settings name, by variable."""
    models = {"ZERG_SUPERVISOR_MODEL": settings.supervisor_model, "ZERG_WORKER_MODEL": settings.worker_model,
              "ZERG_SUMMARY_MODEL": settings.summary_model}
    if not settings.offline:  # with no model the intent and quick calls are never made
        models["ZERG_INTENT_MODEL"] = settings.intent_model
        if settings.quick_model:
            models["ZERG_QUICK_MODEL"] = settings.quick_model
    return models


def check_settings(settings: Settings) -> None:
    """Every model the deployment's settings name can be asked (start-up: one line otherwise)."""
    for variable, model in deployment_models(settings).items():
        try:
            check_model(settings, model)
        except ModelConfigError as exc:
            raise ModelConfigError(f"{variable}: {exc}") from None


def make_provider(settings: Settings, provider: str) -> ChatModel:
    """One provider's adapter, unmetered (the router's factory)."""
    if provider == "offline":
        from zerg.llm.offline import OfflineChatModel

        return OfflineChatModel(ssh_hosts=list(settings.ssh_hosts))
    retries, timeout = settings.llm_max_retries, settings.llm_timeout_s
    if provider == "anthropic":
        from zerg.llm.anthropic_provider import AnthropicChatModel
        from zerg.llm.keys import anthropic_api_key

        return AnthropicChatModel(api_key=anthropic_api_key(settings), base_url=settings.anthropic_base_url,
                                  max_retries=retries, timeout=timeout)
    if provider == "bedrock":
        from zerg.llm.bedrock_provider import BedrockChatModel

        return BedrockChatModel(region=settings.region_for_bedrock, endpoint_url=settings.bedrock_endpoint_url,
                                max_retries=retries, timeout=timeout)
    from zerg.llm.keys import openai_api_key
    from zerg.llm.openai_provider import OpenAIChatModel, OpenAIResponsesModel

    cls = OpenAIResponsesModel if provider == "openai" else OpenAIChatModel
    return cls(api_key=openai_api_key(settings), base_url=settings.openai_base_url, max_retries=retries,
               timeout=timeout)


class ProviderRouter:
    """The runtime's ChatModel: each call to its model's provider (made on first use, then kept)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._providers: dict[str, ChatModel] = {}
        self._lock = threading.Lock()
        self.provider(settings.default_provider)  # made now: its key is read (and its region checked) at start-up

    def provider(self, name: str) -> ChatModel:
        made = self._providers.get(name)
        if made is None:
            with self._lock:
                made = self._providers.get(name)
                if made is None:
                    made = self._providers[name] = make_provider(self.settings, name)
        return made

    def complete(self, messages: list[dict[str, Any]], *, model: str, **kwargs: Any) -> ChatResult:
        try:
            provider, name = check_model(self.settings, model)
        except ModelConfigError as exc:  # e.g. a worker model the supervisor named: that call fails, as a model error
            raise LLMError(str(exc), "rejected") from None
        return self.provider(provider).complete(messages, model=name, **kwargs)


# The providers that serve each family of the price table (zerg.llm.pricing.PRICES), for the choices offered.
_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("amazon.", ("bedrock",)), ("anthropic.", ("bedrock",)), ("claude-", ("anthropic",)),
    ("gpt-", ("openai", "openai-chat")), ("o1", ("openai", "openai-chat")), ("o3", ("openai", "openai-chat")),
    ("o4", ("openai", "openai-chat")),
)


def model_choices(settings: Settings) -> list[dict[str, Any]]:
    """The models an owner may pick for an agent: the deployment's own model settings, then every
    chat model of the price table as ``provider:model`` for each provider the deployment can reach
    (:func:`check_model` passes: its key, region or allowed Bedrock ids), with the price per million
    tokens (None when unknown). Other ids stay allowed (a compatible server's own); this is a menu."""
    from zerg.llm.pricing import PRICES, price_for

    def entry(model: str, source: str) -> dict[str, Any]:
        try:
            provider: str | None = split(model, settings)[0]
        except ModelConfigError:
            provider = None
        price = price_for(model)
        return {"id": model, "provider": provider, "source": source,
                "usd_per_million_in": price[0] if price else None, "usd_per_million_out": price[1] if price else None}

    choices: dict[str, dict[str, Any]] = {}
    for variable, model in deployment_models(settings).items():
        if model in choices:
            choices[model]["source"] += f", {variable}"
        else:
            choices[model] = entry(model, variable)
    for name in PRICES:
        if "embed" in name:  # an embedding model answers no chat
            continue
        providers = next((p for prefix, p in _FAMILIES if name.startswith(prefix)), ())
        for provider in providers:
            model = f"{provider}:{name}"
            try:
                check_model(settings, model)
            except ModelConfigError:
                continue
            choices.setdefault(model, entry(model, "price table"))
    return list(choices.values())
