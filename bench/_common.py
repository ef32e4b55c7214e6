"""Helpers shared by the benchmarks: timing statistics, a scoped environment and a throw-away
database.

Every benchmark runs in one process after the others (``python -m bench``, tests/test_bench.py),
so nothing a benchmark configures may outlive it: environment variables go through
:func:`environ` (set for the block, the whole environment restored after), and
:func:`bench_database` hands out a fresh database and forgets the process runtime, the settings
cache and the connection pools when it is dropped. Log lines go to stderr at WARNING: stdout is
for figures only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import zerg.local  # noqa: F401  the local host: gives the composition root its run starter

ROOT = Path(__file__).resolve().parents[1]
QUIET = "WARNING"


class Unavailable(RuntimeError):
    """A part a benchmark needs cannot be had on this machine (after trying to install or build it):
    the benchmark fails with this one line, what to do, and no traceback."""


def prepare_web() -> None:
    """The built web app and Debian's Chromium, the way ``./dev.sh test`` gets them for the browser
    tests (``./dev.sh web``: npm builds web/dist when its sources changed; as root, apt-get installs
    chromium when /usr/bin/chromium is missing). Its lines go to stderr; stdout is for figures."""
    import subprocess

    # stdout=2: the script's every line to this process's standard error (a file descriptor, so it
    # streams, and under pytest into its capture).
    done = subprocess.run([str(ROOT / "dev.sh"), "web"], stdin=subprocess.DEVNULL, stdout=2, check=False)
    if done.returncode != 0:
        raise Unavailable(f"./dev.sh web exited {done.returncode} (its lines above say why)")


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


def forget_runtime() -> None:
    """Drop what the process built from the settings of the moment: the runtime (and the local
    engine it may have started), the settings cache; then re-read the log level."""
    from zerg import config, observability, wiring

    wiring.reset_runtime()
    config.get_settings.cache_clear()
    observability.reset()
    config.get_settings.cache_clear()  # reset() read them: leave nothing cached


@contextlib.contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """Run the block with ``values`` set in the environment (``None`` unsets) and logs at WARNING
    unless ``ZERG_LOG_LEVEL`` is given; afterwards the whole environment is as it was (whatever
    the block changed) and the runtime is rebuilt from it on next use."""
    saved = dict(os.environ)
    try:
        os.environ["ZERG_LOG_LEVEL"] = QUIET
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        forget_runtime()
        yield
    finally:
        from zerg import wiring

        wiring.reset_runtime()  # built from the block's settings: stop it before they go
        os.environ.clear()
        os.environ.update(saved)
        forget_runtime()


def admin_database_url() -> str:
    """The server benchmarks create their databases on: DATABASE_URL, else an embedded one."""
    from zerg import db

    return os.environ.get("DATABASE_URL") or db.embedded_database_url(
        ROOT / ".zerg" / f"bench-pg{db.embedded_major()}")


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    """A fresh, migrated database on DATABASE_URL's server or the embedded one (dropped after).

    On the way out the process runtime, the settings cache and every pool are dropped first:
    the next benchmark must not reach for a pool on a database that no longer exists.
    """
    import psycopg

    from zerg import db
    from zerg.migrate import migrate

    admin = admin_database_url()
    name = f"zerg_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(admin, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
        yield url
    finally:
        forget_runtime()
        db.close_pools()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_benchmark(main: Callable[..., None], smoke: bool = False) -> None:
    """Run one benchmark's ``main`` quietly in an environment restored afterwards (``smoke``:
    its smallest configuration)."""
    import inspect

    if smoke and "smoke" not in inspect.signature(main).parameters:
        raise TypeError(f"{main.__module__}.main() has no smoke mode")
    with environ():
        main(smoke=True) if smoke else main()


def script(main: Callable[..., None]) -> None:
    """``python -m bench.<name> [--smoke]``."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="the smallest configuration (a quick check that it runs)")
    try:
        run_benchmark(main, smoke=parser.parse_args().smoke)
    except Unavailable as exc:
        raise SystemExit(f"{main.__module__}: cannot run: {exc}") from None


MCP_SERVER_PINS = ("mcp==2.3.0", "mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19")


def mcp_stdio_paths() -> str:
    """``ZERG_MCP_STDIO_PATHS`` for the MCP servers from PyPI the tests and the bench run over stdio.

    The sandbox runs a server as an unprivileged uid, which must be able to reach the installation it
    is mounted from: this Python's own (``sys.prefix``) when every directory above it lets others in;
    otherwise (a clone in a private directory: a home of mode 0700, ``mktemp -d``) a venv of just these
    servers, made once per machine under /tmp where other users can read it."""
    import hashlib
    import stat
    import subprocess
    import sys

    def reachable(path: Path) -> bool:
        return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])

    if reachable(Path(sys.prefix)):
        return ",".join(dict.fromkeys([sys.prefix, sys.base_prefix]))
    import fcntl

    digest = hashlib.sha1(" ".join((sys.version, *MCP_SERVER_PINS)).encode()).hexdigest()[:12]
    shared = Path("/tmp") / f"zerg-mcp-servers-{digest}"
    with open(f"{shared}.lock", "a") as lock:  # one maker at a time (test workers in parallel)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / ".ready").exists():
            subprocess.run([sys._base_executable, "-m", "venv", "--clear", str(shared)], check=True)
            subprocess.run([str(shared / "bin" / "python"), "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", *MCP_SERVER_PINS], check=True)
            subprocess.run(["chmod", "-R", "a+rX", str(shared)], check=True)
            (shared / ".ready").touch()
    return ",".join(dict.fromkeys([str(shared), sys.base_prefix]))
