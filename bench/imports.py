"""Handler import time in a fresh interpreter with only the Lambda layer on ``sys.path``.

The layer is built for this interpreter (dependencies installed and compiled once, cached under
``.zerg/layer-deps``; the first run downloads them). Each handler is imported in fresh
``python -I -S -B`` processes with just its code dir and the layer on ``sys.path``
(tests/support/lambda_layer.py; ``-B``: nothing is written, as in Lambda's read-only /opt), two ways:

- ``from source``: a layer without bytecode (the layer before issue 24): every module is compiled
  on every cold start.
- ``with .pyc``: the layer as it ships, with unchecked-hash bytecode compiled at build time (for
  this interpreter here; for CPython 3.12 in the deployed layer).

Then ``+ first event``: the same import followed by what the first invocation imports before its
work (the event models for a step function; the API app for ingress's first HTTP request), with
the shipped .pyc: the part of a cold start that moved out of the import, shown, not hidden.

Target (issue): <= 150 ms per handler import. Run: .venv/bin/python -m bench.imports
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench._common import script
from infra.components.layer_build import build_host_layer
from tests.support.lambda_layer import FUNCTION_DIRS, import_ms, lambda_task, run_isolated

HANDLERS = ("worker", "supervisor", "summary", "events")  # events is the ingress
TARGET_MS = 150.0
# What each function's first invocation imports before its work (its handler() does it).
FIRST_EVENT = {"worker": "import zerg.handler_input", "supervisor": "import zerg.handler_input",
               "summary": "import zerg.handler_input",
               "events": "from zerg.api.app import build_app\nbuild_app()"}


def _with_first_event_ms(task: Path, layer: Path, first: str) -> float:
    code = f"import time\n_t = time.perf_counter()\nimport handler\n{first}\nprint((time.perf_counter() - _t) * 1000)\n"
    done = run_isolated(task, layer, code)
    if done.returncode:
        raise RuntimeError(f"import handler failed in {task}:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def main(smoke: bool = False) -> None:
    repeat = 1 if smoke else 5
    with tempfile.TemporaryDirectory(prefix="zerg-bench-layer-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        shipped = build_host_layer(root / "shipped")  # fills the dependency cache if needed
        print(f"host layer build (deps cached after the first run): {time.perf_counter() - start:.1f} s")
        bare = build_host_layer(root / "bare", bytecode=False)
        print(f"== import handler, only the layer on sys.path (median of {repeat} fresh interpreters) ==")
        for name in HANDLERS:
            # -B everywhere: no measurement writes bytecode that another one would reuse.
            task = lambda_task(FUNCTION_DIRS[name], root / f"{name}-task")
            cold = statistics.median(import_ms(task, bare) for _ in range(repeat))
            warm = statistics.median(import_ms(task, shipped) for _ in range(repeat))
            first = statistics.median(_with_first_event_ms(task, shipped, FIRST_EVENT[name]) for _ in range(repeat))
            flag = "" if warm <= TARGET_MS else f"   (over the {TARGET_MS:.0f} ms target)"
            print(f"{name:<11} from source {cold:8.1f} ms   with .pyc {warm:8.1f} ms   "
                  f"+ first event {first:8.1f} ms{flag}")


if __name__ == "__main__":
    script(main)
