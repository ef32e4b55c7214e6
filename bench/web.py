"""The web client, from the browser's side: headless Chromium (Debian's, through Playwright) on the
built app served by ``zerg serve`` (a subprocess) with the zero-latency scripted model.

- POST /api/jarvis/supervisor (issued by the page) -> first worker row rendered: marks taken in the
  page with ``performance.now()`` (the fetch call, and a MutationObserver on ``li[data-job-id]``),
  over N runs, p50/p95;
- the built app's transferred size: the gzip sizes of index.html and every asset, summed;
- the seed's budgets (8.1), measured with fetch from the signed-in page: POST /api/jarvis/route on
  the pre-check path (<= 500 ms), POST /api/jarvis/quick with the scripted model (<= 2 s), and for one
  run the time from its start (supervisor_started) to its first supervisor_thinking (<= 2 s).
- issue 29's budgets: the built app <= 80 KiB gzip; a cold load (a new browser context: empty cache,
  new connections; the session cookie carried over) of the signed-in chat on loopback: first paint
  (first-contentful-paint) <= 300 ms and the composer ready (the message box in the DOM, visible and
  enabled, marked by a MutationObserver) <= 600 ms, p95 over N loads; and a thread of 2,000 stored
  messages (seeded through zerg.runs.threads, the real store) loaded page by page from the top of the
  conversation (its "Load older messages"), then scrolled top to bottom and back in the page's own
  scroll container, one step per animation frame: long tasks > 50 ms (PerformanceObserver 'longtask')
  while scrolling must be 0; with the main thread's busy time per frame (CDP Performance metrics), and,
  for the machine's share, the long tasks of the same DOM as a static page (no script) scrolled alike.

Needs the built app (web/dist) and /usr/bin/chromium: it gets both first, as ``./dev.sh test`` does
(:func:`bench._common.prepare_web`), or fails with one line saying what is missing.
Run: .venv/bin/python -m bench.web [--smoke]
"""

from __future__ import annotations

import contextlib
import gzip
import re
import statistics
import tempfile
from pathlib import Path

from bench._common import Unavailable, bench_database, environ, prepare_web, script

BUDGETS_MS = {"route": 500, "quick": 2000, "startup": 2000}  # seed 8.1
BUNDLE_KIB = 80  # issue 29: the whole app, gzip
FIRST_PAINT_MS, COMPOSER_MS = 300, 600  # issue 29: a cold load on loopback
THREAD_MESSAGES = 2000  # issue 29: "2,000 messages in the thread scroll without jank"
SCROLL_STEP_PX = 600  # per animation frame: a fast fling (36,000 px/s at 60 Hz)

# Issue 29's marks: when the composer first stands ready (a visible, enabled textarea: the chat has
# one), and every long task of the page (> 50 ms by the Long Tasks API's definition).
COLD_MARKS = """
window.__zergCold = {ready: null, long: []};
(() => {
  const observer = new MutationObserver(() => {
    const box = [...document.querySelectorAll('textarea')].find((t) => !t.disabled && t.getClientRects().length > 0);
    if (box && window.__zergCold.ready === null) { window.__zergCold.ready = performance.now(); observer.disconnect(); }
  });
  observer.observe(document, {subtree: true, childList: true, attributes: true});
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__zergCold.long.push([e.startTime, e.duration]);
    }).observe({type: 'longtask', buffered: true});
  } catch (err) { window.__zergCold.long = null; }
})();
"""

# The scroll container of the conversation: the nearest ancestor of its messages that scrolls (the
# log today; the page itself if the layout makes the page the one scroll container).
SCROLLER = """() => {
  const first = document.querySelector('[role=log] article[data-role]');
  for (let n = first && first.parentElement; n && n !== document.body; n = n.parentElement) {
    if (/(auto|scroll)/.test(getComputedStyle(n).overflowY) && n.scrollHeight > n.clientHeight) return n;
  }
  return document.scrollingElement;
}"""

# Scroll the container from top to bottom and back, STEP px per animation frame; the long tasks that
# started meanwhile and the longest gap between two frames.
SCROLL_THROUGH = """async ([step]) => {
  const el = (""" + SCROLLER + """)();
  const frame = () => new Promise((r) => requestAnimationFrame(r));
  el.scrollTop = 0;
  await frame(); await frame();
  const t0 = performance.now();
  let last = t0, worst = 0, frames = 0;
  const go = async (dir) => {
    for (;;) {
      const before = el.scrollTop;
      el.scrollTop = before + dir * step;
      const now = await frame();
      worst = Math.max(worst, now - last); last = now; frames += 1;
      if (el.scrollTop === before) return;
    }
  };
  await go(1);
  const height = el.scrollHeight;
  await go(-1);
  const t1 = performance.now();
  const long = (window.__zergCold.long || []).filter(([start]) => start >= t0 && start <= t1);
  return {ms: t1 - t0, frames, worst, height, long};
}"""

