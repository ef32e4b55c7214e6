"""``zerg serve``: the API on uvicorn, through the same Lambda handler.

Invariants:
- Every request becomes an API Gateway HTTP API v2 event for ``functions/events`` and its answer
  becomes the HTTP response: local and AWS share one code path. The adapter adds no routes, no
  auth and no validation of its own beyond the body cap.
- The one difference is the event streams (``STREAM_PATHS``: a run's events and the owner-wide
  feed): Lambda cannot stream a Python response, so there they long-poll; here they stream live
  from the same SSE generators, after the same authentication, parameter and ownership checks
  (``routes.runs.live_stream``); a live stream ends once its session is revoked (asked every few
  seconds), as a long-poll would be refused at its next request.
- Requests are answered concurrently: a slow model call, a slow query or a live stream never
  delays another request. The handler is synchronous (it blocks on PostgreSQL and the model), so
  each request runs it in a worker thread of its own, at most ``HANDLER_THREADS`` at once (more
  wait for one); a live stream holds a thread of its own besides, which ends within one poll
  interval of the client leaving or the server stopping. The one resolver of the process keeps the
  request it resolves per thread (:mod:`zerg.api.resolver` says why that design), prepared at
  start, so concurrent requests never see each other's session, event or arguments; nothing else
  in the request path keeps per-request state outside the request.
- One owner cannot take every handler thread: at most ``OWNER_SLOTS`` of an owner's requests are
  in the handler at once; another waits up to ``OWNER_WAIT_S`` for one of them to end (a burst of
  quick requests, such as 50 event streams reconnecting, is served), then gets 429
  ``too_many_requests`` with ``Retry-After: 1``. A request waiting for its owner's slot holds no
  thread. The owner is the one the request's token names by its signature (``auth.token_owner``:
  no database, decided before a thread is taken); a request without a valid token is charged to
  nobody (only the global cap holds it: those requests are quick, a bad token fails at its
  signature). A live stream is charged while it is checked, not while it streams.
- A body over ``MAX_BODY`` is refused (413) from its declared length without being read, and the
  connection is closed: its bytes are never parsed as a next request. So is a request that declares
  both Content-Length and Transfer-Encoding (400: h11 would follow the chunks, a proxy in front
  might follow the length, and the difference is a smuggled request), and a body that is not
  complete within ``BODY_TIMEOUT_S`` (408).
- A GET or HEAD outside ``/api/`` is the built web app (:mod:`zerg.local.static`), never the
  handler: the same origin serves the page and the API, so the session cookie stays first-party.
- Every answer the server gives itself is ``{"error", "message"}`` JSON too: malformed requests and
  slow heads (``http11``), the connection cap (503 with ``Retry-After``), and a bug in this adapter
  (500, logged; never a trace to the client).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.to_thread

from zerg.api.errors import ApiError, error_body, unavailable
from zerg.api.security import SECURITY_HEADERS
from zerg.config import get_settings
from zerg.wiring import get_runtime

logger = logging.getLogger(__name__)

EVENTS_PATH = "/api/jarvis/supervisor/events"
FEED_PATH = "/api/jarvis/events"
STREAM_PATHS = frozenset({EVENTS_PATH, FEED_PATH})  # streamed live here, long-polled under Lambda
MAX_BODY = 1_000_000
MAX_HEADER_BYTES = 32 * 1024  # the request line and headers together (JWT cookies fit easily)
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 256  # beyond it, 503; every live stream holds one thread
HANDLER_THREADS = 32  # requests in the handler at once, all owners together; more wait for a thread
OWNER_SLOTS = 8  # of those, one owner's at most (a browser opens at most 6 connections) ...
OWNER_WAIT_S = 1.0  # ... and how long the owner's next request waits for one of them before its 429
BODY_TIMEOUT_S = 30.0  # the whole body, from the end of the head (MAX_BODY at a slow 35 kB/s)

SECURITY = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]  # on its own answers too
JSON = [(b"content-type", b"application/json"), *SECURITY]


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


def _request_headers(scope: dict[str, Any]) -> dict[str, str]:
    """Lower-cased names; a repeated header joined with "," (cookies with "; ", their own separator)."""
    merged: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name in merged:
            merged[name] += ("; " if name == "cookie" else ",") + value
        else:
            merged[name] = value
    return merged


def _response_headers(result: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    out: list[tuple[str, str]] = []
    for name, value in (result.get("headers") or {}).items():
        out.append((name.lower(), str(value)))
    for name, values in (result.get("multiValueHeaders") or {}).items():
        out.extend((name.lower(), str(v)) for v in values)
    out.extend(("set-cookie", c) for c in result.get("cookies") or [])
    # The server frames the body itself.
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out if k not in ("content-length", "transfer-encoding")]


async def _send_whole(send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    if status not in (204, 304):  # those have no body, so no framing header either (RFC 9110)
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_error(send, status: int, error: str, message: str, *, close: bool = False,
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
    extra = (headers or []) + ([(b"connection", b"close")] if close else [])
    await _send_whole(send, status, JSON + extra, error_body(error, message).encode())


class _TooLarge(Exception):
    pass


class _OwnerBusy(Exception):
    pass


class _OwnerSlots:
    """An owner's handler slots, and how many requests hold or wait for one (0: forgotten)."""

    def __init__(self) -> None:
        self.slots = anyio.Semaphore(OWNER_SLOTS)
        self.users = 0


