"""Other pages in the owner's browser: a cookie session changes nothing without the same-origin
proof (issue 25 item 3), and every answer carries nosniff and no-framing headers; a worker's file
is a download unless the viewer asks to see it (item 8). zerg.api.security."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.support.api import call, login
from tests.support.factories import make_finished_worker, make_run
from zerg.api.security import CLIENT_HEADER, origin_of
from zerg.auth import COOKIE

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
BIG_ID = "9007199254740000"  # a valid id (≤ MAX_ID) no row has: the route answers 404, not 403
# A body the route's model refuses (every body model forbids extra fields): a probe that reaches a
# route with a body gets 422, one without a body ignores it; neither changes anything.
PROBE = {"csrf_probe": True}


def unsafe_routes() -> list[tuple[str, str]]:
    """(method, path) of every POST, PUT, PATCH and DELETE route the resolver has, public ones
    included: taken from the router itself, so a route added later is tested too."""
    from zerg.api.app import build_app

    app = build_app()
    return sorted({(r.method, r.path) for r in app._static_routes + app._dynamic_routes  # noqa: SLF001
                   if r.method in UNSAFE})


def cookie_routes() -> list[tuple[str, str]]:
    from zerg.api.deps import PUBLIC_PATHS
    from zerg.api.mcpserver.http import PATH as MCP_PATH  # bearer only: a cookie is refused (test_mcp_server)

    return [(m, p) for m, p in unsafe_routes() if p not in PUBLIC_PATHS and p != MCP_PATH]


def concrete(path: str) -> str:
    """The route's path with every parameter filled with a value that names nothing."""
    values = {"session_id": str(uuid.uuid4()), "alias": "csrf-none", "agent": "supervisor"}
    out = path
    while "<" in out:
        start, end = out.index("<"), out.index(">")
        out = out[:start] + values.get(out[start + 1:end], BIG_ID) + out[end + 1:]
    return out


def test_the_enumeration_covers_every_documented_state_changing_operation_and_the_ones_the_issue_forged():
    from zerg.api.app import openapi_document

    documented = {(m.upper(), p) for p, ops in openapi_document()["paths"].items() for m in ops if m.upper() in UNSAFE}
    routed = {(m, p.replace("<", "{").replace(">", "}")) for m, p in unsafe_routes()}
    assert routed == documented
    forged_in_the_issue = {("POST", "/api/jarvis/workers/<job_id>/retry"), ("POST", "/api/jarvis/runs/<run_id>/cancel"),
                           ("POST", "/api/jarvis/inbox/<run_id>/ack"), ("POST", "/api/jarvis/push/test")}
    assert forged_in_the_issue <= set(cookie_routes())


@pytest.fixture
def browser_like(api_server, alice):
    """(base url, other origin, a function giving a fresh session token) for requests as a browser
    sends them to ``zerg serve``."""
    base, _ = api_server
    port = int(base.rsplit(":", 1)[1])
    other = f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}"
    return base, other, lambda: login(alice)


def _send(base: str, method: str, path: str, token: str, headers: dict, body: bytes = b"") -> httpx.Response:
    return httpx.request(method, base + path, content=body or None, timeout=30,
                         headers={"Cookie": f"{COOKIE}={token}", **headers})


def _refused(resp: httpx.Response, says: str) -> bool:
    return resp.status_code == 403 and resp.json()["error"] == "cross_origin" and says in resp.json()["message"]


