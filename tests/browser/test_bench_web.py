"""bench.web's smallest configuration runs in a real Chromium and prints its figures (labels, never values):
the seed's budgets and issue 29's (bundle, cold load, a long thread scrolled)."""

from __future__ import annotations

from bench._common import run_benchmark
from tests.support.browser import require_browser


def test_bench_web_smoke_run_prints_its_figures(admin_url, monkeypatch, capsys):
    require_browser()
    import bench.web

    monkeypatch.setenv("DATABASE_URL", admin_url)  # bench databases on the test server
    run_benchmark(bench.web.main, smoke=True)
    out = capsys.readouterr().out
    for label in ("transferred size, gzip (index.html + assets)", "POST /supervisor -> first worker row rendered",
                  "POST /api/jarvis/route (pre-check, no model call)", "POST /api/jarvis/quick (scripted model)",
                  "run start -> first supervisor_thinking", "budget 500 ms", "budget 2,000 ms",
                  # issue 29: the bundle, a cold load, a long thread scrolled
                  "budget 80 KiB", "first paint (first-contentful-paint)", "budget 300 ms",
                  "composer ready (message box visible and enabled)", "budget 600 ms",
                  "loaded page by page from the top of the log", "scrolled top to bottom and back",
                  "long tasks > 50 ms while scrolling", "budget 0"):
        assert label in out, f"bench.web did not print {label!r}:\n{out}"
    assert '"level"' not in out, f"log lines on stdout:\n{out}"
