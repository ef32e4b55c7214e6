"""``http_request``: a curl-equivalent that cannot be turned against the network it runs in.

Invariants:
- http and https only; at most 5 redirects, each hop checked again.
- With ``ZERG_HTTP_ALLOW_HOSTS`` set, a host that matches none of its patterns is refused before
  any DNS lookup, on the first request and on every redirect hop (:mod:`zerg.egress`).
- Every address a host name resolves to is checked (:func:`zerg.egress.refusal`): anything
  not globally routable (private, loopback, link-local with cloud metadata, CGNAT, reserved,
  unspecified, multicast, site-local, ULA, documentation, and IPv6 forms carrying such an IPv4
  address) is refused unless a network in ``ZERG_HTTP_ALLOW_NETWORKS`` contains it. The
  connection then goes to the checked address itself (Host header and TLS server name keep the
  original name), so a DNS answer that changes between check and connect (rebinding) cannot
  redirect it.
- Credentials (Authorization, Cookie) are not forwarded to another origin on a redirect. A URL
  carrying credentials (``user:password@host``), first or on a redirect hop, is refused without
  echoing it; nothing but the host name and a non-default port goes into the Host header.
- The response body is capped for the model; the artifact keeps up to the storage bound.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from zerg import egress
from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, cap, error

MAX_REDIRECTS = 5
Resolver = Callable[[str, int], list[str]]


class HTTPRequestArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, max_length=4000, description="http(s) URL")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    headers: dict[str, str] | None = Field(default=None, description="Request headers")
    body: str | None = Field(default=None, max_length=1_000_000, description="Request body")


def system_resolver(host: str, port: int) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})


def check_destination(url: str, ctx: ToolContext, resolve: Resolver) -> tuple[str | None, str | None]:
    """(None, address to connect to) if ``url`` may be fetched, else (the reason, None)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"only http and https URLs are allowed, not {parts.scheme or 'no scheme'!r}", None
    if "@" in parts.netloc:  # never echoed: the URL would carry them into the model's context
        return ("URLs with credentials (user:password@host) are refused: send them in an "
                "Authorization header instead"), None
    if not parts.hostname:
        return f"URL {url!r} has no host", None
    allowed_hosts = ctx.settings.http_allow_hosts
    if allowed_hosts and not egress.host_allowed(parts.hostname, allowed_hosts):
        return (f"host {parts.hostname} is not in ZERG_HTTP_ALLOW_HOSTS ({', '.join(allowed_hosts)}): "
                "refused"), None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve(parts.hostname, port)
    except OSError as exc:
        return f"cannot resolve {parts.hostname}: {exc}", None
    if not addresses:
        return f"{parts.hostname} resolves to no address", None
    allowed = ctx.settings.http_allow_networks
    for text in addresses:
        addr = ipaddress.ip_address(text.split("%")[0])
        # An IPv4-mapped address is a connection to its IPv4 address: allow it as that address.
        mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
        if any(addr in net or (mapped is not None and mapped in net) for net in allowed):
            continue
        if addr in egress.METADATA:
            return f"{parts.hostname} resolves to {addr}, the cloud metadata address: refused", None
        if why := egress.refusal(addr):
            return (f"{parts.hostname} resolves to {addr}, {why}: "
                    "refused (allow it with ZERG_HTTP_ALLOW_NETWORKS)"), None
    return None, addresses[0]


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _pinned(url: str, address: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL with its host replaced by the checked address (no second DNS lookup that could
    answer differently), plus the Host header and TLS server name that keep it the same request.
    The Host header is the host name (IPv6 in brackets) and a port other than the scheme's."""
    parts = urlsplit(url)
    hostname = parts.hostname or ""
    netloc = f"{_bracketed(address)}:{parts.port}" if parts.port else _bracketed(address)
    default = 443 if parts.scheme == "https" else 80
    host = _bracketed(hostname) + (f":{parts.port}" if parts.port and parts.port != default else "")
    extensions = {"sni_hostname": hostname} if parts.scheme == "https" else {}
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), {"Host": host}, extensions


_CREDENTIALS = {"authorization", "cookie", "proxy-authorization"}


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def make_http_request(
    resolve: Resolver = system_resolver, verify: Any = True
) -> Callable[[HTTPRequestArgs, ToolContext], ToolOutcome]:
    """The tool function; ``resolve`` and ``verify`` (TLS trust) are injectable for tests."""
    def http_request(args: HTTPRequestArgs, ctx: ToolContext) -> ToolOutcome:
        import httpx

        url, method, body = args.url, args.method, args.body
        headers = dict(args.headers or {})
        budget = ctx.bounded(30.0)
        start = time.monotonic()
        deadline = start + budget
        with httpx.Client(follow_redirects=False, timeout=max(0.5, budget), verify=verify) as client:
            for hop in range(MAX_REDIRECTS + 1):
                reason, address = check_destination(url, ctx, resolve)
                if reason:
                    return error(f"redirect to {_without_credentials(url)}: {reason}" if hop else reason)
                target, host_header, extensions = _pinned(url, address)
                try:
                    with client.stream(method, target, headers={**headers, **host_header}, content=body,
                                       extensions=extensions) as resp:
                        data = bytearray()
                        for chunk in resp.iter_bytes():
                            data += chunk
                            if len(data) >= ARTIFACT_OUTPUT_CAP:
                                break
                            if time.monotonic() > deadline:  # a slow drip cannot outlive the budget
                                return error(f"{method} {url}: the response did not finish within {budget:.0f}s")
                except httpx.HTTPError as exc:
                    return error(f"{method} {url} failed: {type(exc).__name__}: {exc}")
                if resp.is_redirect and "location" in resp.headers:
                    if hop == MAX_REDIRECTS:
                        return error(f"more than {MAX_REDIRECTS} redirects; stopped at {url}")
                    new_url = urljoin(url, resp.headers["location"])
                    if urlsplit(new_url)[:2] != urlsplit(url)[:2]:  # another origin: no credentials
                        headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIALS}
                    url = new_url
                    if resp.status_code in (301, 302, 303) and method != "HEAD":
                        method, body = "GET", None
                    continue
                break
        ms = int((time.monotonic() - start) * 1000)
        text_body = bytes(data).decode(resp.encoding or "utf-8", "replace")
        head = [f"{method} {url}", f"status: {resp.status_code}", f"duration_ms: {ms}",
                f"content-type: {resp.headers.get('content-type', '')}", "--- body ---"]
        full = "\n".join(head + [text_body])
        model = "\n".join(head + [cap(text_body, ctx.settings.http_body_cap)])
        return ToolOutcome(text=model, artifact=full, ok=resp.status_code < 400, exit_code=resp.status_code)

    return http_request


TOOL = Tool(
    name="http_request",
    description=(
        "Make an HTTP(S) request to a public address (private and metadata addresses, and hosts "
        "outside the configured allowlist, are refused). Returns status, content type and the "
        "(capped) body."
    ),
    args=HTTPRequestArgs,
    run=make_http_request(),
)
