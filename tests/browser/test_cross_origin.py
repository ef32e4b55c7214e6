"""Issue 25 item 3 in a real Chromium: a page on another loopback port (the same site, so the
browser sends the SameSite=Strict session cookie along) posts a form and makes credentialed
fetches to the API of the signed-in owner; every one is refused and nothing changes. The same
request from the app's own page succeeds, so the cookie was there to be forged with."""

from __future__ import annotations

import contextlib
import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from playwright.sync_api import expect

from tests.support.browser import WAIT_MS
from tests.support.factories import make_run
from tests.support.waiting import wait_for


@contextlib.contextmanager
def other_page(forms: dict[str, str]):
    """A page served on another port of 127.0.0.1: one form per (button name -> action URL)."""
    body = "<!doctype html><title>elsewhere</title>" + "".join(
        f'<form method="post" action="{html.escape(url)}"><input type="hidden" name="x" value="1">'
        f'<button type="submit">{html.escape(name)}</button></form>' for name, url in forms.items())

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def count_runs(conn, owner_id: int) -> int:
    return conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s", (owner_id,)).fetchone()["n"]


def seen(page, predicate, what: str) -> None:
    """Wait for DevTools events to show ``predicate`` (the sync API delivers events only while one
    of its own calls runs, hence the 1 ms one in each poll)."""
    wait_for(lambda: page.wait_for_timeout(1) or predicate(), what, limit_s=WAIT_MS / 1000)


# fetch with the cookie from the page: its outcome as the page sees it ('opaque' for a no-cors
# answer it cannot read, 'blocked' when CORS withholds the answer or the preflight fails).
FETCH = """async ([url, headers, mode]) => {
  try {
    const resp = await fetch(url, {method: 'POST', mode, credentials: 'include', headers, body: 'x=1'});
    return resp.type === 'opaque' ? 'opaque' : 'read';
  } catch (err) {
    return 'blocked';
  }
}"""


def test_a_page_on_another_port_can_neither_post_a_form_nor_fetch_with_the_cookie(open_page, served, pool, new_owner):
    from zerg.alerts import inbox
    from zerg.alerts.severity import Assessment
    from zerg.approvals import requests as approvals
    from zerg.runs import store as runs

    owner = new_owner("csrf")
    page = open_page(owner)  # signed in: the session cookie is in this browser
    running, _ = make_run(pool, owner.owner_id, "keep running")
    alerted, _ = make_run(pool, owner.owner_id, "disk check")
    with pool.connection() as conn:
        job = conn.execute("INSERT INTO worker_jobs (owner_id, task, status) VALUES (%s, 'flaky', 'failed') "
                           "RETURNING id", (owner.owner_id,)).fetchone()["id"]
        conn.execute("UPDATE runs SET status = 'success', finished_at = now() WHERE id = %s", (alerted,))
        inbox.add(conn, owner.owner_id, alerted, None, Assessment("critical", "disk full", "details", "model"))
        asked = conn.execute("INSERT INTO worker_jobs (owner_id, run_id, task, status) VALUES (%s, %s, 'restart', "
                             "'running') RETURNING id", (owner.owner_id, running)).fetchone()["id"]
        pending = approvals.create(conn, owner.owner_id, running, asked, "ssh_exec",
                                   {"host": "web1", "command": "systemctl restart nginx"}, "call-1", "asks")["id"]
        runs_before = count_runs(conn, owner.owner_id)
    targets = {"cancel": f"{served.url}/api/jarvis/runs/{running}/cancel",
               "retry": f"{served.url}/api/jarvis/workers/{job}/retry",
               "ack": f"{served.url}/api/jarvis/inbox/{alerted}/ack",
               "push": f"{served.url}/api/jarvis/push/test",
               "approve": f"{served.url}/api/jarvis/approvals/{pending}/approve"}
    # What the network did, from Chromium's DevTools protocol (Playwright shows neither preflights
    # nor the reason a fetch failed): preflight answers and CORS errors.
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    urls: dict[str, str] = {}
    preflights: list[tuple[int, str]] = []
    cors_errors: list[tuple[str, str]] = []
    cdp.on("Network.requestWillBeSent", lambda e: urls.setdefault(e["requestId"], e["request"]["url"]))
    cdp.on("Network.responseReceived", lambda e: e.get("type") == "Preflight" and preflights.append(
        (e["response"]["status"], e["response"]["url"])))
    cdp.on("Network.loadingFailed", lambda e: cors_errors.append(
        (urls.get(e["requestId"], "?"), (e.get("corsErrorStatus") or {}).get("corsError", e.get("errorText", "")))))

    with other_page(targets) as elsewhere:
        for name, url in targets.items():
            page.goto(elsewhere)
            with page.expect_response(url) as answer:
                page.get_by_role("button", name=name).click()
            assert answer.value.status == 403, name
            expect(page.locator("body")).to_contain_text('"error": "cross_origin"')  # the browser shows the refusal

            page.goto(elsewhere)
            # A blind no-cors fetch: sent with the cookie, answered 403 (unreadable to the page).
            with page.expect_response(lambda r, url=url: r.url == url and r.request.method == "POST") as answer:
                outcome = page.evaluate(FETCH, [url, {}, "no-cors"])
            assert (answer.value.status, outcome) == (403, "opaque"), name
            # A cors fetch: sent with the cookie too (a simple request); the answer came and is withheld.
            cors_errors.clear()
            assert page.evaluate(FETCH, [url, {}, "cors"]) == "blocked"
            seen(page, lambda url=url: (url, "MissingAllowOriginHeader") in cors_errors, f"{name}: {cors_errors}")
            # With the client header the browser asks first (a preflight), is refused, and never sends the POST.
            cors_errors.clear()
            preflights.clear()
            assert page.evaluate(FETCH, [url, {"X-Zerg-Client": "web"}, "cors"]) == "blocked"
            seen(page, lambda url=url: ((405, url) in preflights
                                        and (url, "PreflightMissingAllowOriginHeader") in cors_errors),
                 f"{name}: {preflights} {cors_errors}")

    with pool.connection() as conn:
        assert runs.get_run(conn, owner.owner_id, running)["status"] == "running"
        assert count_runs(conn, owner.owner_id) == runs_before
        assert inbox.get(conn, owner.owner_id, alerted)["acknowledged_at"] is None
        assert approvals.get(conn, owner.owner_id, pending)["status"] == "pending"  # no other page approves

    # The app's own page sends the same request with its header, and the cookie works.
    page.goto("/")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    status = page.evaluate("""async (url) => (await fetch(url, {method: 'POST', credentials: 'same-origin',
                                                                 headers: {'X-Zerg-Client': 'web'}})).status""",
                           targets["ack"])
    assert status == 200
    with pool.connection() as conn:
        assert inbox.get(conn, owner.owner_id, alerted)["acknowledged_at"] is not None
