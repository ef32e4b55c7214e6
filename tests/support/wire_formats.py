"""The wire formats the scripted model server speaks beside Chat Completions: Anthropic Messages
(``POST /v1/messages``), OpenAI Responses (``POST /v1/responses``) and Bedrock Converse
(``POST /model/{modelId}/converse``).

Each format has two halves, so that one script drives every provider:

- ``*_to_chat(request)``: the request as the Chat Completions request it stands for (system, user,
  assistant with ``tool_calls``, ``tool`` messages; function tools; ``tool_choice``), which is what
  the server records in ``requests`` and what the responders (tests/support/scripts.py) read;
- ``*_events(body, pieces)``: Anthropic's and Responses' answer as the event stream of a ``"stream": true``
  request (:data:`STREAMED`): the text in ``pieces``, tool inputs in two halves, the whole answer at the end;
- ``*_answer(spec, request)``: a script entry (``{"content"}``, ``{"tool_calls": [(name, args)]}`` where
  ``args`` is a dict or raw text, ``{"refusal": text}``, ``{"no_usage": True}``) as that format's answer,
  ``*_error(spec)`` an ``{"status", "message"}`` entry as that format's error (Bedrock's error code in
  ``x-amzn-ErrorType``, from the status unless the entry names a ``code``).

Prompt caching is played too: the request's prefix up to its last cache mark (``cache_control`` /
``cachePoint``) is a cache write the first time the server sees it, a cache read afterwards.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from typing import Any

_ids = itertools.count(1)


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


class PromptCache:
    """Which cache prefixes the server has seen: the first time a write, afterwards a read."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, prefixes: list[list[Any]], total: int) -> tuple[int, int, int]:
        """(plain input, cache read, cache write) tokens of a request of ``total`` tokens whose cache
        marks end ``prefixes`` (shortest first): the longest prefix seen before is read, the rest up to
        the last mark written."""
        if not prefixes:
            return total, 0, 0
        keys = [hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest() for p in prefixes]
        sizes = [min(total, _tokens(p)) for p in prefixes]
        with self._lock:
            read = max((size for key, size in zip(keys, sizes) if key in self._seen), default=0)
            self._seen.update(keys)
        write = max(0, sizes[-1] - read)
        return total - read - write, read, write


def _completion_tokens(spec: dict[str, Any]) -> int:
    return _tokens([spec.get("content"), spec.get("refusal"), [list(c) for c in spec.get("tool_calls") or []]])


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


# --- Anthropic Messages -----------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type", "text") == "text")


def anthropic_to_chat(req: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if req.get("system"):
        messages.append({"role": "system", "content": _text_of(req["system"])})
    for turn in req.get("messages") or []:
        blocks = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        if turn["role"] == "assistant":
            text = "".join(b["text"] for b in blocks if b["type"] == "text")
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                     for b in blocks if b["type"] == "tool_use"]
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                messages.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text_of(b.get("content"))})
            elif b["type"] == "text":
                messages.append({"role": "user", "content": b["text"]})
    chat: dict[str, Any] = {"model": req.get("model"), "messages": messages, "max_tokens": req.get("max_tokens")}
    if req.get("tools"):
        chat["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t.get("description"),
                                                           "parameters": t.get("input_schema")}} for t in req["tools"]]
    if (req.get("tool_choice") or {}).get("type") == "none":
        chat["tool_choice"] = "none"
    if "temperature" in req:
        chat["temperature"] = req["temperature"]
    return chat


def _anthropic_prefixes(req: dict[str, Any]) -> list[list[Any]]:
    """The request up to each ``cache_control`` mark (tools, system, messages, in cache order)."""
    parts: list[Any] = [req.get("tools") or []]
    marks = []
    system = req.get("system")
    for block in system if isinstance(system, list) else []:
        parts.append(block)
        if block.get("cache_control"):
            marks.append(len(parts))
    for turn in req.get("messages") or []:
        for block in turn["content"] if isinstance(turn["content"], list) else []:
            parts.append([turn["role"], block])
            if block.get("cache_control"):
                marks.append(len(parts))
    return [parts[:m] for m in marks]


