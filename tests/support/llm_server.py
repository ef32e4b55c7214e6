"""A scripted OpenAI-compatible server on loopback, for driving agents through the real client.

Tests say what the model answers, request by request (a queue), or with a responder function
(for concurrent callers); every request received is recorded so a test can assert exactly what
the model was shown.

Script entries::

    {"content": "final text"}
    {"tool_calls": [("ssh_exec", {"host": "cube", "command": "df -h"})]}
    {"status": 503, "message": "overloaded"}         # an HTTP error
    {"delay": 2.0, "content": "slow"}                # wait before answering
    {"tool_calls": [("container_exec", "{not json")]}  # raw (malformed) arguments, sent as they are
    {"refusal": "I can't help with that."}           # the model declines (each format's refusal)
    {"content": "ok", "no_usage": True}              # an answer without usage

A request with ``"stream": true`` is answered as the API streams, with chunked transfer encoding: Chat
Completions as Server-Sent Events of ``chat.completion.chunk`` objects (the content in pieces, tool calls,
the finish reason, the usage chunk when ``stream_options.include_usage`` asks for it, ``[DONE]``),
Anthropic Messages and OpenAI Responses as their event streams (tests/support/wire_formats.py).
Stream-only entries::

    {"content": "a b c", "chunks": ["a ", "b ", "c"]}   # the content in these pieces (default: word by word)
    {"content": "...", "until": threading.Event()}      # the first piece, then the rest once the test sets it
    {"content": "...", "break_after": 2}                # two pieces, then the connection drops mid-stream
    {"content": "...", "pace": 0.02}                    # a model's pace: this many seconds between pieces (benchmarks)

The same scripts drive every wire format the server speaks (tests/support/wire_formats.py): Chat
Completions at ``/v1/chat/completions``, Anthropic Messages at ``/v1/messages``, OpenAI Responses at
``/v1/responses`` and Bedrock Converse at ``/model/{modelId}/converse`` (``root_url`` is the endpoint
of the last two SDKs). ``requests`` records each request as the Chat Completions request it stands for,
so responders and assertions read one shape; ``raw_requests`` keeps ``{"wire", "path", "body",
"headers", "chat"}`` (as sent, and as recorded in ``requests``) (a Converse request without a SigV4 ``Authorization`` header is refused with 403).

``/v1/embeddings`` (and Bedrock's Titan ``/model/{id}/invoke``, one text a request) has its own script
(:meth:`ScriptedLLM.script_embeddings`) and record (``embedding_requests``), so chat scripts are never
consumed by an embedding call::

    {"vectors": [[0.1, 0.2, ...], ...]}              # one per input
    {"status": 500, "message": "down"}
    {"until": threading.Event(), "vectors": [...]}   # answer only once the test sets the event

``/v1/realtime/client_secrets`` (minting a voice session) records each request, its body and its
``Authorization`` header, in ``realtime_requests`` and answers ``{value: "ek_scripted_N", expires_at,
session}`` unless :meth:`ScriptedLLM.script_realtime` queued ``{"status": 401, "message": ...}`` or
``{"delay": s}``.

A function (:meth:`ScriptedLLM.respond_embeddings_with`) can answer by content instead, e.g. refuse
any request whose input holds a marker. Otherwise unscripted embedding requests get deterministic pseudo-random unit vectors (1536 numbers, or the
request's ``dimensions``), the same for the same text.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from tests.support import wire_formats

Responder = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[dict[str, Any]] = []
        self.prompt_cache = wire_formats.PromptCache()
        self._queue: deque[dict[str, Any]] = deque()
        self.embedding_requests: list[dict[str, Any]] = []
        self._embedding_queue: deque[dict[str, Any]] = deque()
        self.embeddings_answered = 0  # responses written (or attempted) by /embeddings
        self.realtime_requests: list[dict[str, Any]] = []  # {"body", "authorization"}
        self._realtime_queue: deque[dict[str, Any]] = deque()
        self._responder: Responder | None = None
        self._embedding_responder: Responder | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # serve_forever checks for shutdown() every poll_interval (0.5 s by default): every test
        # with the llm fixture waited that long in its teardown (~40% of the suite's time).
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def root_url(self) -> str:
        """The server without ``/v1``: Anthropic's and Bedrock's SDKs add their own paths."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *responses: dict[str, Any]) -> "ScriptedLLM":
        with self._lock:
            self._queue.extend(responses)
        return self

    def script_embeddings(self, *responses: dict[str, Any]) -> "ScriptedLLM":
        with self._lock:
            self._embedding_queue.extend(responses)
        return self

    def script_realtime(self, *responses: dict[str, Any]) -> "ScriptedLLM":
        with self._lock:
            self._realtime_queue.extend(responses)
        return self

    def respond_embeddings_with(self, responder: Responder) -> "ScriptedLLM":
        """Answer every embedding request the script does not cover with ``responder(request)``
        (an embeddings spec, or None for the default vectors)."""
        self._embedding_responder = responder
        return self

    def respond_with(self, responder: Responder) -> "ScriptedLLM":
        """Answer every request the queue does not cover with ``responder(request)``."""
        self._responder = responder
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- internals -----------------------------------------------------------------------
    def _next(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self._responder is not None:
            return self._responder(request)
        return {"status": 500, "message": "scripted LLM: script exhausted"}

    def _next_embedding(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.embedding_requests.append(request)
            if self._embedding_queue:
                return self._embedding_queue.popleft()
        inputs = request.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if self._embedding_responder is not None and (spec := self._embedding_responder(request)) is not None:
            return spec
        return {"vectors": [_pseudo_vector(str(t), int(request.get("dimensions") or 1536)) for t in inputs]}

    def _next_realtime(self, request: dict[str, Any], authorization: str | None) -> dict[str, Any]:
        with self._lock:
            self.realtime_requests.append({"body": request, "authorization": authorization})
            spec = self._realtime_queue.popleft() if self._realtime_queue else {}
        if "status" in spec:
            return spec
        session = request.get("session") or {}
        ttl = int((request.get("expires_after") or {}).get("seconds") or 600)
        return {"delay": spec.get("delay"),
                "body": {"value": f"ek_scripted_{next(self._ids)}", "expires_at": int(time.time()) + ttl,
                         "session": {"id": f"sess_{next(self._ids)}", "object": "realtime.session", **session}}}

    def _embeddings(self, request: dict[str, Any], vectors: list[list[float]]) -> dict[str, Any]:
        tokens = sum(len(str(t)) // 4 + 1 for t in (request.get("input") or []))
        return {"object": "list", "model": request.get("model", "scripted"),
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def _completion(self, request: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        if spec.get("refusal"):
            message["refusal"] = spec["refusal"]
        calls = spec.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
                for name, args in calls
            ]
        prompt_tokens = len(json.dumps(request.get("messages", []))) // 4
        completion_tokens = max(1, len(json.dumps(message)) // 4)
        body = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if spec.get("no_usage"):
            del body["usage"]
        return body

    def _chunks(self, request: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
        """The streamed answer: one ``chat.completion.chunk`` per piece of content, the tool calls,
        the finish reason, then the usage (when asked for), as the API sends them."""
        whole = self._completion(request, spec)
        base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"],
                "model": whole["model"]}
        message = whole["choices"][0]["message"]
        content = message.get("content") or ""
        pieces = _pieces(spec) if content else []
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]
        chunks += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
        if message.get("refusal"):
            chunks.append({**base, "choices": [{"index": 0, "delta": {"refusal": message["refusal"]},
                                                "finish_reason": None}]})
        for i, call in enumerate(message.get("tool_calls") or []):
            args = call["function"]["arguments"]
            half = len(args) // 2  # the arguments in two pieces, as the API splits them
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": args[:half]}}]}, "finish_reason": None}]})
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "function": {"arguments": args[half:]}}]}, "finish_reason": None}]})
        finish = whole["choices"][0]["finish_reason"]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if "usage" in whole and (request.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": whole["usage"]})
        return chunks

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith(("/v1/messages", "/v1/responses", "/converse")):
                    return self._wire(path)
                if path.startswith("/model/") and path.endswith("/invoke"):
                    return self._titan(path)
                if self.path.rstrip("/").endswith("/embeddings"):
                    return self._embeddings()
                if self.path.rstrip("/").endswith("/realtime/client_secrets"):
                    return self._realtime()
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                spec = outer._next(request)
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                if "status" in spec:
                    body = {"error": {"message": spec.get("message", "error"), "type": "server_error"}}
                    return self._send(spec["status"], body, {"retry-after-ms": "1"})
                if request.get("stream"):
                    return self._stream(outer._chunks(request, spec), spec)
                if spec.get("until") is not None:
                    spec["until"].wait(30)
                self._send(200, outer._completion(request, spec))

            def _stream(self, chunks: list[dict[str, Any]], spec: dict[str, Any]) -> None:
                """Chat Completions' stream: ``data:`` lines of chunks, then ``[DONE]``."""
                frames = [(None, c, bool(c["choices"] and c["choices"][0]["delta"].get("content"))) for c in chunks]
                self._sse([*frames, (None, "[DONE]", False)], spec)

            def _sse(self, frames: list[tuple[str | None, Any, bool]], spec: dict[str, Any]) -> None:
                """Server-Sent Events ``(event name, data, is a piece of content)``, chunked (HTTP/1.1 on this
                one connection, closed after), with the stream-only script entries (until, break_after, pace)."""
                self.close_connection = True
                pieces = sum(1 for _, _, piece in frames if piece)
                sent = 0
                try:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
                    for name, payload, piece in frames:
                        body = payload if isinstance(payload, str) else json.dumps(payload)
                        data = (f"event: {name}\n" if name else "").encode() + f"data: {body}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        if piece:
                            sent += 1
                            if sent == spec.get("break_after"):
                                return  # no terminating chunk: the client sees the stream break off
                            if sent == 1 and spec.get("until") is not None and pieces > 1:
                                spec["until"].wait(30)
                            if spec.get("pace"):
                                time.sleep(spec["pace"])  # the model's writing speed, not a synchronisation
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client closed its stream (a cancelled run)

            def _wire(self, path: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                if path.endswith("/converse"):
                    wire, model_id = "bedrock", unquote(path.split("/model/", 1)[1].rsplit("/converse", 1)[0])
                    chat = wire_formats.converse_to_chat(raw, model_id)
                elif path.endswith("/messages"):
                    wire, chat = "anthropic", wire_formats.anthropic_to_chat(raw)
                else:
                    wire, chat = "responses", wire_formats.responses_to_chat(raw)
                with outer._lock:
                    outer.raw_requests.append({"wire": wire, "path": path, "body": raw, "headers": headers, "chat": chat})
                if wire == "bedrock" and not headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 Credential="):
                    return self._send(403, {"message": "request not signed (SigV4)"},
                                      {"x-amzn-ErrorType": "AccessDeniedException:"})
                spec = outer._next(chat)
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                if "status" in spec:
                    if wire == "bedrock":
                        return self._send(*wire_formats.converse_error(spec))
                    if wire == "anthropic":
                        return self._send(*wire_formats.anthropic_error(spec))
                    body = {"error": {"message": spec.get("message", "error"), "type": "server_error"}}
                    return self._send(spec["status"], body, {"retry-after-ms": "1"})
                answer = {"bedrock": wire_formats.converse_answer, "anthropic": wire_formats.anthropic_answer,
                          "responses": wire_formats.responses_answer}[wire]
                if raw.get("stream") and wire in wire_formats.STREAMED:
                    body = answer(spec, raw, outer.prompt_cache)
                    return self._sse(wire_formats.STREAMED[wire](body, _pieces(spec)), spec)
                if spec.get("until") is not None:
                    spec["until"].wait(30)
                self._send(200, answer(spec, raw, outer.prompt_cache))

            def _titan(self, path: str) -> None:
                """Bedrock's InvokeModel of Titan Text Embeddings V2: one text, one vector; recorded and
                scripted like ``/v1/embeddings`` (``{"input": [text], "model", "dimensions"}``)."""
                length = int(self.headers.get("Content-Length") or 0)
                raw = json.loads(self.rfile.read(length) or b"{}")
                model_id = unquote(path.split("/model/", 1)[1].rsplit("/invoke", 1)[0])
                request = {"input": [raw.get("inputText", "")], "model": model_id,
                           "dimensions": raw.get("dimensions", 1024),
                           "authorization": self.headers.get("Authorization")}
                spec = outer._next_embedding(request)
                try:
                    if "status" in spec:
                        return self._send(*wire_formats.converse_error(spec))
                    (vector,) = spec["vectors"]
                    self._send(200, {"embedding": vector, "inputTextTokenCount": len(request["input"][0]) // 4 + 1})
                finally:
                    with outer._lock:
                        outer.embeddings_answered += 1

            def _realtime(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                spec = outer._next_realtime(request, self.headers.get("Authorization"))
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                if "status" in spec:
                    body = {"error": {"message": spec.get("message", "error"), "type": "invalid_request_error"}}
                    return self._send(spec["status"], body)
                self._send(200, spec["body"])

            def _embeddings(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                spec = outer._next_embedding(request)
                if spec.get("until") is not None:
                    spec["until"].wait(30)
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                try:
                    if "status" in spec:
                        body = {"error": {"message": spec.get("message", "error"), "type": "server_error"}}
                        return self._send(spec["status"], body)
                    self._send(200, outer._embeddings(request, spec["vectors"]))
                finally:
                    with outer._lock:
                        outer.embeddings_answered += 1

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler


def _pieces(spec: dict[str, Any]) -> list[str]:
    """A streamed answer's content in pieces: the script's ``chunks``, else word by word."""
    content = spec.get("content") or ""
    pieces = spec.get("chunks") or [w for w in content.replace(" ", " \0").split("\0") if w]
    assert "".join(pieces) == content, "a script's chunks must spell its content"
    return pieces


def _pseudo_vector(text: str, dimension: int) -> list[float]:
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]
