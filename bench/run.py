"""End-to-end local runs: the real ASL under moto's interpreter, real handlers, a zero-latency
scripted model over loopback HTTP. For 1, 5 and 20 workers: wall time, time in the state-machine
engine vs in our handlers, and per-worker overhead.

With Map concurrency 1 the run is serial, so wall = engine + handlers exactly; concurrency 5 (the
default) shows the wall time a user sees.

Run: .venv/bin/python -m bench.run   (smoke: main(smoke=True), one 1-worker run per concurrency)
"""

from __future__ import annotations

import contextlib
import tempfile
import time

from bench._common import bench_database, environ, script


def main(smoke: bool = False) -> None:
    from tests.support.llm_server import ScriptedLLM
    from tests.support.scripts import run_script
    from zerg.local.engine import LocalEngine
    from zerg.owners import create_owner
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    sizes = (1,) if smoke else (1, 1, 5, 20)  # the first 1-worker run warms up clients and caches
    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp,
                ZERG_SUPERVISOR_MAX_WORKERS="20"),
    ):
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench").owner_id
        print("workers  concurrency   wall ms   handlers ms   engine ms   engine ms/worker")
        with LocalEngine() as engine:
            for n in sizes:
                for concurrency in (1, 5):
                    llm.respond_with(run_script([f"task {i}" for i in range(n)], commands={f"task {i}": "true" for i in range(n)}))
                    with rt.pool.connection() as conn:
                        started = runs.start_run(conn, owner, f"bench {n}")
                    engine.handler_seconds = 0.0
                    t = time.perf_counter()
                    desc = engine.wait(engine.start_execution(started.run_id, owner, started.thread_id, concurrency), timeout=600, poll=0.005)
                    wall = (time.perf_counter() - t) * 1000
                    assert desc["status"] == "SUCCEEDED", desc
                    handlers = engine.handler_seconds * 1000
                    if concurrency == 1:
                        engine_ms = wall - handlers
                        print(f"{n:7d}  {concurrency:11d}  {wall:8.0f}  {handlers:12.0f}  {engine_ms:10.0f}  {engine_ms / n:17.1f}")
                    else:
                        print(f"{n:7d}  {concurrency:11d}  {wall:8.0f}  {handlers:12.0f}  {'(parallel)':>10}")


if __name__ == "__main__":
    script(main)