def anthropic_answer(spec: dict[str, Any], req: dict[str, Any], cache: PromptCache) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    text = spec.get("refusal") or spec.get("content")
    if text:
        content.append({"type": "text", "text": text})
    for name, args in spec.get("tool_calls") or []:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name,
                        "input": args})  # raw text stays text: the malformed-arguments case
    stop = "refusal" if spec.get("refusal") else ("tool_use" if spec.get("tool_calls") else "end_turn")
    body: dict[str, Any] = {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant",
                            "model": req.get("model", "scripted"), "content": content, "stop_reason": stop,
                            "stop_sequence": None}
    if not spec.get("no_usage"):
        plain, read, write = cache.usage(_anthropic_prefixes(req), _tokens(req.get("messages")) + _tokens(req.get("system")))
        body["usage"] = {"input_tokens": plain, "output_tokens": _completion_tokens(spec),
                         "cache_read_input_tokens": read, "cache_creation_input_tokens": write}
    return body


def anthropic_error(spec: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    status = spec["status"]
    kind = {429: "rate_limit_error", 529: "overloaded_error", 400: "invalid_request_error",
            401: "authentication_error"}.get(status, "api_error")
    return status, {"type": "error", "error": {"type": kind, "message": spec.get("message", "error")}}, {
        "retry-after-ms": "1"}


# --- OpenAI Responses -------------------------------------------------------------------------------
def responses_to_chat(req: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for item in req.get("input") or []:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        else:
            messages.append({"role": item["role"], "content": _text_of(item.get("content")) or None})
    chat: dict[str, Any] = {"model": req.get("model"), "messages": messages}
    if req.get("tools"):
        chat["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t.get("description"),
                                                           "parameters": t.get("parameters")}} for t in req["tools"]]
    for key, chat_key in (("tool_choice", "tool_choice"), ("max_output_tokens", "max_tokens"),
                          ("temperature", "temperature")):
        if key in req:
            chat[chat_key] = req[key]
    return chat


def responses_answer(spec: dict[str, Any], req: dict[str, Any], cache: PromptCache) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if spec.get("refusal"):
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "status": "completed", "role": "assistant",
                       "content": [{"type": "refusal", "refusal": spec["refusal"]}]})
    elif spec.get("content"):
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": spec["content"], "annotations": []}]})
    for name, args in spec.get("tool_calls") or []:
        n = next(_ids)
        output.append({"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
                       "arguments": _args_text(args), "status": "completed"})
    body: dict[str, Any] = {"id": f"resp_{next(_ids)}", "object": "response", "created_at": 0,
                            "status": "completed", "model": req.get("model", "scripted"), "output": output,
                            "parallel_tool_calls": True, "tool_choice": req.get("tool_choice", "auto"),
                            "tools": req.get("tools") or [], "error": None, "incomplete_details": None}
    if not spec.get("no_usage"):
        tokens_in, tokens_out = _tokens(req.get("input")), _completion_tokens(spec)
        body["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out,
                         "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens_details": {"reasoning_tokens": 0}}
    return body


def responses_events(body: dict[str, Any], pieces: list[str]) -> list[tuple[str, Any, bool]]:
    """A Responses answer as its event stream: created, a text delta per piece, completed (the whole response)."""
    frames: list[tuple[str, Any, bool]] = [("response.created", {"type": "response.created", "sequence_number": 0,
                                                                  "response": {**body, "status": "in_progress",
                                                                               "output": [], "usage": None}}, False)]
    for i, item in enumerate(body["output"]):
        for j, part in enumerate(item.get("content") or [] if item["type"] == "message" else []):
            if part["type"] != "output_text":
                continue
            for piece in pieces if "".join(pieces) == part["text"] else [part["text"]]:
                frames.append(("response.output_text.delta", {
                    "type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "content_index": j,
                    "delta": piece, "logprobs": [], "sequence_number": len(frames)}, True))
    frames.append(("response.completed", {"type": "response.completed", "sequence_number": len(frames),
                                          "response": body}, False))
    return frames


