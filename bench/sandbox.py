"""The cost of the container_exec sandbox: one ``true`` per call, every mechanism this host has.

- best effort (today's path: scrubbed environment, per-call uid as root, process group + sweep)
- util-linux ``unshare`` (user/PID/mount/IPC/UTS/network namespaces, pivot_root, caps dropped)
- bubblewrap, when installed
- the ``container_exec`` tool call at the host's level (what a worker pays), and the one-time probe

Median of 30 each, interleaved in one run so that load on the machine hits every mechanism alike.
Smoke (main(smoke=True)): 3 calls each. Target: the namespace sandbox at most 30 ms.

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
    from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, detect, execute
    from zerg.tools.catalog import worker_tools

    repeat = 3 if smoke else 30
    settings = load_settings({})
    detect.forget()
    probe_ms = _ms(lambda: detect.level(settings))
    level = detect.level(settings)
    print(f"sandbox level: {level.describe()} (probe, once per process: {probe_ms:.1f} ms)")

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

    labels = {BEST_EFFORT: "best-effort (today's path)", UNSHARE: "unshare (namespaces + pivot_root)",
              BWRAP: "bwrap (namespaces)", "tool": f"container_exec tool call ({level.mechanism})"}
    print(f"== container_exec(\"true\"), median of {repeat}, interleaved ==")
    for name, samples in runs.items():
        samples.sort()
        print(f"{labels[name]:<44} p50 {statistics.median(samples):8.2f} ms   "
              f"min {samples[0]:8.2f} ms   max {samples[-1]:8.2f} ms")


if __name__ == "__main__":
    script(main)
