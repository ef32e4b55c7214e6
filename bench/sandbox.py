"""The cost of the container_exec sandbox: one ``true`` per call, every mechanism this host has,
each with the call's limits (file size, address space, CPU time, a capped tmpfs home and /tmp).

- best effort (scrubbed environment, per-call uid as root, the nsinit subreaper that sets the limits)
- util-linux ``unshare`` (user/PID/mount/IPC/UTS/network namespaces, pivot_root, caps dropped)
- bubblewrap, when installed (``prlimit`` sets the limits inside)
- the ``container_exec`` tool call at the host's level (what a worker pays), and the one-time probe

Median of 30 each, interleaved in one run so that load on the machine hits every mechanism alike.
Smoke (main(smoke=True)): 3 calls each. Targets: the namespace sandbox at most 30 ms; bwrap with
the limits at most 15 ms (issue 25; 11.2 ms before them, docs/performance.md).

Run: .venv/bin/python -m bench.sandbox
"""

from __future__ import annotations

import json
import shutil
import statistics
import time

from bench._common import script


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main(smoke: bool = False) -> None:
    from zerg.config import load_settings
    from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, ToolContext, invoke
    from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, Limits, detect, execute
    from zerg.tools.catalog import worker_tools

    repeat = 3 if smoke else 30
    settings = load_settings({})
    detect.forget()
    probe_ms = _ms(lambda: detect.level(settings))
    level = detect.level(settings)
    print(f"sandbox level: {level.describe()} (probe, once per process: {probe_ms:.1f} ms)")
    limits = Limits.of(settings)
    print(f"limits: each file {limits.file >> 20} MiB, each process {limits.memory >> 20} MiB of address space "
          f"and {limits.cpu_s} CPU s, home and /tmp a tmpfs of {limits.writable >> 20} MiB each (namespace levels)")

    mechanisms = [BEST_EFFORT]
    for mechanism in (UNSHARE, BWRAP):
        binary = shutil.which(mechanism)
        why = detect._probe(mechanism, binary) if binary else "not installed"
        if why is None:
            mechanisms.append(mechanism)
        else:
            print(f"{mechanism}: unavailable here ({why})")

    def call(mechanism: str):
        def run() -> None:
            result = execute("true", 30, settings, output_cap=ARTIFACT_OUTPUT_CAP, mechanism=mechanism)
            assert result.exit_code == 0, result
        return run

    tools = worker_tools()
    ctx = ToolContext(settings=settings)
    tool_call = lambda: invoke(tools, "container_exec", json.dumps({"command": "true"}), ctx)  # noqa: E731
    runs = {name: [] for name in [*mechanisms, "tool"]}
    for name, fn in [(m, call(m)) for m in mechanisms] + [("tool", tool_call)]:
        fn()  # warm: the nsinit .pyc, the uid slot file, page cache
    for _ in range(repeat):
        for name in mechanisms:
            runs[name].append(_ms(call(name)))
        runs["tool"].append(_ms(tool_call))

    labels = {BEST_EFFORT: "best-effort (subreaper launcher)", UNSHARE: "unshare (namespaces + pivot_root)",
              BWRAP: "bwrap (namespaces)", "tool": f"container_exec tool call ({level.mechanism})"}
    print(f"== container_exec(\"true\"), median of {repeat}, interleaved ==")
    for name, samples in runs.items():
        samples.sort()
        print(f"{labels[name]:<44} p50 {statistics.median(samples):8.2f} ms   "
              f"min {samples[0]:8.2f} ms   max {samples[-1]:8.2f} ms")
    if BWRAP in runs:
        p50 = statistics.median(runs[BWRAP])
        print(f"bwrap with the limits: p50 {p50:.2f} ms (target <= 15 ms; 11.2 ms before the limits): "
              f"{'ok' if p50 <= 15 else 'OVER'}")


if __name__ == "__main__":
    script(main)
