"""Talking to one of the owner's MCP servers with the official SDK (``mcp``): list its tools, call one.

A remote server is reached over streamable HTTP through :class:`_Egress`, an httpx2 transport that
checks every request's destination (redirects included) the way ``http_request`` does; a local one
runs over stdio inside a fresh ``container_exec`` sandbox (:mod:`zerg.sandbox.stdio`) per connection.

Invariants:
- One connection per listing and per call, never shared: the stdio process of one call serves that
  call of that owner only, and is gone (with everything it started) when the call returns.
- Egress: http and https only; every address a host resolves to must be globally routable (or in
  ``ZERG_HTTP_ALLOW_NETWORKS``); a private or loopback address only for the registered URL's own
  host, and only when the owner allowed it (``allow_private``). The connection goes to the checked
  address (the Host header and TLS server name keep the name), so DNS cannot change it in between.
- Bounded: a connection and each request end within their timeout, a cancel (the run's) ends the
  call at once and the SDK sends ``notifications/cancelled`` for the request in flight (over HTTP at
  protocol 2026-07-28, by closing the request's response stream, as that revision says); a stdio
  server then has :data:`CLOSE_GRACE_S` to read it and exit on its closed input before its sandbox is
  killed (without a cancel it is killed once its input is closed: its sandbox holds nothing to keep); one message
  from the server is at most :data:`FRAME_MAX` bytes (larger: the call fails, the process is killed);
  a malformed JSON-RPC frame fails the call at once, naming it.
- Errors are :class:`McpError` with one line a person or a model can read; never a stack trace.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from zerg import egress
from zerg.config import Settings

if TYPE_CHECKING:
    import httpx2
    from mcp import ClientSession

FRAME_MAX = 16 * 1024 * 1024  # bytes of one message from a server (a tools/list page, a tool's result)
LIST_PAGES_MAX = 50  # tools/list pages followed before giving up on a server's cursor
CONNECT_TIMEOUT_S = 30.0
CLOSE_GRACE_S = 2.0  # how long a stdio server may take to exit once its input is closed
STDERR_KEPT = 2_000  # bytes of a stdio server's stderr kept for an error message
Resolver = Callable[[str, int], list[str]]


class McpError(RuntimeError):
    """The server could not be reached, refused, misbehaved or took too long: one line, said plainly."""


@dataclass(frozen=True)
class Endpoint:
    """How to reach one server (secrets already opened)."""

    name: str
    transport: str  # "http" or "stdio"
    url: str | None = None
    command: str | None = None
    bearer: str | None = None
    oauth: dict[str, Any] | None = None  # client_id, client_secret, scope, issuer
    allow_private: bool = False


@dataclass
class _Trouble:
    """What went wrong below the session (the transport, the frames): the first thing said wins."""

    reason: str | None = None
    stderr: bytearray = field(default_factory=bytearray)
    cancelled: bool = False  # the run's cancel ended a request: a stdio server gets its grace to read it

    def note(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


def system_resolver(host: str, port: int) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})


def destination_refusal(url: str, settings: Settings, allowed_host: str | None, resolve: Resolver
                        ) -> tuple[str | None, str | None]:
    """(why ``url`` may not be reached, None) or (None, the address to connect to)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"only http and https are allowed, not {parts.scheme or 'no scheme'!r}", None
    host = parts.hostname
    if not host:
        return "the URL has no host", None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve(host, port)
    except OSError as exc:
        return f"cannot resolve {host}: {exc}", None
    if not addresses:
        return f"{host} resolves to no address", None
    owner_allowed = allowed_host is not None and host.lower().rstrip(".") == allowed_host
    for text in addresses:
        addr = ipaddress.ip_address(text.split("%")[0])
        mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
        if any(addr in net or (mapped is not None and mapped in net) for net in settings.http_allow_networks):
            continue
        if addr in egress.METADATA:
            return f"{host} resolves to {addr}, the cloud metadata address: refused", None
        why = egress.refusal(addr)
        if why and not owner_allowed:
            return (f"{host} resolves to {addr}, {why}: refused (the owner allows private addresses per server, "
                    "for the registered host only)"), None
    return None, addresses[0]


