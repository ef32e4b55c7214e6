"""ChatModel over the official ``openai`` client (OpenAI or any compatible endpoint).

Retries (429, 408/409, 5xx, connection errors) back off exponentially (or as the server's
Retry-After says), at most ``max_retries`` times, and never past the call's ``timeout``: the
timeout is the whole call's budget, retries included, so a 5-second summary stays a 5-second
summary. (The client's own retries do not know that budget, so they are switched off.) After
that an :class:`LLMError` names the model, endpoint and cause.
"""

from __future__ import annotations

import time
from typing import Any

from zerg.llm.port import ChatResult, LLMError, ToolCall, Usage
from zerg.llm.pricing import cost_usd


class OpenAIChatModel:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int = 3,
        timeout: float = 60.0,
    ) -> None:
        import openai  # heavy: imported where used

        self._openai = openai
        self.base_url = base_url or "https://api.openai.com/v1"
        self.client = openai.OpenAI(
            api_key=api_key or "not-needed",  # local OpenAI-compatible servers ignore it
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
        )
        self.max_retries = max_retries
        self.timeout = timeout

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        tool_choice: str | None = None,
        tag: Any = None,  # the ledger's concern, not the provider's
    ) -> ChatResult:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if temperature is not None:  # 0 is a choice, not "unset"
            kwargs["temperature"] = temperature
        resp = self._create(kwargs, model, timeout)
        if not resp.choices:
            raise LLMError(f"model {model} at {self.base_url} returned no choices")
        msg = resp.choices[0].message
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
            for c in (msg.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        tokens_in = resp.usage.prompt_tokens if resp.usage else 0
        tokens_out = resp.usage.completion_tokens if resp.usage else 0
        details = getattr(resp.usage, "prompt_tokens_details", None) if resp.usage else None
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
        return ChatResult(
            model=resp.model or model,
            content=msg.content or "",
            tool_calls=calls,
            usage=Usage(tokens_in, tokens_out, cost_usd(model, tokens_in, tokens_out), tokens_cached=cached),
        )

    def _create(self, kwargs: dict[str, Any], model: str, timeout: float | None) -> Any:
        openai = self._openai
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = 0
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise LLMError(f"model {model} at {self.base_url} timed out after {timeout:g}s")
            try:
                return self.client.chat.completions.create(**kwargs, timeout=left or self.timeout)
            except openai.APIStatusError as exc:
                if exc.status_code not in RETRYABLE or attempt >= self.max_retries:
                    raise LLMError(
                        f"model {model} at {self.base_url} answered HTTP {exc.status_code} "
                        f"after {attempt} retries: {_short(exc.message)}"
                    ) from None
                delay = _retry_after(exc)
            except openai.APITimeoutError:
                if deadline is not None or attempt >= self.max_retries:
                    raise LLMError(f"model {model} at {self.base_url} timed out") from None
                delay = None
            except openai.APIConnectionError as exc:
                if attempt >= self.max_retries:
                    raise LLMError(
                        f"model {model} unreachable at {self.base_url} after {attempt} retries: {exc}"
                    ) from None
                delay = None
            delay = min(MAX_DELAY_S, delay if delay is not None else 0.5 * 2**attempt)
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise LLMError(f"model {model} at {self.base_url} kept failing; no time left to retry within {timeout:g}s")
            time.sleep(delay)
            attempt += 1


RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_DELAY_S = 8.0


def _retry_after(exc: Any) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except ValueError:
        return None
    return None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
