"""Overhead of one worker run, and the worker handler's import time.

A zero-latency scripted model (loopback HTTP through the real openai client) asks for one
``container_exec("true")`` and then answers; the run is split into model calls, tool time and
the rest (artifact writes, index and event rows).

Run: .venv/bin/python -m bench.worker   (smoke: main(smoke=True), 3 runs, same code paths)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from bench._common import ROOT, bench_database, environ, script


def import_time_ms(module: str, repeat: int = 5) -> float:
    code = f"import time; t=time.perf_counter(); import {module}; print((time.perf_counter()-t)*1000)"
    samples = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
        for _ in range(repeat)
    ]
    return statistics.median(samples)


def main(smoke: bool = False) -> None:
    from tests.support.factories import make_job, make_run
    from tests.support.llm_server import ScriptedLLM
    from zerg.loop import agent_loop as agent
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime
    from zerg.workers.runner import run_worker_job

    runs, warmup, imports = (3, 1, 1) if smoke else (30, 3, 5)
    llm = ScriptedLLM()
    real_invoke = agent.invoke
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp),
    ):
        rt = get_runtime()
        timers = {"model": 0.0, "tool": 0.0}

        real_complete = rt.llm.complete

        def timed_complete(*a, **k):
            t = time.perf_counter()
            try:
                return real_complete(*a, **k)
            finally:
                timers["model"] += time.perf_counter() - t

        def timed_invoke(*a, **k):
            t = time.perf_counter()
            try:
                return real_invoke(*a, **k)
            finally:
                timers["tool"] += time.perf_counter() - t

        rt.llm.complete = timed_complete
        agent.invoke = timed_invoke  # the agent loop's tool dispatch
        totals, models, tools = [], [], []
        try:
            with rt.pool.connection() as conn:
                owner = create_owner(conn, "bench").owner_id
            run_id, _ = make_run(rt.pool, owner)
            for n in range(runs + warmup):
                llm.script({"tool_calls": [("container_exec", {"command": "true"})]}, {"content": "done"})
                job_id = make_job(rt.pool, owner, run_id, f"bench {n}")
                timers.update(model=0.0, tool=0.0)
                start = time.perf_counter()
                run_worker_job(rt, job_id, owner, run_id)
                if n >= warmup:  # warm-up: first client connection, first pool checkout
                    totals.append(time.perf_counter() - start)
                    models.append(timers["model"])
                    tools.append(timers["tool"])
        finally:
            agent.invoke = real_invoke
            llm.close()

    def ms(xs):
        return statistics.median(xs) * 1000

    total, model, tool = ms(totals), ms(models), ms(tools)
    print(f"== one worker run (median of {runs}; 2 model calls, 1 container_exec('true')) ==")
    print(f"total                         {total:8.2f} ms")
    print(f"  model calls (HTTP loopback) {model:8.2f} ms")
    print(f"  tool (container_exec true)  {tool:8.2f} ms")
    print(f"  persistence + bookkeeping   {total - model - tool:8.2f} ms")
    handler_ms = import_time_ms("functions.worker.handler", imports)
    print(f"import functions.worker.handler (fresh interpreter, median of {imports}): {handler_ms:.1f} ms")


if __name__ == "__main__":
    script(main)
