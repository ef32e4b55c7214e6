"""``http_request``: a curl-equivalent that cannot be turned against the network it runs in.

Invariants:
- http and https only; at most 5 redirects, each hop checked again.
- Every address a host name resolves to is checked: private, loopback, link-local (cloud
  metadata included), multicast, reserved and unspecified addresses are refused unless a
  network in ``ZERG_HTTP_ALLOW_NETWORKS`` contains them.
- The response body is capped for the model; the artifact keeps up to the storage bound.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Literal
from urllib.parse import urljoin, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from zerg.tools.base import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, cap, error

MAX_REDIRECTS = 5
Resolver = Callable[[str, int], list[str]]
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class HTTPRequestArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, max_length=4000, description="http(s) URL")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    headers: dict[str, str] | None = Field(default=None, description="Request headers")
    body: str | None = Field(default=None, max_length=1_000_000, description="Request body")


def system_resolver(host: str, port: int) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})


def check_destination(url: str, ctx: ToolContext, resolve: Resolver) -> str | None:
    """None if ``url`` may be fetched, else the reason it may not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"only http and https URLs are allowed, not {parts.scheme or 'no scheme'!r}"
    if not parts.hostname:
        return f"URL {url!r} has no host"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve(parts.hostname, port)
    except OSError as exc:
        return f"cannot resolve {parts.hostname}: {exc}"
    if not addresses:
        return f"{parts.hostname} resolves to no address"
    allowed = ctx.settings.http_allow_networks
    for text in addresses:
        addr = ipaddress.ip_address(text.split("%")[0])
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
            addr = addr.ipv4_mapped
        if any(addr in net for net in allowed):
            continue
        if addr in _METADATA:
            return f"{parts.hostname} resolves to {addr}, the cloud metadata address: refused"
        if (addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_multicast
                or addr.is_reserved or addr.is_unspecified):
            return (f"{parts.hostname} resolves to {addr}, a private/loopback/link-local address: "
                    "refused (allow it with ZERG_HTTP_ALLOW_NETWORKS)")
    return None


def make_http_request(resolve: Resolver = system_resolver) -> Callable[[HTTPRequestArgs, ToolContext], ToolOutcome]:
    def http_request(args: HTTPRequestArgs, ctx: ToolContext) -> ToolOutcome:
        import httpx

        url, method, body = args.url, args.method, args.body
        timeout = ctx.bounded(30.0)
        start = time.monotonic()
        with httpx.Client(follow_redirects=False, timeout=max(0.5, timeout)) as client:
            for hop in range(MAX_REDIRECTS + 1):
                reason = check_destination(url, ctx, resolve)
                if reason:
                    return error(reason)
                try:
                    with client.stream(method, url, headers=args.headers, content=body) as resp:
                        data = bytearray()
                        for chunk in resp.iter_bytes():
                            data += chunk
                            if len(data) >= ARTIFACT_OUTPUT_CAP:
                                break
                except httpx.HTTPError as exc:
                    return error(f"{method} {url} failed: {type(exc).__name__}: {exc}")
                if resp.is_redirect and "location" in resp.headers:
                    if hop == MAX_REDIRECTS:
                        return error(f"more than {MAX_REDIRECTS} redirects; stopped at {url}")
                    url = urljoin(url, resp.headers["location"])
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
        "Make an HTTP(S) request to a public address (private and metadata addresses are "
        "refused). Returns status, content type and the (capped) body."
    ),
    args=HTTPRequestArgs,
    run=make_http_request(),
)
