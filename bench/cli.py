"""``zerg run "check disk"`` as a user meets it: a fresh process, the offline model (no OPENAI_*
variables), a warm database (DATABASE_URL to a bench database on a running server) and its own
data dir. Wall time, median of 3, and where the time goes.

Each sample is one fresh interpreter running what the ``zerg`` console script runs
(``zerg.cli.main.main(["run", "check disk"])``), timed from outside (the wall) and from inside:

- interpreter start and exit: the wall less the time inside the process
- CLI imports: ``import zerg.cli.main``
- engine imports: the handlers (``LocalEngine()``), boto3 and moto, when the run first needs them
- engine start: ``LocalEngine().start()`` less those imports (moto's mock, the Lambda functions,
  the state machine)
- the run itself: the rest (database, the run through the state machine, the report)

Run: .venv/bin/python -m bench.cli   (smoke: main(smoke=True), one sample)
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import ROOT, bench_database, script

# Instruments the engine with wrappers that only read the clock; writes phases to argv[1].
_DRIVER = """
import json, sys, time
t0 = time.perf_counter()
import zerg.cli.main
from zerg.local import engine as eng
phases = {"cli_imports": time.perf_counter() - t0, "engine_imports": 0.0, "engine_start": 0.0}
init, start = eng.LocalEngine.__init__, eng.LocalEngine.start

def timed_init(self, *a, **k):
    t = time.perf_counter()
    init(self, *a, **k)
    phases["engine_imports"] += time.perf_counter() - t

def timed_start(self):
    t = time.perf_counter()
    import boto3, moto, moto.awslambda_simple.models
    t1 = time.perf_counter()
    phases["engine_imports"] += t1 - t
    try:
        return start(self)
    finally:
        phases["engine_start"] += time.perf_counter() - t1

eng.LocalEngine.__init__, eng.LocalEngine.start = timed_init, timed_start
try:
    rc = zerg.cli.main.main(["run", "check disk"])
finally:
    phases["inside"] = time.perf_counter() - t0
    with open(sys.argv[1], "w") as f:
        json.dump(phases, f)
sys.exit(rc)
"""


def cli_env(data_dir: str, database_url: str) -> dict[str, str]:
    """The environment of a user's shell: no model configured, no Zerg settings but the data dir
    and the database; this checkout's code first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ZERG_"))}
    paths = [str(ROOT / "layers" / "core" / "python"), str(ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(ZERG_DATA_DIR=data_dir, DATABASE_URL=database_url, PYTHONPATH=os.pathsep.join(paths))
    return env


def _sample(env: dict[str, str], tmp: str) -> dict[str, float]:
    """One ``zerg run "check disk"``: its wall and phases (ms) and the run's recorded duration."""
    timings = Path(tmp) / "phases.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(timings)], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    recorded = re.search(r"^run \d+: success in ([\d.]+)s", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or recorded is None:
        raise RuntimeError(f"zerg run exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    ms = {k: v * 1000 for k, v in json.loads(timings.read_text()).items()}
    ms.update(wall=wall * 1000, recorded=float(recorded.group(1)) * 1000)
    ms["interpreter"] = ms["wall"] - ms["inside"]
    ms["run"] = ms["inside"] - ms["cli_imports"] - ms["engine_imports"] - ms["engine_start"]
    return ms


def main(smoke: bool = False) -> None:
    repeat = 1 if smoke else 3
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        env = cli_env(tmp, url)
        samples = [_sample(env, tmp) for _ in range(repeat)]

    def med(key: str) -> float:
        return statistics.median(s[key] for s in samples)

    print(f'== zerg run "check disk" (offline model, warm database; median of {repeat}) ==')
    for label, key in (
        ("zerg run, wall", "wall"),
        ("  interpreter start and exit", "interpreter"),
        ("  CLI imports (import zerg.cli.main)", "cli_imports"),
        ("  engine imports (handlers, boto3, moto)", "engine_imports"),
        ("  engine start (mock, functions, state machine)", "engine_start"),
        ("  the run itself (db, run, report)", "run"),
        ("run duration as recorded (runs row)", "recorded"),
    ):
        print(f"{label:<48} {med(key):8.0f} ms")


if __name__ == "__main__":
    script(main)