# Marks in the page: when the page called fetch for POST /api/jarvis/supervisor, and when each
# worker row (by job id) first appeared in the DOM.
MARKS = """
window.__zergBench = {posts: [], rows: []};
(() => {
  const original = window.fetch;
  window.fetch = function (input, init) {
    const url = typeof input === 'string' ? input : (input && input.url) || String(input);
    const method = ((init && init.method) || (input && input.method) || 'GET').toUpperCase();
    if (method === 'POST' && /\\/api\\/jarvis\\/supervisor$/.test(url.split('?')[0])) {
      window.__zergBench.posts.push(performance.now());
    }
    return original.apply(this, arguments);
  };
  const seen = new Set();
  new MutationObserver(() => {
    for (const li of document.querySelectorAll('li[data-job-id]')) {
      if (!seen.has(li.dataset.jobId)) {
        seen.add(li.dataset.jobId);
        window.__zergBench.rows.push(performance.now());
      }
    }
  }).observe(document, {subtree: true, childList: true});
})();
"""

TIMED_FETCH = """async ([path, bodies]) => {
  const samples = [];
  let doc = null;
  for (const body of bodies) {
    const t = performance.now();
    // As the app's own api() sends it: the client header is the cookie session's proof (zerg.api.security).
    const resp = await fetch(path, {method: 'POST',
                                    headers: {'Content-Type': 'application/json', 'X-Zerg-Client': 'web'},
                                    body: JSON.stringify(body)});
    doc = await resp.json();
    samples.push(performance.now() - t);
    if (!resp.ok) throw new Error(path + ' answered ' + resp.status + ': ' + JSON.stringify(doc));
    if (doc.mode === undefined) throw new Error(path + ' gave no mode: ' + JSON.stringify(doc));
  }
  return [samples, doc];
}"""


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def line(name: str, samples: list[float], budget_ms: float | None = None) -> str:
    text = (f"{name:<52} p50 {statistics.median(samples):8.1f} ms   p95 {percentile(samples, 95):8.1f} ms"
            f"   (n={len(samples)})")
    if budget_ms is not None:
        verdict = "within" if percentile(samples, 95) <= budget_ms else "OVER"
        text += f"   budget {budget_ms:,.0f} ms: {verdict}"
    return text


def transferred_size(dist: Path) -> tuple[int, int, int]:
    """(files, raw bytes, gzip bytes) of index.html and the assets the app loads."""
    files = [dist / "index.html", *sorted(p for p in (dist / "assets").rglob("*") if p.is_file())]
    raw = sum(p.stat().st_size for p in files)
    packed = sum(len(gzip.compress(p.read_bytes(), 6)) for p in files)
    return len(files), raw, packed


def longest(tasks: list) -> str:
    return f"(longest {max(d for _, d in tasks):.0f} ms)   " if tasks else ""


def cold_loads(browser, base_url: str, state: dict, n: int) -> dict[str, list[float]]:
    """Open the signed-in chat ``n`` times, each in a new browser context (an empty cache, new
    connections; only the session cookie carried over): first-contentful-paint and the moment the
    composer stood ready, in ms since the navigation started."""
    from playwright.sync_api import expect

    from tests.support.browser import message_box

    paint, ready = [], []
    for _ in range(n):
        context = browser.new_context(base_url=base_url, storage_state=state)
        context.set_default_timeout(120_000)
        context.add_init_script(COLD_MARKS)
        page = context.new_page()
        page.goto("/")
        expect(message_box(page)).to_be_editable()
        page.wait_for_function("() => window.__zergCold.ready !== null && "
                               "performance.getEntriesByName('first-contentful-paint').length > 0")
        fcp, at = page.evaluate("() => [performance.getEntriesByName('first-contentful-paint')[0].startTime, "
                                "window.__zergCold.ready]")
        paint.append(fcp)
        ready.append(at)
        context.close()
    return {"paint": paint, "ready": ready}


