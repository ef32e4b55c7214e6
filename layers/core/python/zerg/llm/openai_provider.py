"""ChatModels over the official ``openai`` client: Chat Completions (OpenAI or any compatible endpoint:
Ollama, vLLM, llama.cpp) and OpenAI's Responses API.

Both take the port's messages (Chat Completions dicts) and tools (function schemas). The Responses
adapter sends the whole conversation every time with ``store: false`` and never a
``previous_response_id``: the conversation's state stays ours (the thread, the run's working
messages), as with every other provider.

Retries and the time budget are :mod:`zerg.llm.retry`'s (the client's own retries are off).

Both stream when the caller passes a :class:`~zerg.llm.port.TextStream`: Chat Completions with
``stream: true`` and ``stream_options.include_usage`` (so the ledger still gets the call's tokens; a server
that refuses that request is asked again without streaming, the text handed over whole), the Responses API
with ``stream: true`` (its final event carries the whole response, read as an unstreamed one).

The conversation and the tools ride in ``extra_body``, not in the typed parameters: the SDK walks typed
parameters recursively against its TypedDicts on every call (5-13 ms for a supervisor-sized request,
docs/performance.md), and ours are already plain JSON of the wire format, which that walk would leave
as they are. The answer is still parsed into the SDK's types, its errors are still its typed errors.
"""

from __future__ import annotations

import json
from typing import Any

from zerg import observability
from zerg.llm.port import ChatResult, LLMError, StopReason, TextStream, ToolCall, Usage, deliver_whole
from zerg.llm.pricing import cost_usd
from zerg.llm.retry import Failure, retry_after, short, status_kind, transport_failure, with_retries

DECLINED = "The model declined to answer."  # a refusal that gave no words of its own


class _OpenAIBase:
    def __init__(self, *, api_key: str | None, base_url: str | None, max_retries: int = 3,
                 timeout: float = 60.0) -> None:
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

    def _call(self, create: Any, typed: dict[str, Any], body: dict[str, Any], model: str,
              timeout: float | None) -> Any:
        """``create(**typed)`` with ``body`` as sent JSON (see the module's note), within the retry policy."""
        return with_retries(lambda left: create(**typed, extra_body=body, timeout=left), self._classify, model=model,
                            where=self.base_url, timeout=timeout, default_timeout=self.timeout,
                            max_retries=self.max_retries)

    def _classify(self, exc: BaseException) -> Failure | None:
        openai = self._openai
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            return Failure(status_kind(status), status in RETRYABLE, f"answered HTTP {status}",
                           retry_after(getattr(exc.response, "headers", None)), short(exc.message))
        if isinstance(exc, openai.APITimeoutError):
            return Failure("timeout", True, "timed out")
        if isinstance(exc, openai.APIConnectionError):
            return Failure("unavailable", True, f"is unreachable: {exc}")
        if (broken := transport_failure(exc)) is not None:  # a stream broken while it is read
            return broken
        if isinstance(exc, openai.APIError):  # an error event inside a stream
            return Failure("unavailable", True, "sent an error in its stream", said=short(exc.message))
        return None


