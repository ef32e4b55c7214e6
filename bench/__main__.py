"""Run every benchmark in turn: .venv/bin/python -m bench"""

from __future__ import annotations

import importlib

for name in ("artifacts", "worker", "tools", "run", "api"):
    print(f"\n######## bench.{name} ########", flush=True)
    importlib.import_module(f"bench.{name}").main()