def anthropic_events(body: dict[str, Any], pieces: list[str]) -> list[tuple[str, Any, bool]]:
    """An Anthropic answer as its event stream: message_start, each block (text in ``pieces``, a tool's input
    JSON in two halves), message_delta with the stop reason and output tokens, message_stop."""
    usage = body.get("usage")
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None}
    if usage:
        start["usage"] = {**usage, "output_tokens": 1}
    frames: list[tuple[str, Any, bool]] = [("message_start", {"type": "message_start", "message": start}, False)]
    for i, block in enumerate(body["content"]):
        if block["type"] == "text":
            frames.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}, False))
            for piece in pieces if "".join(pieces) == block["text"] else [block["text"]]:
                frames.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": piece}}, True))
        else:
            frames.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}, False))
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            for part in (raw[:len(raw) // 2], raw[len(raw) // 2:]):
                delta = {"type": "input_json_delta", "partial_json": part}
                frames.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}, False))
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": i}, False))
    frames.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"] if usage else 0}}, False))
    frames.append(("message_stop", {"type": "message_stop"}, False))
    return frames


STREAMED = {"anthropic": anthropic_events, "responses": responses_events}


# --- Bedrock Converse -------------------------------------------------------------------------------
BEDROCK_CODES = {429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException",
                 400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
                 408: "ModelTimeoutException"}


def converse_to_chat(req: dict[str, Any], model_id: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = "".join(b.get("text", "") for b in req.get("system") or [])
    if system:
        messages.append({"role": "system", "content": system})
    as_text = False
    for turn in req.get("messages") or []:
        blocks = [b for b in turn["content"] if "cachePoint" not in b]
        if turn["role"] == "assistant":
            text = "".join(b["text"] for b in blocks if "text" in b)
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": b["toolUse"]["toolUseId"], "type": "function",
                      "function": {"name": b["toolUse"]["name"], "arguments": json.dumps(b["toolUse"]["input"])}}
                     for b in blocks if "toolUse" in b]
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        for b in blocks:
            if "toolResult" in b:
                result = b["toolResult"]
                messages.append({"role": "tool", "tool_call_id": result["toolUseId"],
                                 "content": "".join(c.get("text", "") for c in result["content"])})
            elif "text" in b:
                as_text = as_text or b["text"].startswith("[result of tool call ")
                messages.append({"role": "user", "content": b["text"]})
    chat: dict[str, Any] = {"model": model_id, "messages": messages}
    tools = (req.get("toolConfig") or {}).get("tools") or []
    if tools:
        chat["tools"] = [{"type": "function", "function": {
            "name": t["toolSpec"]["name"], "description": t["toolSpec"].get("description"),
            "parameters": t["toolSpec"]["inputSchema"]["json"]}} for t in tools]
    elif as_text:  # the adapter's "answer now, no tools" (Converse has no tool_choice none)
        chat["tool_choice"] = "none"
    inference = req.get("inferenceConfig") or {}
    if "maxTokens" in inference:
        chat["max_tokens"] = inference["maxTokens"]
    if "temperature" in inference:
        chat["temperature"] = inference["temperature"]
    return chat


def _converse_prefixes(req: dict[str, Any]) -> list[list[Any]]:
    parts: list[Any] = [(req.get("toolConfig") or {}).get("tools") or []]
    marks = []
    for block in req.get("system") or []:
        if "cachePoint" in block:
            marks.append(len(parts))
        else:
            parts.append(block)
    for turn in req.get("messages") or []:
        for block in turn["content"]:
            if "cachePoint" in block:
                marks.append(len(parts))
            else:
                parts.append([turn["role"], block])
    return [parts[:m] for m in marks]


def converse_answer(spec: dict[str, Any], req: dict[str, Any], cache: PromptCache) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    text = spec.get("refusal") or spec.get("content")
    if text:
        content.append({"text": text})
    for name, args in spec.get("tool_calls") or []:
        content.append({"toolUse": {"toolUseId": f"tooluse_{next(_ids):04d}", "name": name, "input": args}})
    stop = "guardrail_intervened" if spec.get("refusal") else ("tool_use" if spec.get("tool_calls") else "end_turn")
    body: dict[str, Any] = {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                            "metrics": {"latencyMs": 1}}
    if not spec.get("no_usage"):
        total = _tokens(req.get("messages")) + _tokens(req.get("system"))
        plain, read, write = cache.usage(_converse_prefixes(req), total)
        out = _completion_tokens(spec)
        body["usage"] = {"inputTokens": plain, "outputTokens": out, "totalTokens": plain + read + write + out,
                         "cacheReadInputTokens": read, "cacheWriteInputTokens": write}
    return body


def converse_error(spec: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    status = spec["status"]
    code = spec.get("code") or BEDROCK_CODES.get(status, "InternalServerException")
    return status, {"message": spec.get("message", "error")}, {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/"}
