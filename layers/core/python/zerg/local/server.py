"""``zerg serve``: the API on a local HTTP server, through the same Lambda handler.

Each request becomes an API Gateway HTTP API v2 event for ``functions/events`` and its answer
becomes the HTTP response, so local and AWS share one code path. The one difference is the event
stream: Lambda cannot stream a Python response, so there it long-polls; here the server streams
``run_events`` live from the same SSE generator, after the same authentication and ownership
checks.
"""

from __future__ import annotations

import base64
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from zerg.api.errors import error_body

EVENTS_PATH = "/api/jarvis/supervisor/events"
MAX_BODY = 1_000_000


def to_apigw_event(method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str = "127.0.0.1") -> dict[str, Any]:
    """An API Gateway HTTP API (payload v2.0) event for one HTTP request."""
    parts = urlsplit(target)
    lowered = {k.lower(): v for k, v in headers.items()}
    cookies = [c.strip() for c in lowered.pop("cookie", "").split(";") if c.strip()]
    try:
        text, is_b64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_b64 = base64.b64encode(body).decode(), True
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "cookies": cookies,
        "headers": lowered,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "local", "apiId": "local", "domainName": lowered.get("host", "localhost"),
            "http": {"method": method.upper(), "path": parts.path, "protocol": "HTTP/1.1",
                     "sourceIp": source_ip, "userAgent": lowered.get("user-agent", "")},
            "requestId": uuid.uuid4().hex, "routeKey": "$default", "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)), "timeEpoch": int(now * 1000),
        },
        "body": text if body else None,
        "isBase64Encoded": is_b64,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "zerg"

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._send(413, {"content-type": "application/json"},
                              error_body("payload_too_large", f"body over {MAX_BODY} bytes").encode())
        body = self.rfile.read(length) if length else b""
        event = to_apigw_event(self.command, self.path, dict(self.headers.items()), body, self.client_address[0])
        if self.command == "GET" and event["rawPath"] == EVENTS_PATH:
            return self._stream(event)
        from functions.events.handler import handler

        result = handler(event, None)
        headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
        self._send(result["statusCode"], headers, data, result.get("cookies") or [])

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

    def _send(self, status: int, headers: dict[str, str], data: bytes, cookies: list[str] = ()) -> None:
        self.send_response(status)
        for k, v in headers.items():
            if k != "content-length":
                self.send_header(k, v)
        for c in cookies:
            self.send_header("Set-Cookie", c)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, event: dict[str, Any]) -> None:
        """Live SSE: the same request checks as the API (auth, ownership), then follow."""
        from zerg.api import sse
        from zerg.api.errors import ApiError
        from zerg.api.routes.runs import stream_request
        from zerg.runtime import get_runtime

        rt = get_runtime()
        try:
            owner_id, run_id, after = stream_request(event)
        except ApiError as exc:
            body = error_body(exc.error, exc.message).encode()
            return self._send(exc.status, {"content-type": "application/json"}, body)
        if after and sse.terminal_delivered(rt.pool, owner_id, run_id, after):
            return self._send(204, {}, b"")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(f"retry: {sse.RETRY_MS}\n\n".encode())
            self.wfile.flush()
            for chunk in sse.stream(rt.pool, owner_id, run_id, after, heartbeat_s=rt.settings.heartbeat_s):
                self.wfile.write(chunk.encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; it reconnects with Last-Event-ID


def make_server(host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    return server
