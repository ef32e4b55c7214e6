"""The built web app (``web/dist``) as ``zerg serve`` serves it: every GET/HEAD outside ``/api/``.

Invariants:
- Only regular files inside the web root are read: a path is percent-decoded once, refused when a
  segment is ``.`` or ``..`` (or holds a NUL or a backslash), and the resolved file must still lie
  under the resolved root, so neither ``/../``, ``%2e%2e`` nor a symlink pointing out escapes it.
- A path that names no file and has no extension is the single-page app's: it gets ``index.html``
  (hash routes never reach the server, but a reload of ``/dashboard`` must not 404). A missing file
  with an extension is a 404, so a broken asset link is visible, not answered with HTML.
- Every answer carries a strict Content-Security-Policy (self only: no inline script, no other
  origin to connect to), ``X-Content-Type-Options: nosniff`` and a ``Cache-Control``: hashed
  assets (``assets/``, named by Vite after their content) are immutable for a year, everything
  else (``index.html``, ``sw.js``) is revalidated each time (``no-cache`` with an ETag).
- Text assets are gzip-compressed when the client accepts it: a precompressed ``NAME.gz`` beside
  the file when it exists, else compressed once per file version and kept in a small cache.
- When the app is not built, ``/`` and every other page answers 503 saying how to build it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

BUILD_HINT = ("the web app is not built: install Node.js 20+ with npm (apt-get install nodejs npm) and start "
              "./dev.sh serve, which builds it (or run `npm ci && npm run build` in web/)")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
       "connect-src 'self'; worker-src 'self'; manifest-src 'self'; media-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
)
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
TYPES = {
    ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
    ".json": "application/json", ".webmanifest": "application/manifest+json", ".map": "application/json",
    ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".gif": "image/gif", ".webp": "image/webp", ".ico": "image/x-icon", ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2", ".woff": "font/woff", ".wasm": "application/wasm",
}
COMPRESSIBLE = (".html", ".js", ".mjs", ".css", ".json", ".webmanifest", ".map", ".svg", ".txt")
MIN_GZIP_BYTES = 512
MAX_FILE_BYTES = 20_000_000  # a built app's largest asset is far below; anything bigger is not ours


@dataclass
class StaticAnswer:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def package_web_dir() -> Path:
    """``web/dist`` of the source checkout this package lives in (layers/core/python/zerg/local/ → repo)."""
    return Path(__file__).resolve().parents[5] / "web" / "dist"


def web_root(configured: Path | None) -> Path | None:
    """The built app's directory: ZERG_WEB_DIR, else the checkout's web/dist; None when it has no index.html."""
    root = configured if configured is not None else package_web_dir()
    try:
        root = root.resolve()
    except OSError:
        return None
    return root if (root / "index.html").is_file() else None


def is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def _error(status: int, error: str, message: str, extra: list[tuple[str, str]] | None = None) -> StaticAnswer:
    body = json.dumps({"error": error, "message": message}).encode()
    return StaticAnswer(status, [("content-type", "application/json"), ("cache-control", "no-store"),
                                 *SECURITY_HEADERS, *(extra or [])], body)


def _relative(raw_path: str) -> str | None:
    """The path below the root ('' for /), or None when it is not one a file of the root can have."""
    decoded = unquote(raw_path, errors="strict") if "%" in raw_path else raw_path
    if "\x00" in decoded or "\\" in decoded:
        return None
    segments = [s for s in decoded.split("/") if s]
    if any(s in (".", "..") for s in segments):
        return None
    return "/".join(segments)


def _inside(root: Path, candidate: Path) -> Path | None:
    """The candidate's real path when it is a regular file under the root (symlinks resolved)."""
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if real != root and root not in real.parents:
        return None
    return real if real.is_file() else None


@lru_cache(maxsize=256)
def _gzipped(path: str, mtime_ns: int, size: int) -> bytes:
    """The file compressed (keyed by its version, so an edited file is compressed again)."""
    with open(path, "rb") as fh:
        return gzip.compress(fh.read(), compresslevel=9, mtime=0)


def _accepts_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().lower()
            return not (q.startswith("q=") and q[2:].strip() in ("0", "0.0", "0.00", "0.000"))
    return False


def serve(method: str, raw_path: str, headers: dict[str, str], configured: Path | None) -> StaticAnswer:
    """The answer to a GET/HEAD of a non-API path (``headers`` lower-cased)."""
    if method not in ("GET", "HEAD"):
        return _error(405, "method_not_allowed", f"{method} is not allowed on {raw_path}: the web app is read-only",
                      [("allow", "GET, HEAD")])
    root = web_root(configured)
    if root is None:
        return _error(503, "unavailable", BUILD_HINT)
    try:
        rel = _relative(raw_path)
    except UnicodeDecodeError:
        rel = None
    if rel is None:
        return _error(400, "bad_path", f"{raw_path!r} is not a path inside the web app")
    real = _inside(root, root / rel) if rel else None
    if real is None and rel:
        last = rel.rsplit("/", 1)[-1]
        if "." in last:
            return _error(404, "not_found", f"/{rel} is not part of the web app")
    if real is None:  # the app's own routes: index.html
        rel, real = "index.html", _inside(root, root / "index.html")
        if real is None:
            return _error(503, "unavailable", BUILD_HINT)
    return _file(method, rel, real, headers)


def _file(method: str, rel: str, real: Path, headers: dict[str, str]) -> StaticAnswer:
    stat = real.stat()
    if stat.st_size > MAX_FILE_BYTES:
        return _error(413, "payload_too_large", f"/{rel} is over {MAX_FILE_BYTES} bytes")
    suffix = real.suffix.lower()
    kind = TYPES.get(suffix, "application/octet-stream")
    cache = IMMUTABLE if rel.startswith("assets/") else REVALIDATE
    tag = '"' + hashlib.sha1(f"{rel}:{stat.st_mtime_ns}:{stat.st_size}".encode()).hexdigest()[:20] + '"'
    out = [("content-type", kind), ("cache-control", cache), ("etag", tag), *SECURITY_HEADERS]
    compressible = suffix in COMPRESSIBLE
    if compressible:
        out.append(("vary", "Accept-Encoding"))
    if tag in [t.strip() for t in headers.get("if-none-match", "").split(",")]:
        return StaticAnswer(304, [h for h in out if h[0] != "content-type"])
    body: bytes | None = None
    if compressible and stat.st_size >= MIN_GZIP_BYTES and _accepts_gzip(headers.get("accept-encoding", "")):
        pre = real.with_name(real.name + ".gz")
        if pre.is_file() and not pre.is_symlink():
            body = pre.read_bytes()
        else:
            body = _gzipped(os.fspath(real), stat.st_mtime_ns, stat.st_size)
        out.append(("content-encoding", "gzip"))
    if body is None:
        body = real.read_bytes()
    if method == "HEAD":
        return StaticAnswer(200, out + [("content-length", str(len(body)))], b"")
    return StaticAnswer(200, out, body)