def _egress_transport(settings: Settings, endpoint: Endpoint, trouble: _Trouble, resolve: Resolver) -> Any:
    import httpx2

    allowed = (urlsplit(endpoint.url or "").hostname or "").lower().rstrip(".") if endpoint.allow_private else None

    class _Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            total = 0
            async for chunk in self.inner:
                total += len(chunk)
                if total > FRAME_MAX:
                    trouble.note(f"the server's response is over {FRAME_MAX // (1024 * 1024)} MiB: refused")
                    raise httpx2.ReadError("response over the size cap")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class _Egress(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport(verify=_tls())

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            import anyio.to_thread

            url = str(request.url)
            reason, address = await anyio.to_thread.run_sync(destination_refusal, url, settings, allowed, resolve)
            if reason:
                trouble.note(f"{request.url.host}: {reason}")
                raise httpx2.ConnectError(reason, request=request)
            host = request.url.host
            request.url = request.url.copy_with(host=address)
            if request.url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": host}
            response = await self.inner.handle_async_request(request)
            if response.status_code in (401, 403):
                trouble.note(f"the server answered HTTP {response.status_code}: the credentials were refused")
            elif response.status_code >= 400 and request.method == "POST":
                trouble.note(f"the server answered HTTP {response.status_code}")
            if 300 <= response.status_code < 400 and "location" in response.headers:
                location = response.headers["location"]
                target = urlsplit(str(request.url.join(location)))
                if (target.hostname or "").lower() != host.lower():
                    trouble.note(f"the server redirected to another host ({target.hostname}): not followed")
            return httpx2.Response(response.status_code, headers=response.headers, stream=_Capped(response.stream),
                                   extensions=response.extensions, request=request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return _Egress()


@functools.lru_cache(maxsize=1)
def _tls() -> Any:
    """The TLS context of every connection (the system's trust, as httpx2's default): built once, since
    building it reads the CA bundle (20-100 ms, twice per call before)."""
    import httpx2

    return httpx2.create_ssl_context()


@asynccontextmanager
async def _http_streams(settings: Settings, endpoint: Endpoint, trouble: _Trouble, resolve: Resolver,
                        timeout_s: float) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {endpoint.bearer}"} if endpoint.bearer else None
    auth = None
    if endpoint.oauth:
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        auth = ClientCredentialsOAuthProvider(
            server_url=endpoint.url or "", storage=_Tokens(), client_id=endpoint.oauth["client_id"],
            client_secret=endpoint.oauth["client_secret"], scope=endpoint.oauth.get("scope"),
            issuer=endpoint.oauth.get("issuer"))
    client = httpx2.AsyncClient(transport=_egress_transport(settings, endpoint, trouble, resolve), headers=headers,
                                auth=auth, timeout=httpx2.Timeout(min(CONNECT_TIMEOUT_S, timeout_s), read=timeout_s),
                                follow_redirects=False, verify=_tls())
    async with client, streamable_http_client(endpoint.url or "", http_client=client,
                                              max_sse_event_size=FRAME_MAX) as streams:
        yield streams[0], streams[1]


class _Tokens:
    """The OAuth tokens of one connection: in memory only (a token lives as long as its call)."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


def stdio_binds(settings: Settings) -> tuple[str, ...]:
    """The host directories a stdio server sees read-only: ``ZERG_MCP_STDIO_PATHS``, else the Python
    installation Zerg runs on (so a server installed beside Zerg, ``pip install mcp-server-time``, runs)."""
    return settings.mcp_stdio_paths or tuple(dict.fromkeys((sys.prefix, sys.base_prefix)))


@asynccontextmanager
async def _stdio_streams(settings: Settings, endpoint: Endpoint, trouble: _Trouble) -> AsyncIterator[Any]:
    import subprocess

    import anyio
    import anyio.to_thread
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from zerg.sandbox import stdio as sandboxed

    prepared = await anyio.to_thread.run_sync(
        lambda: sandboxed.prepare(endpoint.command or "", settings, binds=stdio_binds(settings)))
    proc = None
    try:
        proc = await anyio.open_process(prepared.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=prepared.env, cwd=prepared.cwd,
                                        start_new_session=True)
        to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

        async def stdout_reader() -> None:
            buffer = bytearray()
            async with to_session:
                async for chunk in proc.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[:end + 1]
                        if not line.strip():
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError:
                            shown = line[:80].decode("utf-8", "replace")
                            trouble.note(f"the server sent a malformed JSON-RPC frame ({shown!r}...)")
                            await to_session.send(McpError(trouble.reason))
                            return
                        await to_session.send(SessionMessage(message))
                    if len(buffer) > FRAME_MAX:
                        trouble.note(f"the server sent a message over {FRAME_MAX // (1024 * 1024)} MiB: refused")
                        await to_session.send(McpError(trouble.reason))
                        return

        async def stderr_reader() -> None:
            async for chunk in proc.stderr:
                trouble.stderr += chunk
                del trouble.stderr[:-STDERR_KEPT]

        async def stdin_writer() -> None:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    try:
                        await proc.stdin.send(data.encode())
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        trouble.note("the server closed its input")
                        return

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stdout_reader)
            tasks.start_soon(stderr_reader)
            tasks.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream
            finally:  # its input closed; after a cancel, a moment to read the notification and exit (its
                with anyio.CancelScope(shield=True):  # last words on stderr still read); then the sandbox goes
                    with contextlib.suppress(Exception):
                        await proc.stdin.aclose()
                    if trouble.cancelled:
                        with anyio.move_on_after(CLOSE_GRACE_S):
                            await proc.wait()
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if proc is not None:
                await anyio.to_thread.run_sync(sandboxed.kill, prepared, proc.pid)
                with anyio.move_on_after(10):
                    await proc.wait()
                await proc.aclose()
            await anyio.to_thread.run_sync(sandboxed.teardown, prepared, proc.pid if proc else None)


@asynccontextmanager
async def session(settings: Settings, endpoint: Endpoint, timeout_s: float, trouble: _Trouble,
                  resolve: Resolver = system_resolver) -> AsyncIterator[ClientSession]:
    """An initialised session with the server (closed, and its process gone, on exit)."""
    from mcp import ClientSession

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            trouble.note(str(message) or type(message).__name__)

    streams = (_stdio_streams(settings, endpoint, trouble) if endpoint.transport == "stdio"
               else _http_streams(settings, endpoint, trouble, resolve, timeout_s))
    async with streams as (read, write), ClientSession(read, write, read_timeout_seconds=timeout_s,
                                                       message_handler=on_message) as client:
        await client.initialize()
        yield client


@dataclass(frozen=True)
class Listing:
    tools: list[Any]  # mcp.types.Tool, in the server's order
    truncated: bool  # the server lists more than ``limit``


async def list_tools(client: ClientSession, limit: int) -> Listing:
    tools: list[Any] = []
    cursor = None
    for _ in range(LIST_PAGES_MAX):
        from mcp_types import PaginatedRequestParams

        page = await client.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        if len(tools) > limit:
            return Listing(tools[:limit], True)
        cursor = page.next_cursor
        if not cursor:
            return Listing(tools, False)
    return Listing(tools, True)


class Guard:
    """Where a cancel lands: the request in flight (``scope``, set around it), so that the session stays
    up while the SDK tells the server (``notifications/cancelled``); before and after it, the whole work."""

    def __init__(self) -> None:
        self.scope: Any = None
        self.cancelled = False

    @contextlib.contextmanager
    def request(self) -> Any:
        import anyio

        with anyio.CancelScope() as scope:
            self.scope = scope
            try:
                yield
            finally:
                self.scope = None
        if scope.cancelled_caught:
            raise _Cancelled


class _Cancelled(Exception):
    pass


def run(work: Callable[[Guard], Any], *, timeout_s: float, cancel: Any = None, what: str, trouble: _Trouble) -> Any:
    """Run the coroutine ``work(guard)`` to its end in this thread: within ``timeout_s``; ended at once
    when ``cancel`` (a :class:`zerg.loop.tool.CancelSignal`) fires (the request in ``guard.request()``
    first, the server told). Every failure is an :class:`McpError`."""
    import anyio

    guard = Guard()

    async def main() -> Any:
        result: list[Any] = []
        async with anyio.create_task_group() as tasks:
            async def watch() -> None:
                await anyio.wait_readable(cancel.fileno())
                guard.cancelled = trouble.cancelled = True
                if guard.scope is not None:
                    guard.scope.cancel()
                else:
                    tasks.cancel_scope.cancel()

            async def body() -> None:
                with anyio.fail_after(timeout_s):
                    result.append(await work(guard))
                tasks.cancel_scope.cancel()

            if cancel is not None:
                tasks.start_soon(watch)
            tasks.start_soon(body)
        if guard.cancelled:
            raise _Cancelled
        return result[0]

    try:
        return in_own_loop(main)
    except BaseException as exc:  # an exception group, a timeout, the SDK's own errors: one line
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        if guard.cancelled:  # whatever the unwinding raised on its way out
            raise McpError(f"{what}: cancelled ({cancel.reason}); the server was told "
                           "(notifications/cancelled)") from None
        if isinstance(exc, McpError):
            raise
        raise McpError(f"{what}: {describe(exc, trouble, timeout_s)}") from None


def in_own_loop(main: Callable[[], Any]) -> Any:
    """``anyio.run(main)`` here, or in a thread of its own when this thread already runs an event loop
    (a caller inside async code, or a library's loop such as Playwright's sync API)."""
    import asyncio

    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(main)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="zerg-mcp") as pool:
        return pool.submit(anyio.run, main).result()


def describe(exc: BaseException, trouble: _Trouble, timeout_s: float) -> str:
    """One line for what happened, the transport's own finding first."""
    leaves = _leaves(exc)
    if trouble.reason:
        return trouble.reason
    if any(isinstance(e, TimeoutError) for e in leaves):
        return f"no answer within {timeout_s:g}s"
    for leaf in leaves:
        if isinstance(leaf, McpError):
            return str(leaf)
    leaf = leaves[0] if leaves else exc
    text = " ".join(str(leaf).split())[:300] or type(leaf).__name__
    err = bytes(trouble.stderr).decode("utf-8", "replace").strip().splitlines()
    return f"{type(leaf).__name__}: {text}" + (f" (server stderr: {err[-1][:200]})" if err else "")


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
