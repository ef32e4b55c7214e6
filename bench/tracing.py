"""Tracing overhead per worker run (issue 28): the worker handler's whole invocation untraced vs
traced, its spans exported over OTLP/HTTP (protobuf) to a loopback receiver. Target: at most 5%.

Each run is one worker Lambda invocation through ``functions.worker.handler``: a zero-latency
scripted model (loopback HTTP through the real openai client) asks for one ``container_exec("true")``
and then answers. Traced (the event carries the run's traceparent, as the state machine hands it)
that is 4 spans: invoke_agent, 2 chat, 1 execute_tool. Untraced runs get an empty traceparent, as the
ASL hands every step when tracing is off: no span is made and nothing is exported.

Three traced variants, each against untraced runs of the same runtime, alternated run by run (a
slow moment of a shared machine falls on both alike), after an A/A round (untraced against
untraced: how far apart two identical series come out on this machine now):
- OTLP: exported by the SDK's batch processor in the background (``zerg serve``, ``zerg run``);
- OTLP, flushed per invocation: also exported before the handler returns, as on Lambda;
- OTLP + database: ``ZERG_TRACE_STORE=on`` keeps the spans for the waterfall too (local only);
- database only: the spans kept, no collector (``zerg serve``'s default since issue 29).

Then what turning tracing on costs a process once, at its start (:func:`startup`): the OpenTelemetry
SDK imported and the tracer installed (``zerg.tracing.setup.configure``) in a fresh process that has
imported what ``zerg serve`` imports first, store on against off, alternated.

Run: .venv/bin/python -m bench.tracing   (smoke: main(smoke=True), same code paths, fewer runs)
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench._common import ROOT, bench_database, environ, script


def _exporter_cpu_s() -> float:
    """CPU seconds the SDK's batch-export threads have used (they encode and send in the background)."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.name.startswith("OtelBatchSpan") and thread.ident is not None:
            with contextlib.suppress(OSError, ValueError):
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


