"""The supervisor's request at resume: its size and what it repeats, for 2 and 10 workers.

Real runs (the local engine, the real handlers, the host's sandbox): each worker's command prints
~2 MB of distinct lines with ``container_exec`` and its final answer is ~10 KB; the scripted model
on loopback records every request. Printed for the resume request: its size as sent (JSON bytes of
the messages, :func:`zerg.supervisor.context.request_bytes`) and its parts, the default budget,
how many 200-character excerpts of the evidence files it shows twice, and coverage: how many
workers' result tails and tool-output tails reach the model.

Before (main at 1bcbd8d, before the context assembler; this benchmark run against that code):
2 workers 43,565 bytes with 56 repeated excerpts, 10 workers 80,436 bytes with 40 (each result's
last 4,000 bytes were in the worker's outcome, and its tail again in the evidence mount). The
issue's figures: 45 KB and 81 KB.

Run: .venv/bin/python -m bench.context   (smoke: main(smoke=True), 2 workers x 200 KB, same code paths)
"""

from __future__ import annotations

import contextlib
import re
import tempfile

from bench._common import bench_database, environ, script

BEFORE = {2: (43_565, 56), 10: (80_436, 40)}  # workers: (request bytes, repeated excerpts) on main


def _responder(output_bytes: int, answer_bytes: int):
    from tests.support.excerpts import answer_text, log_command
    from tests.support.scripts import has_tool_results, role_of, worker_task

    def respond(request):
        role = role_of(request)
        if role == "supervisor":
            if has_tool_results(request):
                return {"content": "All logs printed; nothing to report."}
            (n,) = [int(m["content"].split()[1]) for m in request["messages"]  # "print N logs" (the task)
                    if m["role"] == "user" and re.fullmatch(r"print \d+ logs", m.get("content") or "")]
            return {"tool_calls": [("spawn_worker", {"task": f"Print the log of service-{i}"}) for i in range(n)]}
        if role == "worker":
            name = worker_task(request).split()[-1]
            if has_tool_results(request):
                return {"content": answer_text(name, answer_bytes)}
            return {"tool_calls": [("container_exec", {"command": log_command(name, output_bytes), "timeout_s": 120})]}
        return {"content": "Printed the log; all lines healthy."}

    return respond


def _measure(rt, llm, engine, workers: int) -> dict:
    """One run of ``workers`` workers, by an owner of its own: a new thread, no memory of the other
    sizes' runs (what an earlier run left would be in the request, and not in its parts)."""
    from tests.support.excerpts import evidence_ends, repeated_excerpts, request_text
    from tests.support.scripts import has_tool_results, role_of
    from zerg.owners import create_owner
    from zerg.runs import jobs
    from zerg.runs import store as runs
    from zerg.supervisor.context import request_bytes

    llm.requests.clear()
    with rt.pool.connection() as conn:
        owner = create_owner(conn, f"bench-{workers}-workers").owner_id
        started = runs.start_run(conn, owner, f"print {workers} logs")
    desc = engine.wait(engine.start_execution(started.run_id, owner, started.thread_id), timeout=600)
    if desc["status"] != "SUCCEEDED":
        raise RuntimeError(f"run {started.run_id} ended {desc['status']}")
    resume = [r for r in llm.requests if role_of(r) == "supervisor" and has_tool_results(r)][-1]
    messages = resume["messages"]
    text = request_text(resume)
    with rt.pool.connection() as conn:
        rows = jobs.run_jobs(conn, owner, started.run_id)
    evidence, results, outputs = [], 0, 0
    for job in rows:
        paths = [f.path for f in rt.store.list_files(job["worker_id"])
                 if f.path == "result.txt" or f.path.startswith("tool_calls/")]
        evidence += evidence_ends(rt.store, job["worker_id"], paths)
        result_tail = rt.store.tail(job["worker_id"], "result.txt", 60).decode().splitlines()[-1]
        output_tail = rt.store.tail(job["worker_id"], "tool_calls/001_container_exec.txt", 400).decode()
        last_line = [line for line in output_tail.splitlines() if " log line " in line][-1]
        results += result_tail in text
        outputs += last_line in text
    parts = {"prompt + task": request_bytes([m for m in messages if m["role"] == "system"] + [messages[1]]),
             "working (calls, outcomes)": request_bytes([m for m in messages if m["role"] in ("assistant", "tool")]),
             "evidence mount": request_bytes([messages[-1]])}
    return {"bytes": request_bytes(messages), "parts": parts, "repeated": len(repeated_excerpts(text, evidence)),
            "results": results, "outputs": outputs, "budget": rt.settings.context_budget_bytes}


def main(smoke: bool = False) -> None:
    from tests.support.llm_server import ScriptedLLM
    from zerg.local.engine import LocalEngine
    from zerg.wiring import get_runtime

    output_bytes = 200_000 if smoke else 2_000_000
    sizes = (2,) if smoke else (2, 10)
    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp),
    ):
        llm.respond_with(_responder(output_bytes, 10_000))
        rt = get_runtime()
        with LocalEngine() as engine:
            figures = {n: _measure(rt, llm, engine, n) for n in sizes}
    budget = figures[sizes[0]]["budget"]
    print(f"== supervisor request at resume: workers x {output_bytes / 1e6:g} MB tool output x 10 KB answers, "
          f"budget {budget:,} bytes ==")
    print(f"{'workers':<10}{'request bytes':>15}{'before':>10}{'repeated excerpts':>19}{'(before)':>10}"
          f"{'result tails':>14}{'output tails':>14}")
    for n, f in figures.items():
        before, repeated_before = (f"{BEFORE[n][0]:,}", BEFORE[n][1]) if n in BEFORE and not smoke else ("-", "-")
        print(f"{n:<10}{f['bytes']:>15,}{before:>10}{f['repeated']:>19}{repeated_before:>10}"
              f"{f['results']:>10}/{n:<3}{f['outputs']:>10}/{n:<3}")
    for n, f in figures.items():
        print(f"parts at {n} workers: " + ", ".join(f"{k} {v:,}" for k, v in f["parts"].items()))


if __name__ == "__main__":
    script(main)
