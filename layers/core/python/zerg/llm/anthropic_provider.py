"""ChatModel over Anthropic's Messages API with the official ``anthropic`` SDK.

The port's messages (Chat Completions dicts) become Messages blocks: system messages the ``system``
parameter, tool calls ``tool_use`` blocks and tool results ``tool_result`` blocks (ids kept, so a
conversation converted back and forth is the same), consecutive messages of one role one turn.
With a :class:`~zerg.llm.port.TextStream` the call streams (the SDK's ``messages.stream``, which
assembles the final message, tool inputs included, from the events). Prompt caching: ``cache_control``
on the static prefix, the thread and the run's messages up to the first fence
(:mod:`zerg.llm.cache_points`). Usage counts cache reads and writes in ``tokens_in`` (as OpenAI's
``prompt_tokens`` does), cache reads again in ``tokens_cached``; the cost prices each at its rate.
Retries and the time budget are :mod:`zerg.llm.retry`'s (the SDK's own are off). As for OpenAI
(:mod:`zerg.llm.openai_provider`), the conversation rides in ``extra_body``: the SDK's recursive walk
of typed parameters would leave our plain JSON as it is, at a cost on every call.
"""

from __future__ import annotations

import json
from typing import Any

from zerg.llm.cache_points import cache_marks
from zerg.llm.port import ChatResult, StopReason, TextStream, ToolCall, Usage
from zerg.llm.pricing import cost_usd
from zerg.llm.retry import Failure, retry_after, short, status_kind, transport_failure, with_retries
from zerg.llm.wire import content_text, tool_arguments

DEFAULT_MAX_TOKENS = 4096  # the Messages API requires max_tokens; the port's None means "the model's default"
DECLINED = "The model declined to answer."
CONTINUED = "(The conversation so far.)"  # the user turn put before a conversation that starts with the model's
EPHEMERAL = {"type": "ephemeral"}
MAX_TEMPERATURE = 1.0
STOPS: dict[str, StopReason] = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
                                "tool_use": "tool_calls", "max_tokens": "length", "refusal": "refusal"}
RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class AnthropicChatModel:
    def __init__(self, *, api_key: str | None, base_url: str | None = None, max_retries: int = 3,
                 timeout: float = 60.0) -> None:
        import anthropic  # heavy: imported where used

        self._anthropic = anthropic
        self.base_url = base_url or "https://api.anthropic.com"
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
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
        tag: Any = None,
        stream: TextStream | None = None,  # the answer's text as it is written (docs/models.md)
    ) -> ChatResult:
        system, turns = anthropic_messages(messages, tools_as_text=not tools)
        kwargs: dict[str, Any] = {"messages": turns}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = [anthropic_tool(t) for t in tools]
            if tool_choice == "none":
                kwargs["tool_choice"] = {"type": "none"}
        if temperature is not None:  # the port's range is OpenAI's 0-2, the Messages API's 0-1
            kwargs["temperature"] = min(temperature, MAX_TEMPERATURE)
        typed = {"model": model, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS, "messages": []}
        ask = (lambda left: self.client.messages.create(**typed, extra_body=kwargs, timeout=left)) if stream is None \
            else self._streaming(typed, kwargs, stream)
        resp = with_retries(ask, self._classify, model=model, where=self.base_url, timeout=timeout,
                            default_timeout=self.timeout, max_retries=self.max_retries)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in resp.content or []:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, str) else json.dumps(block.input, ensure_ascii=False)
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args))
        content = "".join(texts)
        stop = STOPS.get(resp.stop_reason or "end_turn", "stop")
        if stop == "refusal":
            content = content or DECLINED
        elif calls:
            stop = "tool_calls"
        return ChatResult(model=resp.model or model, content=content, tool_calls=calls,
                          usage=_usage(model, getattr(resp, "usage", None)), stop_reason=stop)

    def _streaming(self, typed: dict[str, Any], kwargs: dict[str, Any], stream: TextStream) -> Any:
        """One attempt of a streamed call: each text delta to ``stream`` as it arrives (a retry after
        text was written restarts it), the final message as the SDK assembled it (tool inputs included)."""
        wrote = False

        def attempt(left: float) -> Any:
            nonlocal wrote
            if wrote:
                stream.restart()
                wrote = False
            with self.client.messages.stream(**typed, extra_body=kwargs, timeout=left) as events:
                for piece in events.text_stream:
                    if piece:
                        wrote = True
                        stream.text(piece)
                return events.get_final_message()

        return attempt

    def _classify(self, exc: BaseException) -> Failure | None:
        anthropic = self._anthropic
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            body = exc.body if isinstance(exc.body, dict) else {}
            said = (body.get("error") or {}).get("message") if isinstance(body.get("error"), dict) else None
            return Failure(status_kind(status), status in RETRYABLE, f"answered HTTP {status}",
                           retry_after(getattr(exc.response, "headers", None)), short(said or exc.message))
        if isinstance(exc, anthropic.APITimeoutError):
            return Failure("timeout", True, "timed out")
        if isinstance(exc, anthropic.APIConnectionError):
            return Failure("unavailable", True, f"is unreachable: {exc}")
        if (broken := transport_failure(exc)) is not None:  # a stream broken while it is read
            return broken
        if isinstance(exc, anthropic.APIError):  # an error event inside a stream
            return Failure("unavailable", True, "sent an error in its stream", said=short(exc.message))
        return None


