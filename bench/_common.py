"""Helpers shared by the benchmarks: timing statistics and a throw-away database."""

from __future__ import annotations

import contextlib
import os
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Run ``fn`` ``repeat`` times; return p50/p99/mean in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "p50_ms": statistics.median(samples),
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "mean_ms": statistics.fmean(samples),
        "n": repeat,
    }


def fmt(name: str, stats: dict[str, float]) -> str:
    return f"{name:<44} p50 {stats['p50_ms']:8.3f} ms   p99 {stats['p99_ms']:8.3f} ms   (n={stats['n']})"


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    """A fresh, migrated database on DATABASE_URL's server or the embedded one (dropped after)."""
    import psycopg

    from zerg import db
    from zerg.migrate import migrate

    admin = os.environ.get("DATABASE_URL") or db.embedded_database_url(ROOT / ".zerg" / "bench")
    name = f"zerg_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(admin, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
        yield url
    finally:
        db.close_pools()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
