"""ChatModel over Amazon Bedrock's Converse API (boto3 ``bedrock-runtime`` ``converse``).

Credentials are the process's IAM ones (the Lambda's role; locally the usual AWS chain): there is no
API key. The region is ``ZERG_BEDROCK_REGION`` (else ``AWS_REGION``); ``ZERG_BEDROCK_ENDPOINT_URL``
points the client elsewhere (a VPC endpoint, the tests' loopback server).

The port's messages become Converse messages: system messages the ``system`` blocks, tool calls
``toolUse`` blocks, tool results ``toolResult`` blocks (ids kept), consecutive messages of one role
one message, tools a ``toolConfig``. Prompt caching: a ``cachePoint`` after the static prefix, the
thread and the run's messages up to the first fence (:mod:`zerg.llm.cache_points`), for the model
families Bedrock caches for (Anthropic Claude, Amazon Nova); others get none (Bedrock refuses them).

Converse has no "use no tool" choice, and refuses ``toolUse`` blocks without a ``toolConfig``: a call
with ``tool_choice="none"`` shows the earlier tool calls and results as text and offers no tools.

Retries and the time budget are :mod:`zerg.llm.retry`'s (botocore's are off: one attempt per call).
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

from zerg.llm.cache_points import cache_marks
from zerg.llm.port import ChatResult, ErrorKind, StopReason, TextStream, ToolCall, Usage, deliver_whole
from zerg.llm.pricing import cost_usd
from zerg.llm.retry import Failure, short, status_kind, with_retries
from zerg.llm.wire import content_text, tool_arguments

DECLINED = "The model declined to answer."
CONTINUED = "(The conversation so far.)"  # the user turn put before a conversation that starts with the model's
CACHE_POINT = {"cachePoint": {"type": "default"}}
MAX_TEMPERATURE = 1.0
CACHING_FAMILIES = ("anthropic.claude", "amazon.nova")
STOPS: dict[str, StopReason] = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                                "max_tokens": "length", "guardrail_intervened": "refusal",
                                "content_filtered": "refusal"}
# Bedrock's error codes: (kind, retryable).
ERRORS: dict[str, tuple[ErrorKind, bool]] = {
    "ThrottlingException": ("throttled", True),
    "ModelNotReadyException": ("throttled", True),
    "ServiceQuotaExceededException": ("throttled", False),
    "InternalServerException": ("unavailable", True),
    "ServiceUnavailableException": ("unavailable", True),
    "ModelTimeoutException": ("timeout", True),
    "ModelErrorException": ("unavailable", False),
    "ValidationException": ("rejected", False),
    "AccessDeniedException": ("rejected", False),
    "ResourceNotFoundException": ("rejected", False),
    "UnrecognizedClientException": ("rejected", False),
}


class BedrockChatModel:
    def __init__(self, *, region: str | None, endpoint_url: str | None = None, max_retries: int = 3,
                 timeout: float = 60.0) -> None:
        import boto3  # heavy: imported where used
        import botocore.exceptions

        self._boto3 = boto3
        self._errors = botocore.exceptions
        self.region = region
        self.endpoint_url = endpoint_url
        self.where = endpoint_url or f"bedrock-runtime.{region}"
        self.max_retries = max_retries
        self.timeout = timeout
        self._clients: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._client(timeout)  # made now: a missing region fails at startup, not on the first call

    def _client(self, read_timeout: float) -> Any:
        """A client whose read timeout is ``read_timeout`` (rounded up to a second; one per value)."""
        key = max(1, math.ceil(read_timeout))
        with self._lock:
            if key not in self._clients:
                from botocore.config import Config

                # parameter_validation off: the request is ours, built from the port's messages; Bedrock
                # validates it anyway (ValidationException), and botocore's walk of it costs ~0.5 ms a call.
                config = Config(connect_timeout=min(5, key), read_timeout=key, tcp_keepalive=True,
                                parameter_validation=False, retries={"total_max_attempts": 1, "mode": "standard"})
                self._clients[key] = self._boto3.client("bedrock-runtime", region_name=self.region,
                                                        endpoint_url=self.endpoint_url, config=config)
            return self._clients[key]

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
        stream: TextStream | None = None,  # not streamed (no ConverseStream yet): the whole text, once
    ) -> ChatResult:
        offer_tools = bool(tools) and tool_choice != "none"
        system, turns = converse_messages(messages, caching=caches(model), tools_as_text=not offer_tools)
        kwargs: dict[str, Any] = {"modelId": model, "messages": turns}
        if system:
            kwargs["system"] = system
        if offer_tools:
            kwargs["toolConfig"] = {"tools": [converse_tool(t) for t in tools or []]}
        inference: dict[str, Any] = {}
        if max_tokens:
            inference["maxTokens"] = max_tokens
        if temperature is not None:  # the port's range is OpenAI's 0-2; Bedrock's models take 0-1
            inference["temperature"] = min(temperature, MAX_TEMPERATURE)
        if inference:
            kwargs["inferenceConfig"] = inference
        resp = with_retries(lambda left: self._client(left).converse(**kwargs), self._classify, model=model,
                            where=self.where, timeout=timeout, default_timeout=self.timeout,
                            max_retries=self.max_retries)
        message = (resp.get("output") or {}).get("message") or {}
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.get("content") or []:
            if "text" in block:
                texts.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                raw = use.get("input")
                args = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
                calls.append(ToolCall(id=use.get("toolUseId"), name=use.get("name"), arguments=args))
        content = "".join(texts)
        stop = STOPS.get(resp.get("stopReason") or "end_turn", "stop")
        if stop == "refusal":
            content = content or DECLINED
        elif calls:
            stop = "tool_calls"
        return deliver_whole(stream, ChatResult(model=model, content=content, tool_calls=calls,
                                                usage=_usage(model, resp.get("usage")), stop_reason=stop))

    def _classify(self, exc: BaseException) -> Failure | None:
        errors = self._errors
        if isinstance(exc, errors.ClientError):
            error = exc.response.get("Error") or {}
            code = error.get("Code") or ""
            status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
            kind, retryable = ERRORS.get(code, (status_kind(status), status >= 500 or status in (408, 429)))
            return Failure(kind, retryable, f"answered HTTP {status} {code}".rstrip(), None,
                           short(error.get("Message") or ""))
        if isinstance(exc, (errors.ReadTimeoutError, errors.ConnectTimeoutError)):
            return Failure("timeout", True, "timed out")
        if isinstance(exc, (errors.EndpointConnectionError, errors.ConnectionClosedError)):
            return Failure("unavailable", True, f"is unreachable: {exc}")
        if isinstance(exc, errors.NoCredentialsError):
            return Failure("rejected", False, "has no AWS credentials to sign with (the IAM role or AWS_* variables)")
        return None


def caches(model: str) -> bool:
    """Whether Bedrock caches prompts for ``model`` (a geographic profile prefix such as ``us.`` aside)."""
    return any(family in model for family in CACHING_FAMILIES)


def _usage(model: str, u: dict[str, Any] | None) -> Usage:
    if not u:
        return Usage(0, 0, None)  # no usage: nothing counted, the cost unknown
    read = int(u.get("cacheReadInputTokens") or 0)
    written = int(u.get("cacheWriteInputTokens") or 0)
    tokens_in = int(u.get("inputTokens") or 0) + read + written
    out = int(u.get("outputTokens") or 0)
    return Usage(tokens_in, out, cost_usd(model, tokens_in, out, cached=read, cache_write=written),
                 tokens_cached=read, tokens_cache_write=written)


def converse_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    return {"toolSpec": {"name": fn.get("name"), "description": fn.get("description") or fn.get("name") or "",
                         "inputSchema": {"json": fn.get("parameters") or {"type": "object", "properties": {}}}}}


def converse_messages(messages: list[dict[str, Any]], *, caching: bool = True,
                      tools_as_text: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) of the port's messages, with the cache points set when ``caching``."""
    system: list[dict[str, Any]] = [{"text": content_text(m.get("content"))} for m in messages
                                    if m.get("role") == "system" and content_text(m.get("content"))]
    if system and caching:
        system.append(dict(CACHE_POINT))
    convo = [m for m in messages if m.get("role") != "system"]
    marks = set(cache_marks(messages)) if caching else set()
    names = {c.get("id"): (c.get("function") or {}).get("name", "?")
             for m in convo for c in m.get("tool_calls") or []}
    turns: list[dict[str, Any]] = []
    for i, m in enumerate(convo):
        role, blocks = _blocks(m, names, tools_as_text)
        if not blocks:
            continue
        if i in marks:
            blocks.append(dict(CACHE_POINT))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] == "assistant":  # the API wants a user turn first (a thread cut before one)
        turns.insert(0, {"role": "user", "content": [{"text": CONTINUED}]})
    return system, turns


def _blocks(m: dict[str, Any], names: dict[str, str], as_text: bool) -> tuple[str, list[dict[str, Any]]]:
    role = m.get("role")
    text = content_text(m.get("content"))
    if role == "tool":
        if as_text:
            return "user", [{"text": f"[result of tool call {m.get('tool_call_id')} ({names.get(m.get('tool_call_id'))})]\n"
                                     f"{text}"}]
        return "user", [{"toolResult": {"toolUseId": m.get("tool_call_id"), "content": [{"text": text or "(empty)"}]}}]
    blocks: list[dict[str, Any]] = [{"text": text}] if text else []
    if role == "assistant":
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            if as_text:
                blocks.append({"text": f"[tool call {c.get('id')}: {fn.get('name')} {fn.get('arguments') or '{}'}]"})
            else:
                blocks.append({"toolUse": {"toolUseId": c.get("id"), "name": fn.get("name"),
                                           "input": tool_arguments(fn.get("arguments"))}})
        return "assistant", blocks
    return "user", blocks