@pytest.mark.parametrize(("method", "path"), cookie_routes(), ids=[f"{m} {p}" for m, p in cookie_routes()])
def test_a_cookie_route_refuses_another_origin_of_the_same_site_and_accepts_its_own_pages(browser_like, method, path):
    base, other, token_for = browser_like
    target, token = concrete(path), token_for()
    # A plain form on a page at another port of the same host: the browser adds the cookie
    # (same site), its Origin and Sec-Fetch-Site; a form cannot add a header.
    same_site = {"Origin": other, "Sec-Fetch-Site": "same-site"}
    form = _send(base, method, target, token, {**same_site, "Sec-Fetch-Mode": "navigate",
                                               "Content-Type": "application/x-www-form-urlencoded"}, b"csrf=1")
    assert _refused(form, f"this one shows Origin '{other}'"), form.text
    # fetch(..., {credentials: 'include'}) from that page, even with the client header (as if a
    # preflight had let it through): its origin is still another one.
    fetched = _send(base, method, target, token, {**same_site, "Sec-Fetch-Mode": "cors", CLIENT_HEADER: "web",
                                                  "Content-Type": "application/json"},
                    json.dumps(PROBE).encode())
    assert _refused(fetched, f"this one shows Origin '{other}'"), fetched.text
    # This server's own page without the header (a form of ours, or a hand-made request): refused.
    bare = _send(base, method, target, token, {"Origin": base, "Sec-Fetch-Site": "same-origin",
                                               "Content-Type": "application/json"}, json.dumps(PROBE).encode())
    assert _refused(bare, f"must carry the header {CLIENT_HEADER}"), bare.text
    # The web app itself: its origin and the header: the route answers (404 for an id that names
    # nothing, 422 for the probe body, 200 where the route needs neither).
    ours = _send(base, method, target, token, {"Origin": base, "Sec-Fetch-Site": "same-origin", CLIENT_HEADER: "web",
                                               "Content-Type": "application/json"}, json.dumps(PROBE).encode())
    assert ours.status_code not in (401, 403) and ours.status_code < 500 or ours.status_code == 503, ours.text
    assert "cross_origin" not in ours.text


def test_refused_requests_change_nothing_and_the_same_requests_from_the_app_do(browser_like, pool, alice):
    """The forgeries of the issue, by their effect: a run stays running, a failed worker gets no
    retry; the same two requests from the app's own pages cancel and retry."""
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    base, other, token_for = browser_like
    run_id, _ = make_run(pool, alice.owner_id, "keep running")
    job_id, _ = make_finished_worker(pool, get_runtime().store, alice.owner_id, None, "flaky task", status="failed")
    token = token_for()

    def run_count() -> int:
        with pool.connection() as conn:
            return conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s", (alice.owner_id,)).fetchone()["n"]

    before = run_count()
    forged = {"Origin": other, "Sec-Fetch-Site": "same-site", "Content-Type": "application/x-www-form-urlencoded"}
    for path in (f"/api/jarvis/runs/{run_id}/cancel", f"/api/jarvis/workers/{job_id}/retry"):
        assert _send(base, "POST", path, token, forged).status_code == 403
    with pool.connection() as conn:
        assert runs.get_run(conn, alice.owner_id, run_id)["status"] == "running"
    assert run_count() == before

    app = {"Origin": base, "Sec-Fetch-Site": "same-origin", CLIENT_HEADER: "web"}
    cancelled = _send(base, "POST", f"/api/jarvis/runs/{run_id}/cancel", token, app)
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    retried = _send(base, "POST", f"/api/jarvis/workers/{job_id}/retry", token, app)
    assert retried.status_code == 202 and run_count() == before + 1


def test_the_local_servers_own_scheme_decides_its_origin_not_a_clients_forwarded_proto(browser_like):
    base, _, token_for = browser_like
    # A browser that sends Origin but no Sec-Fetch-Site: the Origin is compared with the scheme the
    # server was reached by (http here); a client's X-Forwarded-Proto claims nothing.
    for forged in ({}, {"X-Forwarded-Proto": "https"}):
        ours = _send(base, "POST", "/api/jarvis/push/test", token_for(), {"Origin": base, CLIENT_HEADER: "web",
                                                                          **forged})
        assert "cross_origin" not in ours.text, (forged, ours.text)
    https = _send(base, "POST", "/api/jarvis/push/test", token_for(), {"Origin": base.replace("http:", "https:"),
                                                                       CLIENT_HEADER: "web", "X-Forwarded-Proto": "https"})
    assert _refused(https, "Origin"), https.text


def test_a_bearer_token_is_unaffected_by_origin_and_header(browser_like):
    base, other, token_for = browser_like
    resp = httpx.post(f"{base}/api/jarvis/runs/{BIG_ID}/cancel", headers={
        "Authorization": f"Bearer {token_for()}", "Origin": other, "Sec-Fetch-Site": "cross-site"})
    assert (resp.status_code, resp.json()["error"]) == (404, "not_found")