def thread_turns(n: int) -> list[tuple[str, str, dict]]:
    """``n`` thread messages, questions and markdown answers taking turns, as a long conversation
    holds them: paragraphs, lists, now and then a code block or a table."""
    turns = []
    for i in range(n // 2):
        host = f"host-{i % 7}"
        turns.append(("user", f"Question {i}: how are disk and memory on {host} today, and did anything change?", {}))
        answer = [f"**{host}** looks healthy (check {i}).", "",
                  f"- disk `/`: {40 + i % 50}% used, `/var` {20 + i % 30}%",
                  f"- memory: {1 + i % 6} GB free of 8 GB", "- no failed units since yesterday", "",
                  "Nothing needs doing now; I will keep watching the trend and tell you if it moves."]
        if i % 5 == 0:
            answer += ["", "```sh", f"ssh {host} df -h / /var", f"ssh {host} free -m", "```"]
        if i % 7 == 0:
            answer += ["", "| mount | used | free |", "|---|---|---|", f"| / | {40 + i % 50}% | 12 GB |",
                       f"| /var | {20 + i % 30}% | 40 GB |"]
        turns.append(("assistant", "\n".join(answer), {"mode": "quick"}))
    return turns


def seed_thread(conn, owner_id: int, n: int) -> None:
    """``n`` messages on the owner's thread through the real store (zerg.runs.threads)."""
    from zerg.runs import threads

    thread_id = threads.find_or_create_thread(conn, owner_id)
    turns = thread_turns(n)
    for start in range(0, len(turns), 200):
        threads.append_messages(conn, owner_id, thread_id, None, turns[start:start + 200])


def scroll_thread(browser, base_url: str, owner, n: int) -> dict:
    """Sign in as ``owner`` (whose thread holds ``n`` messages), load the whole thread the way the
    owner would (scroll to the top of the conversation, ask for the earlier page), then scroll it top
    to bottom and back: the long tasks of each phase."""
    from playwright.sync_api import expect

    from tests.support.browser import conversation, sign_in

    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(120_000)
    context.add_init_script(COLD_MARKS)
    page = context.new_page()
    sign_in(page, owner)
    messages = conversation(page).locator("article[data-role]")
    expect(messages.first).to_be_visible()
    # Found by CSS and its text, not by role: a role query computes the accessible name of every element
    # of the log on each look, which over 2,000 messages made most of this phase's long tasks (the
    # harness's, not the page's: "Receive mojo message" in Chromium's trace).
    earlier = conversation(page).locator("button", has_text=re.compile(r"(older|earlier)", re.IGNORECASE))
    t0 = page.evaluate("performance.now()")
    pages = 0
    while (count := messages.count()) < n:
        page.evaluate("() => { const el = (" + SCROLLER + ")(); el.scrollTop = 0; }")
        if earlier.count():  # a page that loads by itself on reaching the top has no button to press
            earlier.click()
        page.wait_for_function("([n]) => document.querySelectorAll('[role=log] article[data-role]').length > n",
                               arg=[count])
        pages += 1
    t1 = page.evaluate("performance.now()")
    long = [t for t in page.evaluate("window.__zergCold.long") or [] if t0 <= t[0] <= t1]
    load = {"messages": messages.count(), "pages": pages, "ms": t1 - t0, "long": long}
    # Chromium's own account of the main thread's work (CDP Performance metrics: TaskDuration, seconds).
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")

    def busy() -> float:
        return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")

    page.mouse.move(640, 400)  # the pointer over the log, as a wheel's would be (the page hit-tests it)
    before = busy()
    through = page.evaluate(SCROLL_THROUGH, [SCROLL_STEP_PX])
    through["busy_ms"] = (busy() - before) * 1000
    # The machine's share: the same DOM and style sheet without the app (its scripts removed), scrolled
    # the same way in the same browser, so what the page adds shows against what the load costs anyway.
    html = re.sub(r"<script\b[^>]*>.*?</script>", "", page.evaluate("document.documentElement.outerHTML"),
                  flags=re.DOTALL)
    still = context.new_page()
    still.route("**/__static-thread", lambda route: route.fulfill(status=200, content_type="text/html", body=html))
    still.goto("/__static-thread")
    expect(still.locator("[role=log] article[data-role]")).to_have_count(load["messages"])
    still.mouse.move(640, 400)
    static = still.evaluate(SCROLL_THROUGH, [SCROLL_STEP_PX])
    context.close()
    return {"load": load, "through": through, "static": static}


def main(smoke: bool = False) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.support.browser import WEB_DIST, Conductor, ServedZerg, answers, ask, launch, missing, sign_in
    from tests.support.llm_server import ScriptedLLM
    from zerg.owners import create_owner
    from zerg.runs import events
    from zerg.wiring import get_runtime

    prepare_web()
    if (reason := missing()) is not None:
        raise Unavailable(reason)
    n_runs, n_route, n_quick = (2, 5, 2) if smoke else (10, 50, 10)
    n_thread = 200 if smoke else THREAD_MESSAGES

    files, raw, packed = transferred_size(WEB_DIST)
    print("== the built app (web/dist) ==")
    print(f"{'transferred size, gzip (index.html + assets)':<52} {packed / 1024:8.1f} KiB   "
          f"(raw {raw / 1024:.1f} KiB, {files} files)   budget {BUNDLE_KIB} KiB: "
          f"{'within' if packed <= BUNDLE_KIB * 1024 else 'OVER'}")

    conductor = Conductor()
    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url),
    ):
        llm.respond_with(conductor)
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench web")
        served = ServedZerg(url, llm.base_url, Path(tmp))
        try:
            with sync_playwright() as pw:
                browser = launch(pw)
                context = browser.new_context(base_url=served.url)
                context.set_default_timeout(120_000)
                context.add_init_script(MARKS)
                page = context.new_page()
                sign_in(page, owner)

                first_row: list[float] = []
                run_ids: list[int] = []
                for i in range(n_runs):
                    posts = page.evaluate("window.__zergBench.posts.length")
                    rows = page.evaluate("window.__zergBench.rows.length")
                    with page.expect_response(lambda r: r.request.method == "POST" and
                                              r.url.split("?")[0].endswith("/api/jarvis/supervisor")) as posted:
                        ask(page, f"Investigate disk usage and memory on my servers, round {i}")
                    run_id = int(posted.value.json()["run_id"])
                    run_ids.append(run_id)
                    page.wait_for_function("(n) => window.__zergBench.rows.length > n", arg=rows, timeout=120_000)
                    marks = page.evaluate("window.__zergBench")
                    first_row.append(marks["rows"][rows] - marks["posts"][posts])
                    expect(answers(page, run_id)).to_have_count(1, timeout=120_000)  # one run at a time

                print("== the page (headless Chromium, scripted model: instant) ==")
                print(line("POST /supervisor -> first worker row rendered", first_row))

                route_bodies = [{"utterance": "Investigate disk usage on all my servers and check the logs"}] * n_route
                route, decided = page.evaluate(TIMED_FETCH, ["/api/jarvis/route", route_bodies])
                assert decided["decided_by"] == "rules", decided  # the pre-check path: no model call
                calls = len(llm.requests)
                quick, answered = page.evaluate(TIMED_FETCH, ["/api/jarvis/quick",
                                                              [{"utterance": "What does DNS stand for?"}] * n_quick])
                assert answered["answer"] == conductor.plain and len(llm.requests) == calls + n_quick, answered
                cold = cold_loads(browser, served.url, context.storage_state(), 3 if smoke else 20)
                with rt.pool.connection() as conn:
                    reader = create_owner(conn, "bench web thread")
                    seed_thread(conn, reader.owner_id, n_thread)
                scroll = scroll_thread(browser, served.url, reader, n_thread)
                browser.close()
        finally:
            served.stop()

        with rt.pool.connection() as conn:
            startup = []
            for run_id in run_ids[:1] if smoke else run_ids:
                rows = events.list_events(conn, owner.owner_id, run_id)
                started = next(e["created_at"] for e in rows if e["event_type"] == "supervisor_started")
                thinking = next(e["created_at"] for e in rows if e["event_type"] == "supervisor_thinking")
                startup.append((thinking - started).total_seconds() * 1000)
        print("== the seed's budgets (8.1), fetch from the signed-in page ==")
        print(line("POST /api/jarvis/route (pre-check, no model call)", route, BUDGETS_MS["route"]))
        print(line("POST /api/jarvis/quick (scripted model)", quick, BUDGETS_MS["quick"]))
        print(line("run start -> first supervisor_thinking", startup[:1], BUDGETS_MS["startup"]))
        if len(startup) > 1:
            print(line(f"  (the same over all {len(startup)} runs)", startup))
        print("== issue 29: a cold load of the signed-in chat (new browser context, loopback) ==")
        print(line("first paint (first-contentful-paint)", cold["paint"], FIRST_PAINT_MS))
        print(line("composer ready (message box visible and enabled)", cold["ready"], COMPOSER_MS))
        print(f"== issue 29: a thread of {n_thread:,} stored messages, headless Chromium ==")
        load = scroll["load"]
        print(f"{'loaded page by page from the top of the log':<52} {load['messages']:8,} messages   "
              f"in {load['pages']} pages, {load['ms'] / 1000:.1f} s   long tasks > 50 ms: {len(load['long'])} "
              f"{longest(load['long'])}")
        through = scroll["through"]
        verdict = "within" if not through["long"] else "OVER"
        print(f"{'scrolled top to bottom and back':<52} {through['height'] / 1000:8,.0f} kpx   "
              f"{through['frames']} frames in {through['ms'] / 1000:.1f} s, longest frame {through['worst']:.0f} ms, "
              f"main thread busy {through['busy_ms'] / through['frames']:.1f} ms per frame")
        print(f"{'long tasks > 50 ms while scrolling':<52} {len(through['long']):8}   {longest(through['long'])}"
              f"budget 0: {verdict}")
        static = scroll["static"]
        print(f"{'  the same DOM as a static page (no script), scrolled':<52} {len(static['long']):8}   "
              f"{longest(static['long'])}({static['frames']} frames, longest frame {static['worst']:.0f} ms: "
              "the machine's share)")


if __name__ == "__main__":
    script(main)
