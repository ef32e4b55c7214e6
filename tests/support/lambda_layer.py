"""Run handler code the way Lambda does, against a built layer: the function's code dir is
``/var/task`` (first on ``sys.path``), the layer's ``python/`` is ``/opt/python``, and apart from
them only the standard library is importable (``-I -S``: no site-packages, no PYTHON* variables).
``-B`` because Lambda's file system is read-only: no bytecode is written, so a module runs from the
bytecode the layer ships (infra.components.layer_build.compile_bytecode) or is compiled from
source on every cold start (a layer built with ``bytecode=False``), as on Lambda."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Each function's code dir and its handler module, as infra/stacks/workflow.py deploys them.
FUNCTION_DIRS = {p.parent.name: p.parent for p in sorted((ROOT / "functions").glob("*/handler.py"))}
FUNCTION_DIRS["migrator"] = ROOT / "infra" / "migrator"
# What a fresh Lambda process sees besides the function's own variables: no ZERG_* settings.
LAMBDA_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "AWS_REGION": "us-east-1",
              "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "true"}


def lambda_task(code_dir: Path, dest: Path) -> Path:
    """``code_dir`` copied to ``dest`` as its asset would be (no caches): the /var/task."""
    shutil.copytree(code_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def run_isolated(task_dir: Path, layer_dir: Path, code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    prelude = f"import sys\nsys.path[:0] = [{str(task_dir)!r}, {str(layer_dir)!r}]\n"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", prelude + code],
        cwd=task_dir, env=LAMBDA_ENV, capture_output=True, text=True, timeout=timeout,
    )


IMPORT_TIMER = """
import time
_t = time.perf_counter()
import handler
print((time.perf_counter() - _t) * 1000)
"""


def import_ms(task_dir: Path, layer_dir: Path) -> float:
    """Milliseconds to import ``handler`` in one fresh isolated interpreter."""
    done = run_isolated(task_dir, layer_dir, IMPORT_TIMER)
    if done.returncode:
        raise RuntimeError(f"import handler failed in {task_dir}:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])