async def _read_body(scope: dict[str, Any], receive) -> bytes | None:
    """The request body, or None when the client left; _TooLarge past MAX_BODY (declared or sent);
    TimeoutError when it is not complete within BODY_TIMEOUT_S."""
    declared = dict(scope["headers"]).get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise _TooLarge
    chunks, size = [], 0
    with anyio.fail_after(BODY_TIMEOUT_S):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:  # a chunked body declares nothing up front
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


class ZergASGI:
    """The ASGI app: each HTTP request through ``functions.events.handler``; the events endpoint live."""

    def __init__(self) -> None:
        self._handler_threads = anyio.CapacityLimiter(HANDLER_THREADS)
        self._owners: dict[int, _OwnerSlots] = {}  # the owners with a request in or waiting (the loop's only)
        self._stream_threads = anyio.CapacityLimiter(MAX_CONNECTIONS)
        self._live: set[threading.Event] = set()
        self._closing = False
        self.server_state: Any = None  # uvicorn's (connections, tasks), set by LocalServer

    @property
    def live_streams(self) -> int:
        return len(self._live)

    def close(self) -> None:
        """Ends every live stream within one poll interval (server shutdown)."""
        self._closing = True
        for stop in list(self._live):
            stop.set()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off, websockets are not served
            return
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._answer(scope, receive, tracked)
        except Exception:  # a bug here, not in the handler (which answers its own errors)
            logger.exception("the local server failed a request")
            if started:
                raise  # uvicorn closes the connection mid-response
            await _send_error(send, 500, "internal_error", "internal error", close=True)

    def _over_capacity(self) -> bool:
        state = self.server_state
        return state is not None and (len(state.connections) > MAX_CONNECTIONS or len(state.tasks) > MAX_CONNECTIONS)

    async def _answer(self, scope, receive, send) -> None:
        if self._over_capacity():  # this connection and this request are counted already
            return await _send_error(send, 503, "unavailable", f"the server is at its limit of {MAX_CONNECTIONS} "
                                     "connections; retry shortly", close=True, headers=[(b"retry-after", b"1")])
        names = {name for name, _ in scope["headers"]}
        if b"transfer-encoding" in names and b"content-length" in names:
            return await _send_error(send, 400, "bad_request", "a request must not declare both Content-Length and "
                                     "Transfer-Encoding", close=True)
        # h11's size limit only bounds a head that arrives in pieces; one read of up to 64 KiB can
        # carry a larger complete head, so the cap is enforced here too.
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        if head + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) > MAX_HEADER_BYTES:
            return await _send_error(send, 431, "headers_too_large", f"request line and headers over {MAX_HEADER_BYTES} bytes", close=True)
        try:
            body = await _read_body(scope, receive)
        except _TooLarge:
            return await _send_error(send, 413, "payload_too_large", f"body over {MAX_BODY} bytes", close=True)
        except TimeoutError:
            return await _send_error(send, 408, "request_timeout", f"the request body did not arrive within "
                                     f"{BODY_TIMEOUT_S:g} s", close=True)
        if body is None:
            return
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if not raw_path.startswith("/api/") and raw_path not in ("/api", "/mcp"):  # /mcp: Zerg as an MCP server
            return await _serve_static(scope, send, raw_path)
        query = scope.get("query_string", b"").decode("latin-1")
        target = raw_path + (f"?{query}" if query else "")
        client = scope.get("client") or ("127.0.0.1", 0)
        # The scheme this server was reached by, never a client's claim (the same-origin check reads it).
        headers = {**_request_headers(scope), "x-forwarded-proto": scope.get("scheme", "http")}
        event = to_apigw_event(scope["method"], target, headers, body, client[0])
        live = scope["method"] == "GET" and event["rawPath"] in STREAM_PATHS
        try:
            async with self._owner_slot(_charged_owner(event)):
                result = await anyio.to_thread.run_sync(_check_stream if live else _call_handler, event,
                                                        limiter=self._handler_threads)
        except _OwnerBusy:
            return await _send_error(send, 429, "too_many_requests", f"this owner already has {OWNER_SLOTS} "
                                     "requests in progress; retry when one has ended",
                                     headers=[(b"retry-after", b"1")])
        except Exception:  # the handler answers its own errors; this is a bug, logged, never a trace to the client
            logger.exception("the API handler raised")
            return await _send_error(send, 500, "internal_error", "internal error")
        if live and "statusCode" not in result:
            return await self._stream(result["stream"], receive, send)
        payload = result.pop("body", None) or ""  # held once: a range answer is megabytes
        data = binascii.a2b_base64(payload) if result.get("isBase64Encoded") else payload.encode()
        del payload
        await _send_whole(send, result["statusCode"], _response_headers(result), data)

    @contextlib.asynccontextmanager
    async def _owner_slot(self, owner: int | None) -> AsyncIterator[None]:
        """One of the owner's ``OWNER_SLOTS`` for the block, waited for at most ``OWNER_WAIT_S``
        (first come, first served); _OwnerBusy when none came free. On the event loop only, so
        the bookkeeping needs no lock."""
        if owner is None:
            yield
            return
        entry = self._owners.setdefault(owner, _OwnerSlots())
        entry.users += 1
        got = False
        try:
            with anyio.move_on_after(OWNER_WAIT_S):
                await entry.slots.acquire()
                got = True
            if not got:
                raise _OwnerBusy
            try:
                yield
            finally:
                entry.slots.release()
        finally:
            entry.users -= 1
            if not entry.users:
                del self._owners[owner]

    async def _stream(self, checked: Any, receive, send) -> None:
        """Live SSE for a checked request (``routes.runs.LiveStream``): frames until the stream
        ends, the client leaves, the server stops or the caller's session is revoked."""
        from zerg.api import sse
        from zerg.auth import still_valid

        stop = threading.Event()
        frames = checked.frames(stop=stop, still_valid=partial(still_valid, get_runtime().pool, checked.caller))
        self._live.add(stop)
        if self._closing:
            stop.set()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"connection", b"close"),
            *SECURITY]})
        try:
            await send({"type": "http.response.body", "body": f"retry: {sse.RETRY_MS}\n\n".encode(), "more_body": True})
            queue: asyncio.Queue[str | None] = asyncio.Queue()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_until_disconnect, receive, stop, tasks.cancel_scope)
                # One thread walks the generator and hands frames to the loop without waiting for
                # each send: a burst of events goes out as one write, not one thread hop per frame.
                # Cancellation (client gone, server stopping) abandons the thread; ``stop`` ends the
                # generator within one poll, so the thread does not outlive the stream.
                pump = partial(anyio.to_thread.run_sync, _pump, frames, asyncio.get_running_loop(), queue,
                               abandon_on_cancel=True, limiter=self._stream_threads)
                tasks.start_soon(pump)
                done = False
                while not done:
                    batch = [await queue.get()]
                    while not queue.empty():
                        batch.append(queue.get_nowait())
                    done = batch[-1] is None
                    data = "".join(chunk for chunk in batch if chunk is not None).encode()
                    if data:
                        await send({"type": "http.response.body", "body": data, "more_body": True})
                tasks.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b""})
        finally:
            stop.set()
            self._live.discard(stop)