class Collector:
    """The loopback OTLP/HTTP receiver (tests/support/otlp.py) in a process of its own, as a collector
    is: decoding what arrives must not take this process's CPU or its interpreter lock."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.otlp"], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.endpoint = self.process.stdout.readline().strip()
        if not self.endpoint.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the OTLP receiver did not start: {self.endpoint!r}")

    @property
    def spans(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"{self.endpoint}/count", timeout=30) as resp:
            return int(resp.read())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


STARTUP_CODE = r"""
import os, time
import zerg.local.server, zerg.wiring  # what zerg serve has imported before its runtime is built
from zerg.config import Settings
from zerg.tracing import setup
def rss_kib():  # resident now (not the peak: the imports before may have peaked higher)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024
settings = Settings(ZERG_TRACE_STORE=os.environ["ZERG_TRACE_STORE"])
rss = rss_kib()
wall, cpu = time.perf_counter(), time.process_time()
setup.configure(settings, lambda: None)
print((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, rss_kib() - rss)
"""


def startup(samples: int = 12) -> dict[str, tuple[float, float, float]]:
    """{store: (wall ms, CPU ms, resident KiB added)} medians of turning tracing on in a fresh process."""
    seen: dict[str, list[list[float]]] = {"off": [], "on": []}
    for n in range(2 * samples):
        store = "on" if n % 2 else "off"
        out = subprocess.run([sys.executable, "-c", STARTUP_CODE], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={**os.environ, "ZERG_TRACE_STORE": store, "ZERG_LOG_LEVEL": "WARNING"})
        seen[store].append([float(x) for x in out.stdout.split()])
    return {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in seen.items()}


def main(smoke: bool = False) -> None:
    from functions.worker.handler import handler
    from tests.support.factories import make_job, make_run
    from tests.support.llm_server import ScriptedLLM
    from zerg import tracing
    from zerg.owners import create_owner
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    pairs, warmup = (2, 1) if smoke else (50, 3)
    llm, receiver = ScriptedLLM(), Collector()
    variants = {  # name -> (extra environment, flush before returning, the "traced" runs get the traceparent)
        "none (A/A: the noise floor)": ({"ZERG_TRACE_STORE": "off"}, False, False),
        "OTLP": ({"ZERG_TRACE_STORE": "off"}, False, True),
        "OTLP, flushed per invocation": ({"ZERG_TRACE_STORE": "off"}, True, True),
        "OTLP + database": ({"ZERG_TRACE_STORE": "on"}, False, True),
        # What `zerg serve` does by default since issue 29: the spans kept for the waterfall, no collector.
        "database only (zerg serve)": ({"ZERG_TRACE_STORE": "on", "OTEL_EXPORTER_OTLP_ENDPOINT": None}, False, True),
    }
    results: dict[str, dict[str, float]] = {}
    spans_per_run = 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
            base = {"DATABASE_URL": url, "OPENAI_BASE_URL": llm.base_url, "ZERG_ARTIFACT_DIR": tmp,
                    "ZERG_DATA_DIR": tmp, "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
            for name, (extra, flush, traces) in variants.items():
                with environ(**{**base, **extra}):
                    rt = get_runtime()
                    with rt.pool.connection() as conn:
                        owner = create_owner(conn, f"bench {name}").owner_id
                    run_id, _ = make_run(rt.pool, owner)
                    with rt.pool.connection() as conn:
                        traceparent = tracing.traceparent_for(runs.get_run(conn, owner, run_id))
                    assert traceparent, "tracing is on"
                    wall: dict[bool, list[float]] = {False: [], True: []}
                    cpu: dict[bool, list[float]] = {False: [], True: []}
                    before, exporter_before = receiver.spans, None
                    for n in range(2 * (pairs + warmup)):
                        traced = n % 2 == 1
                        if n == 2 * warmup:
                            tracing.flush()
                            exporter_before = _exporter_cpu_s()
                        llm.script({"tool_calls": [("container_exec", {"command": "true"})]}, {"content": "done"})
                        job_id = make_job(rt.pool, owner, run_id, f"bench {n}")
                        event = {"job_id": job_id, "run_id": run_id, "owner_id": owner,
                                 "traceparent": traceparent if traced and traces else ""}
                        start, start_cpu = time.perf_counter(), time.thread_time()
                        outcome = handler(event)
                        if traced and flush:
                            tracing.flush(tracing.INVOCATION_FLUSH_MS)  # what invocation() does on Lambda
                        elapsed, used = time.perf_counter() - start, time.thread_time() - start_cpu
                        assert outcome["status"] == "success", outcome
                        if n >= 2 * warmup:  # warm-up: the first client connection, the first pool checkout
                            wall[traced].append(elapsed * 1000)
                            cpu[traced].append(used * 1000)
                    flushing = time.thread_time()
                    tracing.flush()  # what is still queued is exported here, in this thread
                    flushing = time.thread_time() - flushing
                    exporter_ms = (_exporter_cpu_s() - (exporter_before or 0.0) + flushing) * 1000 / pairs
                    if name == "OTLP":
                        spans_per_run = (receiver.spans - before) / (pairs + warmup)
                    off, on = statistics.median(wall[False]), statistics.median(wall[True])
                    added_cpu = statistics.median(cpu[True]) - statistics.median(cpu[False]) + exporter_ms
                    results[name] = {"off": off, "on": on, "cpu_invocation": statistics.median(cpu[True])
                                     - statistics.median(cpu[False]), "cpu_export": exporter_ms, "cpu": added_cpu}
    finally:
        llm.close()
        receiver.close()

    started = startup(2 if smoke else 12)
    load = os.getloadavg()[0]
    print(f"== tracing overhead per worker run (worker handler; {pairs} untraced and {pairs} traced runs, "
          f"alternated; 2 model calls, 1 container_exec('true'); load average {load:.1f}) ==")
    print(f"{'traced variant':<30} {'wall untraced':>14} {'wall traced':>12} {'wall +':>8}   "
          f"{'CPU added: invocation + export = total':>40} {'of the run':>11}")
    for name, r in results.items():
        print(f"{name:<30.30} {r['off']:11.2f} ms {r['on']:9.2f} ms {100 * (r['on'] - r['off']) / r['off']:+7.1f}%   "
              f"{r['cpu_invocation']:14.2f} ms + {r['cpu_export']:5.2f} ms = {r['cpu']:5.2f} ms"
              f" {100 * r['cpu'] / r['off']:+10.1f}%")
    print(f"spans exported per traced run: {spans_per_run:.1f} (invoke_agent, chat x2, execute_tool)")
    print("turning tracing on at a process's start (the SDK imported, the tracer installed; medians):")
    for store, (wall_ms, cpu_ms, rss_kib) in started.items():
        print(f"  ZERG_TRACE_STORE={store:<3}  wall {wall_ms:6.1f} ms  CPU {cpu_ms:6.1f} ms  resident +{rss_kib / 1024:.1f} MiB")
    print("(wall: medians, as noisy as the A/A row shows; CPU added: the invocation thread's CPU, traced minus "
          "untraced medians, plus the SDK's export threads' CPU per traced run, as a share of the untraced run's "
          "wall time)")


if __name__ == "__main__":
    script(main)