def _usage(model: str, u: Any) -> Usage:
    if u is None:
        return Usage(0, 0, None)  # no usage: nothing counted, the cost unknown
    read = getattr(u, "cache_read_input_tokens", None) or 0
    written = getattr(u, "cache_creation_input_tokens", None) or 0
    tokens_in = (u.input_tokens or 0) + read + written
    out = u.output_tokens or 0
    return Usage(tokens_in, out, cost_usd(model, tokens_in, out, cached=read, cache_write=written),
                 tokens_cached=read, tokens_cache_write=written)


def anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    return {"name": fn.get("name"), "description": fn.get("description") or "",
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}


def anthropic_messages(messages: list[dict[str, Any]], *,
                       tools_as_text: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, turns) of the port's messages, with the cache marks set. ``tools_as_text``: a call
    offering no tools shows earlier tool calls and results as text (the API refuses ``tool_use`` and
    ``tool_result`` blocks in a request that defines no tools)."""
    system = [{"type": "text", "text": content_text(m.get("content"))} for m in messages
              if m.get("role") == "system" and content_text(m.get("content"))]
    if system:
        system[-1]["cache_control"] = EPHEMERAL
    convo = [m for m in messages if m.get("role") != "system"]
    marks = set(cache_marks(messages))
    names = {c.get("id"): (c.get("function") or {}).get("name", "?")
             for m in convo for c in m.get("tool_calls") or []}
    turns: list[dict[str, Any]] = []
    for i, m in enumerate(convo):
        role, blocks = _blocks(m, names, tools_as_text)
        if not blocks:
            continue
        if i in marks:
            blocks[-1]["cache_control"] = EPHEMERAL
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] == "assistant":  # the API wants a user turn first (a thread cut before one)
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED}]})
    return system, turns


def _blocks(m: dict[str, Any], names: dict[str, str], as_text: bool) -> tuple[str, list[dict[str, Any]]]:
    role = m.get("role")
    text = content_text(m.get("content"))
    if role == "tool":
        if as_text:
            call = m.get("tool_call_id")
            return "user", [{"type": "text", "text": f"[result of tool call {call} ({names.get(call)})]\n{text}"}]
        return "user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": text}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if role == "assistant":
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            if as_text:
                blocks.append({"type": "text", "text": f"[tool call {c.get('id')}: {fn.get('name')} "
                                                       f"{fn.get('arguments') or '{}'}]"})
            else:
                blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name"),
                               "input": tool_arguments(fn.get("arguments"))})
        return "assistant", blocks
    return "user", blocks