class OpenAIChatModel(_OpenAIBase):
    """Chat Completions: the messages go as they are."""

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
        stream: TextStream | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {"messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if temperature is not None:  # 0 is a choice, not "unset"
            kwargs["temperature"] = temperature
        if stream is not None:
            try:
                return self._streamed(kwargs, model, timeout, stream)
            except LLMError as exc:
                if exc.kind != "rejected":
                    raise
                # A compatible server that refuses streaming (or stream_options): asked again as before.
                observability.logger().warning("streamed call refused: asked without streaming",
                                               extra={"model": model, "reason": str(exc)})
        resp = self._call(self.client.chat.completions.create, {"model": model, "messages": []}, kwargs, model, timeout)
        if not resp.choices:
            raise LLMError(f"model {model} at {self.base_url} returned no choices", "malformed")
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
            for c in (msg.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        return deliver_whole(stream, _chat_result(resp.model or model, model, msg.content or "", calls,
                                                  getattr(msg, "refusal", None), choice.finish_reason, resp.usage))

    def _streamed(self, kwargs: dict[str, Any], model: str, timeout: float | None,
                  stream: TextStream) -> ChatResult:
        """The call as a stream: each piece of content to ``stream`` as it arrives, the result
        assembled from the chunks (tool calls by their index, the usage from the last chunk)."""
        kwargs = {**kwargs, "stream_options": {"include_usage": True}}
        wrote = False

        def attempt(left: float) -> ChatResult:
            nonlocal wrote
            if wrote:  # a retry after a stream that broke off: the text so far is withdrawn
                stream.restart()
                wrote = False
            chunks = self.client.chat.completions.create(model=model, messages=[], stream=True, extra_body=kwargs,
                                                         timeout=left)
            text: list[str] = []
            refusal: list[str] = []
            calls: dict[int, dict[str, str]] = {}
            finish, usage, answered_by = None, None, None
            with chunks:  # closed whatever happens: a StreamStopped ends the HTTP response too
                for chunk in chunks:
                    answered_by = chunk.model or answered_by
                    usage = chunk.usage or usage
                    for choice in chunk.choices[:1]:
                        delta = choice.delta
                        finish = choice.finish_reason or finish
                        if getattr(delta, "refusal", None):
                            refusal.append(delta.refusal)
                        for c in delta.tool_calls or []:
                            call = calls.setdefault(c.index, {"id": "", "name": "", "arguments": ""})
                            call["id"] = c.id or call["id"]
                            if c.function is not None:
                                call["name"] += c.function.name or ""
                                call["arguments"] += c.function.arguments or ""
                        if delta.content:
                            text.append(delta.content)
                            if not calls:  # text beside tool calls is no answer: it is not shown
                                wrote = True
                                stream.text(delta.content)
            if finish is None and not text and not calls and not refusal:
                raise LLMError(f"model {model} at {self.base_url} streamed no choices", "malformed")
            tool_calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"] or "{}")
                          for _, c in sorted(calls.items()) if c["name"]]
            return _chat_result(answered_by or model, model, "".join(text), tool_calls, "".join(refusal) or None,
                                finish, usage)

        return with_retries(attempt, self._classify, model=model, where=self.base_url, timeout=timeout,
                            default_timeout=self.timeout, max_retries=self.max_retries)


def _chat_result(answered_by: str, model: str, content: str, calls: list[ToolCall], refusal: str | None,
                 finish_reason: str | None, u: Any) -> ChatResult:
    """A Chat Completions answer (whole or assembled from a stream) as the port's result."""
    stop: StopReason = CHAT_STOPS.get(finish_reason or "stop", "stop")
    if refusal or stop == "refusal":
        content, stop = content or refusal or DECLINED, "refusal"
    elif calls:
        stop = "tool_calls"
    if u is None:
        usage = Usage(0, 0, None)  # no usage: nothing counted, the cost unknown (never a made-up 0)
    else:
        details = getattr(u, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
        usage = Usage(u.prompt_tokens, u.completion_tokens, cost_usd(model, u.prompt_tokens, u.completion_tokens),
                      tokens_cached=cached)
    return ChatResult(model=answered_by, content=content, tool_calls=calls, usage=usage, stop_reason=stop)


class OpenAIResponsesModel(_OpenAIBase):
    """The Responses API: the conversation as input items, function tools, nothing stored server-side."""

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
        tag: Any = None,
        stream: TextStream | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {"input": responses_input(messages), "store": False}
        if tools:
            kwargs["tools"] = [responses_tool(t) for t in tools]
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if max_tokens:
            kwargs["max_output_tokens"] = max_tokens
        if temperature is not None:
            kwargs["temperature"] = temperature
        if stream is None:
            resp = self._call(self.client.responses.create, {"model": model}, kwargs, model, timeout)
        else:
            resp = with_retries(self._streaming(kwargs, model, stream), self._classify, model=model,
                                where=self.base_url, timeout=timeout, default_timeout=self.timeout,
                                max_retries=self.max_retries)
        texts: list[str] = []
        refusals: list[str] = []
        calls: list[ToolCall] = []
        for item in resp.output or []:
            if item.type == "message":
                for part in item.content or []:
                    if part.type == "output_text":
                        texts.append(part.text)
                    elif part.type == "refusal":
                        refusals.append(part.refusal)
            elif item.type == "function_call":
                calls.append(ToolCall(id=item.call_id, name=item.name, arguments=item.arguments or "{}"))
        reason = getattr(getattr(resp, "incomplete_details", None), "reason", None)
        content = "".join(texts)
        stop: StopReason = "tool_calls" if calls else "stop"
        if refusals or reason == "content_filter":
            content, stop = content or "\n".join(refusals) or DECLINED, "refusal"
        elif reason == "max_output_tokens" and not calls:
            stop = "length"
        u = resp.usage
        if u is None:
            usage = Usage(0, 0, None)
        else:
            details = getattr(u, "input_tokens_details", None)
            cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
            usage = Usage(u.input_tokens, u.output_tokens, cost_usd(model, u.input_tokens, u.output_tokens),
                          tokens_cached=cached)
        return ChatResult(model=resp.model or model, content=content, tool_calls=calls, usage=usage, stop_reason=stop)

    def _streaming(self, kwargs: dict[str, Any], model: str, stream: TextStream) -> Any:
        """One attempt of a streamed call: each ``response.output_text.delta`` to ``stream`` (a retry after
        text was written restarts it), the response of the final event (completed or incomplete)."""
        wrote = False

        def attempt(left: float) -> Any:
            nonlocal wrote
            if wrote:
                stream.restart()
                wrote = False
            final = None
            with self.client.responses.create(model=model, stream=True, extra_body=kwargs, timeout=left) as events:
                for event in events:
                    if event.type == "response.output_text.delta" and event.delta:
                        wrote = True
                        stream.text(event.delta)
                    elif event.type in ("response.completed", "response.incomplete"):
                        final = event.response
                    elif event.type in ("response.failed", "error"):
                        message = getattr(getattr(getattr(event, "response", None), "error", None), "message", None)
                        raise LLMError(f"model {model} at {self.base_url} failed while streaming: "
                                       f"{message or getattr(event, 'message', '')}".rstrip(": "), "unavailable")
            if final is None:
                raise LLMError(f"model {model} at {self.base_url} ended its stream without a response", "malformed")
            return final

        return attempt


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Responses input items (tool calls and results keep their ids)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"),
                          "output": _text(m.get("content"))})
            continue
        text = _text(m.get("content"))
        if text or role != "assistant":
            items.append({"role": role, "content": text})
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"),
                          "arguments": fn.get("arguments") or "{}"})
    return items


def responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    return {"type": "function", "name": fn.get("name"), "description": fn.get("description") or "",
            "parameters": fn.get("parameters") or {"type": "object", "properties": {}}, "strict": False}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: their text
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504})
CHAT_STOPS: dict[str, StopReason] = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls",
                                     "length": "length", "content_filter": "refusal"}
