"""Handler import time in a fresh interpreter with only the Lambda layer on ``sys.path``.

The layer is built for this interpreter (dependencies cached under ``.zerg/layer-deps``; the
first run downloads them). Each handler is imported in fresh ``python -I -S`` processes with just
its code dir and the layer on ``sys.path`` (tests/support/lambda_layer.py), two ways:

- ``from source``: no bytecode anywhere in the layer or the code dir, none written (``-B``).
  This is a Lambda cold start with today's layer: it ships no .pyc (the build machine's Python
  is not 3.12) and /opt is read-only, so every module is compiled on every cold start.
- ``with .pyc``: bytecode written by a first import, then reused: the cost if the layer shipped
  bytecode for the runtime's Python.

Target (issue): <= 150 ms per handler. Run: .venv/bin/python -m bench.imports
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import script
from infra.components.layer_build import build_host_layer
from tests.support.lambda_layer import FUNCTION_DIRS, IMPORT_TIMER, LAMBDA_ENV, import_ms, lambda_task

HANDLERS = ("worker", "supervisor", "summary", "events")  # events is the ingress
TARGET_MS = 150.0


def _import_ms_with_pyc(task: Path, layer: Path) -> float:
    code = f"import sys\nsys.path[:0] = [{str(task)!r}, {str(layer)!r}]\n{IMPORT_TIMER}"
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=task, env=LAMBDA_ENV,
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main(smoke: bool = False) -> None:
    repeat = 1 if smoke else 5
    with tempfile.TemporaryDirectory(prefix="zerg-bench-layer-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build_host_layer(root / "probe")  # fills the dependency cache if needed
        print(f"host layer build (deps cached after the first run): {time.perf_counter() - start:.1f} s")
        print(f"== import handler, only the layer on sys.path (median of {repeat} fresh interpreters) ==")
        for name in HANDLERS:
            # A layer and code dir of its own per handler and per mode: bytecode written by one
            # measurement must not speed up another.
            cold_layer = build_host_layer(root / f"{name}-cold")
            cold_task = lambda_task(FUNCTION_DIRS[name], root / f"{name}-cold-task")
            cold = statistics.median(import_ms(cold_task, cold_layer) for _ in range(repeat))
            warm_layer = build_host_layer(root / f"{name}-warm")
            warm_task = lambda_task(FUNCTION_DIRS[name], root / f"{name}-warm-task")
            _import_ms_with_pyc(warm_task, warm_layer)  # writes the bytecode
            warm = statistics.median(_import_ms_with_pyc(warm_task, warm_layer) for _ in range(repeat))
            flag = "" if cold <= TARGET_MS else f"   (over the {TARGET_MS:.0f} ms target)"
            print(f"{name:<11} from source {cold:8.1f} ms   with .pyc {warm:8.1f} ms{flag}")


if __name__ == "__main__":
    script(main)