def test_signing_in_from_another_origin_is_refused_and_sets_no_cookie(browser_like, alice):
    """Login CSRF: another page must not sign the browser in to an account of its choosing."""
    base, other, token_for = browser_like
    owner_token = token_for()

    def sessions() -> int:
        listed = httpx.get(f"{base}/api/jarvis/sessions", headers={"Authorization": f"Bearer {owner_token}"})
        return len(listed.json()["sessions"])

    before = sessions()
    body = {"device_secret": alice.device_secret}
    for headers in ({"Origin": other, "Sec-Fetch-Site": "same-site"}, {"Origin": "null"},
                    {"Sec-Fetch-Site": "cross-site"}):
        resp = httpx.post(f"{base}/api/jarvis/auth", json=body, headers=headers)
        assert resp.status_code == 403 and "set-cookie" not in resp.headers, (headers, resp.text)
        assert resp.json()["message"].startswith("refused: this request comes from another origin")
    paired = httpx.post(f"{base}/api/jarvis/pair", json={"code": "ABCDE-FGHJK", "device_name": "x"},
                        headers={"Origin": other, "Sec-Fetch-Site": "same-site"})
    assert paired.status_code == 403
    assert sessions() == before

    cli = httpx.post(f"{base}/api/jarvis/auth", json=body)  # no browser: no Origin, no Sec-Fetch-Site
    assert cli.status_code == 200
    app = httpx.post(f"{base}/api/jarvis/auth", json=body, headers={"Origin": base, "Sec-Fetch-Site": "same-origin",
                                                                    CLIENT_HEADER: "web"})
    assert app.status_code == 200
    cookie = app.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "SameSite=Strict" in cookie and "HttpOnly" in cookie


def _event_call(method: str, path: str, token: str, headers: dict):
    """The Lambda path: the event as API Gateway delivers it behind CloudFront (the API's own host,
    https), the session in the cookie."""
    return call(method, path, headers={"host": "abc123.execute-api.eu-west-1.amazonaws.com",
                                       "x-forwarded-proto": "https", "cookie": f"{COOKIE}={token}", **headers})


def test_under_lambda_the_configured_public_origin_or_sec_fetch_site_is_the_proof(alice, runtime_env):
    runtime_env(ZERG_PUBLIC_URL="https://jarvis.example.org/")
    token = login(alice)
    path = f"/api/jarvis/runs/{BIG_ID}/cancel"
    app = {CLIENT_HEADER: "web"}
    # An old browser (no Sec-Fetch-Site): its Origin is the configured public URL's.
    assert _event_call("POST", path, token, {**app, "origin": "https://jarvis.example.org"})[0] == 404
    assert _event_call("POST", path, token, {**app, "origin": "https://JARVIS.example.org:443"})[0] == 404
    # A current browser on the distribution's own domain, which no setting names: Sec-Fetch-Site.
    assert _event_call("POST", path, token, {**app, "origin": "https://d111.cloudfront.net",
                                             "sec-fetch-site": "same-origin"})[0] == 404
    for origin in ("https://evil.example.org", "http://jarvis.example.org", "https://jarvis.example.org:8443", "null"):
        status, body, _ = _event_call("POST", path, token, {**app, "origin": origin})
        assert (status, body["error"]) == (403, "cross_origin"), origin
    status, body, _ = _event_call("POST", path, token, {**app, "sec-fetch-site": "same-site"})
    assert status == 403 and "Sec-Fetch-Site 'same-site'" in body["message"]
    status, body, _ = _event_call("POST", path, token, app)  # no evidence at all: refused, with what to send
    assert status == 403 and "no Origin or Sec-Fetch-Site header" in body["message"]
    # The API's own host (a request straight to API Gateway) is its own origin.
    own = "https://abc123.execute-api.eu-west-1.amazonaws.com"
    assert _event_call("POST", path, token, {**app, "origin": own})[0] == 404
    # Reads are unaffected.
    assert _event_call("GET", "/api/jarvis/thread", token, {"origin": "https://evil.example.org"})[0] == 200


