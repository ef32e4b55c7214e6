"""The web client, from the browser's side: headless Chromium (Debian's, through Playwright) on the
built app served by ``zerg serve`` (a subprocess) with the zero-latency scripted model.

- POST /api/jarvis/supervisor (issued by the page) -> first worker row rendered: marks taken in the
  page with ``performance.now()`` (the fetch call, and a MutationObserver on ``li[data-job-id]``),
  over N runs, p50/p95;
- the built app's transferred size: the gzip sizes of index.html and every asset, summed;
- the seed's budgets (8.1), measured with fetch from the signed-in page: POST /api/jarvis/route on
  the pre-check path (<= 500 ms), POST /api/jarvis/quick with the scripted model (<= 2 s), and for one
  run the time from its start (supervisor_started) to its first supervisor_thinking (<= 2 s).

Needs the built app (web/dist) and /usr/bin/chromium: it gets both first, as ``./dev.sh test`` does
(:func:`bench._common.prepare_web`), or fails with one line saying what is missing.
Run: .venv/bin/python -m bench.web [--smoke]
"""

from __future__ import annotations

import contextlib
import gzip
import statistics
import tempfile
from pathlib import Path

from bench._common import Unavailable, bench_database, environ, prepare_web, script

BUDGETS_MS = {"route": 500, "quick": 2000, "startup": 2000}  # seed 8.1

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

    files, raw, packed = transferred_size(WEB_DIST)
    print("== the built app (web/dist) ==")
    print(f"{'transferred size, gzip (index.html + assets)':<52} {packed / 1024:8.1f} KiB   "
          f"(raw {raw / 1024:.1f} KiB, {files} files)")

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


if __name__ == "__main__":
    script(main)
