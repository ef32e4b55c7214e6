"""ChatModel over the official ``openai`` client (OpenAI or any compatible endpoint).

Retries (429, 408/409, 5xx, connection errors) are the client's own exponential backoff,
``max_retries`` times; after that an :class:`LLMError` names the model, endpoint and cause.
"""

from __future__ import annotations

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
            max_retries=max_retries,
            timeout=timeout,
        )
        self.max_retries = max_retries

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        tool_choice: str | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if timeout is not None:
            kwargs["timeout"] = max(0.1, timeout)
        openai = self._openai
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise LLMError(
                f"model {model} at {self.base_url} answered HTTP {exc.status_code} "
                f"after {self.max_retries} retries: {_short(exc.message)}"
            ) from None
        except openai.APITimeoutError:
            raise LLMError(f"model {model} at {self.base_url} timed out") from None
        except openai.APIConnectionError as exc:
            raise LLMError(
                f"model {model} unreachable at {self.base_url} after {self.max_retries} retries: {exc}"
            ) from None
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
        return ChatResult(
            model=resp.model or model,
            content=msg.content or "",
            tool_calls=calls,
            usage=Usage(tokens_in, tokens_out, cost_usd(model, tokens_in, tokens_out)),
        )


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
