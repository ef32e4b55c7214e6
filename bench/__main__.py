"""Run every benchmark in turn: .venv/bin/python -m bench [--smoke]

Figures only on stdout (log lines go to stderr at WARNING). A benchmark that raises does not stop
the others: its traceback goes to stderr (for a part it needs that cannot be had here,
:class:`~bench._common.Unavailable`, one line saying what), and the exit status is 1 with the
failed ones named. A benchmark that needs a part installs or builds it first, as the tests do.
``--smoke`` runs each benchmark's smallest configuration (what tests/test_bench.py checks).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

from bench._common import Unavailable, run_benchmark

ORDER = ("artifacts", "worker", "tools", "run", "cli", "api")


def benchmarks() -> list[str]:
    """The modules in ORDER, then any other benchmark module in the package (by name)."""
    found = {m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])} - {"__main__"}
    found = {name for name in found if not name.startswith("_")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--smoke", action="store_true", help="each benchmark's smallest configuration")
    args = parser.parse_args(argv)
    failed = []
    for name in benchmarks():
        print(f"\n######## bench.{name} ########", flush=True)
        try:
            run_benchmark(importlib.import_module(f"bench.{name}").main, smoke=args.smoke)
        except Unavailable as exc:
            failed.append(name)
            print(f"bench.{name}: cannot run: {exc}", file=sys.stderr)
        except Exception:
            failed.append(name)
            traceback.print_exc()
        sys.stdout.flush()
    if failed:
        print(f"\nbench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