def test_origin_of_normalises_case_and_default_ports_and_rejects_what_is_no_origin():
    assert origin_of("HTTPS://Example.ORG:443") == "https://example.org"
    assert origin_of("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert origin_of("http://[::1]:80") == "http://[::1]"
    for bad in ("null", "", "file:///etc", "https://", "http://x:99999", "javascript:alert(1)"):
        assert origin_of(bad) is None, bad


def _has_security_headers(headers) -> bool:
    """nosniff, DENY and a policy with frame-ancestors 'none' (the web app's own is longer)."""
    lowered = {k.lower(): v for k, v in dict(headers).items()}
    policy = [p.strip() for p in lowered.get("content-security-policy", "").split(";")]
    return (lowered.get("x-content-type-options") == "nosniff" and lowered.get("x-frame-options") == "DENY"
            and "frame-ancestors 'none'" in policy)


def test_every_api_answer_carries_nosniff_and_no_framing(alice, runtime_env):
    runtime_env()
    token = login(alice)
    answers = {
        "200 JSON": call("GET", "/api/jarvis/thread", token=token),
        "401": call("GET", "/api/jarvis/thread"),
        "404 no route": call("GET", "/api/jarvis/nothing-here", token=token),
        "405": call("GET", "/api/jarvis/contacts/verify", token=token),
        "422": call("GET", "/api/jarvis/runs?limit=0", token=token),
        "403 cross origin": call("POST", "/api/jarvis/logout",
                                 headers={"cookie": f"{COOKIE}={token}", "origin": "http://x"}),
        "openapi.json": call("GET", "/api/openapi.json"),
        "docs page": call("GET", "/api/docs"),
    }
    for name, (status, _, raw) in answers.items():
        assert _has_security_headers(raw["headers"]), (name, status, raw["headers"])
    assert answers["403 cross origin"][0] == 403


def test_the_local_server_adds_them_to_its_own_answers_and_static_pages(api_server, alice):
    base, _ = api_server
    token = login(alice)
    auth = {"Authorization": f"Bearer {token}"}
    assert _has_security_headers(httpx.get(f"{base}/api/jarvis/thread", headers=auth).headers)
    assert _has_security_headers(httpx.get(f"{base}/").headers)  # the web app (or its 503 "not built")
    with httpx.stream("GET", f"{base}/api/jarvis/events", headers=auth) as live:
        assert live.headers["content-type"] == "text/event-stream" and _has_security_headers(live.headers)
    too_large = httpx.post(f"{base}/api/jarvis/route", headers={**auth, "Content-Type": "application/json"},
                           content=b"x" * 1_000_001)
    assert too_large.status_code == 413 and _has_security_headers(too_large.headers)


def test_a_worker_file_is_a_download_unless_the_viewer_asks_to_see_it(api_server, alice, pool):
    from zerg.wiring import get_runtime

    base, _ = api_server
    job_id, _ = make_finished_worker(pool, get_runtime().store, alice.owner_id, None, "write a page",
                                     result="<html><script>alert(1)</script></html>")
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {login(alice)}"})
    files = [f["path"] for f in client.get(f"/api/jarvis/workers/{job_id}").json()["files"]]
    assert files
    for path in files:
        url = f"/api/jarvis/workers/{job_id}/files/{httpx.URL(path).path}"
        name = path.rsplit("/", 1)[-1]
        for query, headers, status, kind in (("", {}, 200, "attachment"), ("?inline=true", {}, 200, "inline"),
                                             ("", {"Range": "bytes=0-3"}, 206, "attachment"),
                                             ("?inline=1", {"Range": "bytes=0-3"}, 206, "inline")):
            resp = client.get(url + query, headers=headers)
            assert resp.status_code == status, (path, resp.text)
            assert resp.headers["content-disposition"] == f"{kind}; filename=\"{name}\"; filename*=UTF-8''{name}"
            assert resp.headers["content-security-policy"] == "default-src 'none'; sandbox; frame-ancestors 'none'"
            assert resp.headers["x-content-type-options"] == "nosniff" and resp.headers["x-frame-options"] == "DENY"
    missing = client.get(f"/api/jarvis/workers/{job_id}/files/nothing.txt")
    assert missing.status_code == 404 and "content-disposition" not in missing.headers


def test_a_file_name_outside_ascii_is_named_in_utf8_with_an_ascii_fallback():
    from zerg.api.routes.workers import disposition

    assert disposition("tool_calls/ré\"sumé.txt", False) == (
        "attachment; filename=\"r__sum_.txt\"; filename*=UTF-8''r%C3%A9%22sum%C3%A9.txt")
    assert disposition("a.txt", True) == "inline; filename=\"a.txt\"; filename*=UTF-8''a.txt"
