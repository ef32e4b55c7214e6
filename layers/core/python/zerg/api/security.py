"""What protects the API from other pages in the owner's browser: the same-origin proof that a
cookie session needs to change anything (CSRF), and the headers every API answer carries.

Invariants:
- A POST, PUT, PATCH or DELETE that authenticates with the session cookie (no ``Authorization:
  Bearer``) is refused with 403 ``cross_origin`` unless it proves it comes from this server's own
  pages, twice: its origin is ours (``Sec-Fetch-Site: same-origin``, or an ``Origin`` header that
  is one of :func:`own_origins`) *and* it carries ``X-Zerg-Client`` (the web app sends it on every
  request; a page on another origin cannot add a header without a CORS preflight, which is never
  granted). Bearer tokens are unaffected: a page cannot make a browser send one.
- A state-changing request without credentials (the public routes: signing in, pairing) is
  refused the same way when the browser says it comes from another origin (``Sec-Fetch-Site`` or
  ``Origin`` present and not ours): no other page can sign the browser in to an account of its
  choosing (login CSRF). A client that is not a browser sends neither header and is unaffected.
- The check runs before routing, on every path, so a route added later cannot miss it; it needs
  no database (a forged request is refused before its session is even looked up).
- "Our origin" is the origin the request was addressed to (the scheme, from ``X-Forwarded-Proto``
  when present — API Gateway sets it — else ``http`` under ``zerg serve`` and ``https`` under API
  Gateway; and the ``Host`` header), plus the origin of ``ZERG_PUBLIC_URL`` when it is set: on AWS
  the browser's origin is the CloudFront distribution, which API Gateway's Host never names, so a
  browser that sends no ``Sec-Fetch-Site`` is recognised only through that setting.
- Every API answer carries :data:`SECURITY_HEADERS` (``nosniff``, no framing) unless the route set
  its own value of one (a worker file sets a stricter Content-Security-Policy).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from zerg.api.errors import ApiError

CLIENT_HEADER = "X-Zerg-Client"  # what the web app sends with every request ("web")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
}
ERROR = "cross_origin"
BEARER_HINT = "other clients authenticate with 'Authorization: Bearer <token>' from POST /api/jarvis/auth"


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of a URL or an Origin header, lower-cased, the scheme's default port
    left out; None when it is not an http(s) origin (``null``, garbage)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def _headers(event: dict[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}


def own_origins(event: dict[str, Any], public_url: str | None) -> set[str]:
    """The origins a request to this server may come from: the one it was addressed to, and the
    configured public one (``ZERG_PUBLIC_URL``)."""
    headers = _headers(event)
    context = event.get("requestContext") or {}
    host = headers.get("host") or context.get("domainName") or ""
    proto = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    scheme = proto or ("http" if context.get("apiId") == "local" else "https")
    origins = {o for o in (origin_of(f"{scheme}://{host}") if host else None,
                           origin_of(public_url) if public_url else None) if o}
    return origins


def _same_origin(headers: dict[str, str], origins: set[str]) -> bool:
    if headers.get("sec-fetch-site", "").strip().lower() == "same-origin":
        return True
    origin = headers.get("origin")
    return origin is not None and origin_of(origin) in origins


def _described(headers: dict[str, str]) -> str:
    """How the request said where it came from, for the refusal's message."""
    said = []
    if "origin" in headers:
        said.append(f"Origin {headers['origin'][:200]!r}")
    if "sec-fetch-site" in headers:
        said.append(f"Sec-Fetch-Site {headers['sec-fetch-site'][:40]!r}")
    return " and ".join(said) or "no Origin or Sec-Fetch-Site header"


def refusal(event: dict[str, Any], public_url: str | None) -> ApiError | None:
    """The 403 for a request another origin may have forged (the module's invariants), or None."""
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "")).upper()
    if method not in UNSAFE_METHODS:
        return None
    headers = _headers(event)
    if headers.get("authorization", "").lower().startswith("bearer "):
        return None
    from zerg.api.deps import session_cookie

    origins = own_origins(event, public_url)
    ours = " or ".join(sorted(origins)) or "this server's origin"
    if session_cookie(event.get("cookies")) is None:
        if ("origin" in headers or "sec-fetch-site" in headers) and not _same_origin(headers, origins):
            return ApiError(403, ERROR, f"refused: this request comes from another origin ({_described(headers)}; "
                            f"this server is {ours}); sign in from this server's own pages")
        return None
    if not _same_origin(headers, origins):
        return ApiError(403, ERROR, f"refused: a {method} with the session cookie must come from this server's own "
                        f"pages ({ours}), and this one shows {_described(headers)}; {BEARER_HINT}")
    if not headers.get(CLIENT_HEADER.lower(), "").strip():
        return ApiError(403, ERROR, f"refused: a {method} with the session cookie must carry the header "
                        f"{CLIENT_HEADER} (the Jarvis web app sends it); {BEARER_HINT}")
    return None


def with_security_headers(result: dict[str, Any]) -> dict[str, Any]:
    """A resolver's answer (API Gateway v2 shape) with :data:`SECURITY_HEADERS` added where absent."""
    headers = result.setdefault("headers", {})
    present = {k.lower() for k in headers}
    for name, value in SECURITY_HEADERS.items():
        if name.lower() not in present:
            headers[name] = value
    return result
