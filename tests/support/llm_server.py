"""A scripted OpenAI-compatible server on loopback, for driving agents through the real client.

Tests say what the model answers, request by request (a queue), or with a responder function
(for concurrent callers); every request received is recorded so a test can assert exactly what
the model was shown.

Script entries::

    {"content": "final text"}
    {"tool_calls": [("ssh_exec", {"host": "cube", "command": "df -h"})]}
    {"status": 503, "message": "overloaded"}         # an HTTP error
    {"delay": 2.0, "content": "slow"}                # wait before answering
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[dict[str, Any]] = deque()
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *responses: dict[str, Any]) -> "ScriptedLLM":
        with self._lock:
            self._queue.extend(responses)
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

    def _completion(self, request: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        calls = spec.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for name, args in calls
            ]
        prompt_tokens = len(json.dumps(request.get("messages", []))) // 4
        completion_tokens = max(1, len(json.dumps(message)) // 4)
        return {
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

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
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
                self._send(200, outer._completion(request, spec))

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
