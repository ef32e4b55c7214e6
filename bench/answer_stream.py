"""The answer as it is written (issue 29, item 3): how soon the first words of the supervisor's answer
reach the page after the last worker finished, with the scripted model (writing at a model's pace) and
``zerg serve`` (a subprocess) driven by headless Chromium.

- on the page: ``performance.now()`` marks from a MutationObserver, when every worker row of the run
  reads ``success`` and when the first answer text appears (the streamed draft), over N runs;
- in the log: the last ``worker_complete`` row to the first ``answer_delta`` row (server side: summary,
  the supervisor's resume, its model call up to its first piece of text), and the ``answer_delta``
  rows per answer (the batching), the model writing a word every 20 ms.

The budget: first words on the page within 1 s of the last worker (issue 29).
Needs the built app and /usr/bin/chromium (got first, as bench.web does).
Run: .venv/bin/python -m bench.answer_stream [--smoke]
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
from pathlib import Path

from bench._common import Unavailable, bench_database, environ, prepare_web, script

BUDGET_MS = 1000
ANSWER = ("Disk on **cube** is 78% full; memory is fine.\n\n```bash\ndf -h /var\n```\n\n" +
          " ".join(f"Line {i} of the findings." for i in range(30)))
PACE_S = 0.02  # between words: a model writing ~50 words a second

MARKS = """
window.__answerBench = [];
(() => {
  let current = null;
  new MutationObserver(() => {
    const rows = [...document.querySelectorAll('li[data-job-id]')];
    const done = rows.length > 0 && rows.every((r) => r.dataset.status === 'success');
    const draft = document.querySelector('article[data-run-id] .md[data-streaming]');
    if (done && !current) current = {workers: performance.now()};
    if (current && draft && !current.first) { current.first = performance.now(); window.__answerBench.push(current); }
    if (!done) current = null;
  }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
})();
"""


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def line(name: str, samples: list[float], budget_ms: float | None = None) -> str:
    text = (f"{name:<52} p50 {statistics.median(samples):8.1f} ms   p95 {percentile(samples, 95):8.1f} ms"
            f"   (n={len(samples)})")
    if budget_ms is not None:
        text += f"   budget {budget_ms:,.0f} ms: {'within' if percentile(samples, 95) <= budget_ms else 'OVER'}"
    return text


def main(smoke: bool = False) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.support.browser import Conductor, ServedZerg, answers, ask, launch, missing, sign_in
    from tests.support.llm_server import ScriptedLLM
    from tests.support.scripts import has_tool_results, role_of
    from zerg.owners import create_owner
    from zerg.runs import events
    from zerg.wiring import get_runtime

    prepare_web()
    if (reason := missing()) is not None:
        raise Unavailable(reason)
    n_runs = 2 if smoke else 10
    conductor = Conductor()
    words = ANSWER.split(" ")
    chunks = [words[0], *(" " + w for w in words[1:])]  # word by word, as a model writes

    def respond(request):
        if role_of(request) == "supervisor" and has_tool_results(request):
            return {"content": ANSWER, "chunks": chunks, "pace": PACE_S}
        return conductor(request)

    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url),
    ):
        llm.respond_with(respond)
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench answer stream")
        served = ServedZerg(url, llm.base_url, Path(tmp))
        run_ids: list[int] = []
        try:
            with sync_playwright() as pw:
                browser = launch(pw)
                context = browser.new_context(base_url=served.url)
                context.set_default_timeout(120_000)
                context.add_init_script(MARKS)
                page = context.new_page()
                sign_in(page, owner)
                for i in range(n_runs):
                    with page.expect_response(lambda r: r.request.method == "POST" and
                                              r.url.split("?")[0].endswith("/api/jarvis/supervisor")) as posted:
                        ask(page, f"Investigate disk usage and memory on my servers, round {i}")
                    run_id = int(posted.value.json()["run_id"])
                    run_ids.append(run_id)
                    expect(answers(page, run_id).locator(".md:not([data-streaming])")).to_contain_text(
                        "Line 29 of the findings.", timeout=120_000)  # one run at a time
                marks = page.evaluate("window.__answerBench")
                browser.close()
        finally:
            served.stop()

        on_page = [m["first"] - m["workers"] for m in marks]
        server, rows = [], []
        with rt.pool.connection() as conn:
            for run_id in run_ids:
                log = events.list_events(conn, owner.owner_id, run_id)
                last_worker = max(e["created_at"] for e in log if e["event_type"] == "worker_complete")
                deltas = [e for e in log if e["event_type"] == "answer_delta"]
                server.append((deltas[0]["created_at"] - last_worker).total_seconds() * 1000)
                rows.append(len(deltas))
    print(f"== the answer streams: {len(words)} words, one every {PACE_S * 1000:.0f} ms (scripted model) ==")
    print(line("last worker -> first answer words (page)", on_page, BUDGET_MS))
    print(line("last worker_complete -> first answer_delta (log)", server))
    print(f"{'answer_delta rows per answer':<52} {statistics.median(rows):8.0f}      (of {len(words)} pieces)")


if __name__ == "__main__":
    script(main)
