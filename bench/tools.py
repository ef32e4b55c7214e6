"""Supervisor worker tools at scale, and the evidence mount over big outputs.

- list_workers / grep_workers latency with 1,000 stored workers (local artifacts, real PostgreSQL)
- evidence mount build time and bytes read for 20 workers with 10 MB of tool output each

Smoke (main(smoke=True)): 20 workers, 3 mounted workers of 100 KB each (still over the budget),
3 repeats per figure; the same code paths.

Run: .venv/bin/python -m bench.tools
"""

from __future__ import annotations

import json
import tempfile
import time

from bench._common import bench_database, environ, fmt, measure, script


def main(smoke: bool = False) -> None:
    from tests.support.factories import make_finished_worker, make_run
    from zerg.loop.tool import ToolContext, invoke
    from zerg.owners import create_owner
    from zerg.supervisor.evidence import build_evidence_mount
    from zerg.tools.worker_access import TOOLS
    from zerg.wiring import get_runtime

    n_workers, n_mounted, lines = (20, 3, 1_000) if smoke else (1000, 20, 100_000)
    reps = (lambda n: 3) if smoke else (lambda n: n)
    tools = {t.name: t for t in TOOLS}
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp, OPENAI_BASE_URL="http://127.0.0.1:9/v1"),
    ):
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench").owner_id
        run_id, _ = make_run(rt.pool, owner)
        start = time.perf_counter()
        for n in range(n_workers):
            make_finished_worker(
                rt.pool, rt.store, owner, run_id, f"check service {n}",
                f"service {n} healthy; p99 {n % 97} ms\n" * 20,
                tool_outputs=[("ssh_exec", f"uptime {n}\n" + "load average: 0.1 0.2 0.3\n" * 50, True)],
                summary=f"service {n} healthy, p99 {n % 97} ms",
            )
        print(f"setup: {n_workers:,} workers stored in {time.perf_counter() - start:.1f} s")
        ctx = ToolContext(settings=rt.settings, owner_id=owner, runtime=rt)

        def run(name, **args):
            return lambda: invoke(tools, name, json.dumps(args), ctx)

        print(f"== supervisor tools, {n_workers:,} workers ==")
        print(fmt("list_workers(limit=20)", measure(run("list_workers"), reps(200))))
        print(fmt("list_workers(limit=100, status='success')", measure(run("list_workers", limit=100, status="success"), reps(100))))
        rare = f"service {n_workers - 1} healthy"  # one match: the scan reads every worker it may
        scanned = min(n_workers, 200)
        print(fmt(f"grep_workers (rare literal, {scanned} workers scanned)", measure(run("grep_workers", pattern=rare), reps(20))))
        print(fmt("grep_workers (common literal, stops at 50)", measure(run("grep_workers", pattern="load average"), reps(50))))

        mount_run, _ = make_run(rt.pool, owner)
        line = "x" * 99 + "\n"
        big = line * lines
        for n in range(n_mounted):
            make_finished_worker(rt.pool, rt.store, owner, mount_run, f"big {n}", "prose",
                                 tool_outputs=[("ssh_exec", big, n % 3 != 0)])
        before = rt.store.bytes_read
        stats = measure(lambda: _mount(rt, owner, mount_run, build_evidence_mount), reps(20))
        per_build = (rt.store.bytes_read - before) / stats["n"]
        size_mb = len(big) / 1e6
        print(f"== evidence mount, {n_mounted} workers x {size_mb:g} MB tool output, budget 32,000 bytes ==")
        print(fmt("build_evidence_mount", stats)
              + f"   bytes read/build {per_build:,.0f} (of {n_mounted * size_mb:g} MB stored)")


def _mount(rt, owner, run_id, build):
    with rt.pool.connection() as conn:
        return build(conn, rt.store, owner, run_id)


if __name__ == "__main__":
    script(main)
