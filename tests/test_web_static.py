"""``zerg serve`` serving the built web app: SPA fallback, types, caching, CSP, gzip, no escape."""

from __future__ import annotations

import gzip
import os
import socket

import httpx
import pytest

INDEX = "<!doctype html><html><head><script type=module src=/assets/app-1a2b3c.js></script></head><body></body></html>"
APP_JS = "console.log('zerg');\n" * 200  # over the gzip threshold


@pytest.fixture
def web_dir(tmp_path):
    """A built app as Vite lays it out, plus a secret file beside it that must never be served."""
    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(INDEX)
    (root / "assets" / "app-1a2b3c.js").write_text(APP_JS)
    (root / "assets" / "app-1a2b3c.css").write_text("body{color:red}")
    (root / "sw.js").write_text("self.addEventListener('push', () => {});")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    os.symlink(tmp_path, root / "up")
    return root


@pytest.fixture
def served(runtime_env, web_dir):
    from zerg.local.server import make_server

    runtime_env(ZERG_WEB_DIR=str(web_dir))
    server = make_server("127.0.0.1", 0).start()
    yield server
    server.stop()


def raw_get(port: int, target: str, extra: str = "") -> tuple[int, bytes]:
    """A request with the target exactly as written (httpx would normalise dot segments)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_the_index_is_served_with_a_strict_policy_and_revalidated(served):
    resp = httpx.get(served.url + "/")
    assert resp.status_code == 200
    assert resp.text == INDEX
    assert resp.headers["content-type"] == "text/html; charset=utf-8"
    assert resp.headers["cache-control"] == "no-cache"
    csp = resp.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert resp.headers["x-content-type-options"] == "nosniff"
    again = httpx.get(served.url + "/", headers={"If-None-Match": resp.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_hashed_assets_are_immutable_and_typed(served):
    js = httpx.get(served.url + "/assets/app-1a2b3c.js")
    assert js.status_code == 200 and js.text == APP_JS
    assert js.headers["content-type"].startswith("text/javascript")
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    css = httpx.get(served.url + "/assets/app-1a2b3c.css")
    assert css.headers["content-type"].startswith("text/css")
    sw = httpx.get(served.url + "/sw.js")
    assert sw.headers["cache-control"] == "no-cache"  # a service worker must update


def test_app_routes_fall_back_to_the_index_but_missing_assets_are_404(served):
    page = httpx.get(served.url + "/dashboard/workers")
    assert page.status_code == 200 and page.text == INDEX
    missing = httpx.get(served.url + "/assets/gone-123.js")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_gzip_when_the_client_accepts_it_and_identity_otherwise(served):
    zipped = httpx.get(served.url + "/assets/app-1a2b3c.js", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.text == APP_JS  # httpx decodes it
    assert int(zipped.headers["content-length"]) < len(APP_JS) / 5
    assert "Accept-Encoding" in zipped.headers["vary"]
    plain = httpx.get(served.url + "/assets/app-1a2b3c.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text == APP_JS
    refused = httpx.get(served.url + "/assets/app-1a2b3c.js", headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers


def test_a_precompressed_file_is_sent_as_it_is(served, web_dir):
    marker = gzip.compress(b"precompressed" * 100)
    (web_dir / "assets" / "app-1a2b3c.js.gz").write_bytes(marker)
    resp = httpx.get(served.url + "/assets/app-1a2b3c.js", headers={"Accept-Encoding": "gzip"})
    assert resp.text == "precompressed" * 100


def test_head_answers_the_headers_without_the_body(served):
    resp = httpx.head(served.url + "/assets/app-1a2b3c.js", headers={"Accept-Encoding": "identity"})
    assert resp.status_code == 200 and resp.content == b""
    assert resp.headers["content-length"] == str(len(APP_JS))


@pytest.mark.parametrize("target", [
    "/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt", "/assets/%2E%2E/%2e%2e/secret.txt",
    "/..%2fsecret.txt", "/%2e%2e%5csecret.txt", "/a%00b", "/%ff%fe",
])
def test_no_path_leaves_the_web_root(served, target):
    status, data = raw_get(served.port, target)
    assert b"TOP SECRET" not in data
    assert status == 400, data


def test_symlinks_out_of_the_root_are_not_followed(served):
    for target in ("/leak.txt", "/up/secret.txt"):
        status, data = raw_get(served.port, target)
        assert b"TOP SECRET" not in data
        assert status == 404, data


def test_writes_to_the_app_are_refused_and_the_api_is_still_the_api(served):
    post = httpx.post(served.url + "/index.html", content=b"x")
    assert post.status_code == 405 and post.json()["error"] == "method_not_allowed"
    api = httpx.get(served.url + "/api/jarvis/thread")
    assert api.status_code == 401  # the API's answer, not the app's index
    assert api.json()["error"] == "unauthorized"


def test_an_unbuilt_app_says_how_to_build_it(runtime_env, tmp_path):
    from zerg.local.server import make_server

    runtime_env(ZERG_WEB_DIR=str(tmp_path / "nowhere"))
    server = make_server("127.0.0.1", 0).start()
    try:
        resp = httpx.get(server.url + "/")
    finally:
        server.stop()
    assert resp.status_code == 503
    assert "npm ci && npm run build" in resp.json()["message"]


def test_absolute_looking_paths_stay_inside_the_root(served):
    status, data = raw_get(served.port, "//etc/passwd")
    assert status == 200 and b"root:" not in data
    assert data.endswith(INDEX.encode())  # the app's own route, not the system file


def test_the_default_web_dir_is_the_checkouts_web_dist():
    from pathlib import Path

    from zerg.local import static

    repo = Path(__file__).resolve().parents[1]
    assert static.package_web_dir() == repo / "web" / "dist"
