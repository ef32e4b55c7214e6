"""The ``chat`` span of every model call, at the model port: :class:`TracedChatModel` wraps whichever
provider the runtime chose (:func:`zerg.wiring.metered_llm`), so every provider is traced alike.

One span per :meth:`ChatModel.complete` made inside a run's invocation (elsewhere the call passes
through untouched): ``chat {request model}``, kind CLIENT, with the provider, the request and
response models, the tokens in / out / served from the prompt cache, the finish reasons, the cost
(``zerg.cost_usd``) and, only when content capture is on, the messages in and out.
"""

from __future__ import annotations

import json
from typing import Any

from zerg import tracing
from zerg.llm.port import CallTag, ChatModel, ChatResult, TextStream

# A model string's provider prefix ("bedrock:…", "anthropic:…") and the semantic conventions' name for it.
PROVIDERS = {"openai": "openai", "openai-chat": "openai", "anthropic": "anthropic", "bedrock": "aws.bedrock",
             "offline": "zerg.offline"}


def own_name(llm: Any) -> str | None:
    """The ``provider_name`` a provider declares, found through the wrappers (the ledger's) around it."""
    while llm is not None:
        named = getattr(type(llm), "provider_name", None) or getattr(llm, "__dict__", {}).get("provider_name")
        if isinstance(named, str) and named:
            return named
        llm = getattr(llm, "__dict__", {}).get("inner")
    return None


def provider_name(llm: Any, model: str, named: str | None = None) -> str:
    """The ``gen_ai.provider.name`` of a call: the provider's own ``provider_name`` when it has one,
    else the model string's ``provider:`` prefix, else OpenAI (Chat Completions, the default)."""
    named = named if named is not None else own_name(llm)
    if named:
        return named
    prefix, sep, _ = model.partition(":")
    return PROVIDERS.get(prefix, prefix) if sep else "openai"


def finish_reasons(result: ChatResult) -> list[str]:
    """The provider's own reason when it reports one (``finish_reason``/``stop_reason``), else what
    the answer shows: tool calls, or a complete answer."""
    for name in ("finish_reasons", "finish_reason", "stop_reason"):
        value = getattr(result, name, None)
        if isinstance(value, str) and value:
            return [SEMCONV_REASONS.get(value, value)]
        if isinstance(value, (list, tuple)) and value:
            return [SEMCONV_REASONS.get(str(v), str(v)) for v in value]
    return ["tool_call" if result.tool_calls else "stop"]


# The port's stop reasons (zerg.llm.port.StopReason) in the GenAI conventions' words.
SEMCONV_REASONS = {"tool_calls": "tool_call", "refusal": "content_filter"}


class TracedChatModel:
    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self._named = own_name(inner)  # once: the wrappers do not change

    def __getattr__(self, name: str) -> Any:  # the provider's other attributes (e.g. provider_name)
        return getattr(self.inner, name)

    def complete(self, messages: list[dict[str, Any]], *, model: str, tools: list[dict[str, Any]] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, timeout: float | None = None,
                 tool_choice: str | None = None, tag: CallTag | None = None,
                 stream: TextStream | None = None) -> ChatResult:
        extra = {"stream": stream} if stream is not None else {}  # a ChatModel of old need not know the word
        call = lambda: self.inner.complete(messages, model=model, tools=tools, max_tokens=max_tokens,  # noqa: E731
                                           temperature=temperature, timeout=timeout, tool_choice=tool_choice, tag=tag,
                                           **extra)
        if not tracing.in_run():
            return call()
        opts = tracing.options()
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat", opts.provider_key: provider_name(self.inner, model, self._named),
            "gen_ai.request.model": model, "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": temperature,
            tracing.JOB_ID: tag.job_id if tag is not None else None,
            "zerg.component": tag.component if tag is not None else None,
            "zerg.streamed": stream is not None,
        }
        if opts.capture_content:
            attrs["gen_ai.input.messages"] = tracing.content(json.dumps(messages, default=str))
        with tracing.span(f"chat {model}", attrs, kind="client") as span:
            result = call()  # an exception marks the span error (the SDK records it) and passes through
            if span is not None:
                u = result.usage
                span.set_attribute("gen_ai.response.model", result.model)
                span.set_attribute("gen_ai.usage.input_tokens", u.tokens_in)
                span.set_attribute("gen_ai.usage.output_tokens", u.tokens_out)
                span.set_attribute("gen_ai.usage.cache_read.input_tokens", u.tokens_cached)
                span.set_attribute("gen_ai.response.finish_reasons", finish_reasons(result))
                if u.cost_usd is not None:
                    span.set_attribute(tracing.COST_USD, u.cost_usd)
                if opts.capture_content:
                    span.set_attribute("gen_ai.output.messages",
                                       tracing.content(json.dumps([result.as_message()], default=str)))
            return result