async def _serve_static(scope, send, raw_path: str) -> None:
    """The built web app (:mod:`zerg.local.static`) for a path outside /api/."""
    from zerg.local import static

    answer = await anyio.to_thread.run_sync(static.serve, scope["method"], raw_path, _request_headers(scope),
                                            get_settings().web_dir)
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]
    if any(k == "content-length" for k, _ in answer.headers):  # HEAD: the length of the body not sent
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return
    await _send_whole(send, answer.status, headers, answer.body)


def _pump(frames: Iterator[str], loop: asyncio.AbstractEventLoop, queue: "asyncio.Queue[str | None]") -> None:
    """In a worker thread: every frame onto the loop's queue, then None."""
    try:
        for chunk in frames:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
        loop.call_soon_threadsafe(queue.put_nowait, None)
    except RuntimeError:  # the loop is gone (server stopped): nobody is reading
        pass


async def _until_disconnect(receive, stop: threading.Event, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    stop.set()
    scope.cancel()


def _charged_owner(event: dict[str, Any]) -> int | None:
    """Whom a request is charged to: the owner its token names, by the signature alone (no
    database); None without a token whose signature and ``exp`` hold."""
    from zerg.api.deps import bearer
    from zerg.auth import token_owner

    return token_owner(get_settings(), bearer(event["headers"], event["cookies"]))


def _call_handler(event: dict[str, Any]) -> dict[str, Any]:
    from functions.events.handler import handler

    return handler(event, None)


def _check_stream(event: dict[str, Any]) -> dict[str, Any]:
    """The API's own checks for an event stream (auth, parameters, ownership, Last-Event-ID): an
    answer in the handler's result shape, or ``{"stream": LiveStream}`` to follow live."""
    from psycopg import OperationalError

    from zerg.api.routes.runs import live_stream

    try:
        checked = live_stream(event)
    except OperationalError as exc:  # the database is unreachable: the API's 503, as on every route
        return _error_result(unavailable(exc))
    except ApiError as exc:
        return _error_result(exc)
    if checked is None:  # the run's final event was already delivered: stop reconnecting
        return {"statusCode": 204, "headers": {}, "body": ""}
    return {"stream": checked}


def _error_result(exc: Any) -> dict[str, Any]:
    """An ``ApiError`` in the handler's result shape."""
    return {"statusCode": exc.status, "headers": {"content-type": "application/json", **exc.headers},
            "body": error_body(exc.error, exc.message)}


class LocalServer:
    """uvicorn on a socket bound up front: the port is known (``port=0`` in tests) and a bind error
    surfaces from :func:`make_server`, before anything runs."""

    def __init__(self, app: ZergASGI, sock: socket.socket, *, tls: bool, **config: Any) -> None:
        import uvicorn

        class _Server(uvicorn.Server):
            async def shutdown(self, sockets=None) -> None:
                app.close()  # live streams end first, so the graceful wait is short
                await super().shutdown(sockets)

        self.app, self._sock = app, sock
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"{'https' if tls else 'http'}://{_url_host(self.host)}:{self.port}"
        self.server = _Server(uvicorn.Config(app, **config))
        app.server_state = self.server.server_state
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Blocks until Ctrl-C / SIGTERM (uvicorn handles them in the main thread) or :meth:`stop`."""
        self.server.run(sockets=[self._sock])

    def start(self, timeout: float = 10.0) -> "LocalServer":
        """Serve from a background thread (tests, benchmarks); returns once it accepts connections."""
        self._thread = threading.Thread(target=self.serve, name="zerg-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the local server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._sock.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def make_server(host: str = "127.0.0.1", port: int = 8000, *, tls_cert: str | None = None,
                tls_key: str | None = None) -> LocalServer:
    """The API server, bound but not yet serving. OSError when the address is taken; ssl.SSLError /
    OSError when the certificate or key cannot be loaded (checked here, not at the first request)."""
    tls = bool(tls_cert or tls_key)
    if tls and not (tls_cert and tls_key):
        raise ValueError("TLS needs both a certificate and a key")
    if tls:
        import ssl

        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(tls_cert, tls_key)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    from zerg.api.app import build_app
    from zerg.local.http11 import ZergH11Protocol

    build_app().prepare()  # before any request: the handler threads resolve at once
    return LocalServer(
        ZergASGI(), sock, tls=tls,
        http=ZergH11Protocol, ws="none", lifespan="off", interface="asgi3",
        log_level="warning", access_log=False,
        server_header=False,  # no stack or version on the wire
        proxy_headers=False,  # nothing sits in front of it: X-Forwarded-For is not to be trusted
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=5,
        # No limit_concurrency: uvicorn's own 503 is plain text; ZergASGI answers it in JSON.
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        ssl_certfile=tls_cert, ssl_keyfile=tls_key,
    )
