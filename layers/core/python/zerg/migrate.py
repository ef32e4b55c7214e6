"""Numbered SQL migrations (``zerg/migrations/NNNN_name.sql``), applied by ``zerg db migrate``.

Invariants:
- Each migration runs once, in its own transaction, and is recorded in ``schema_migrations``
  with a checksum; running ``migrate`` again changes nothing.
- Concurrent migrators serialise on an advisory lock, so two processes starting at once are safe.
- A database that records a version the code does not know (newer code ran against it), or a
  migration whose file changed after it was applied, is refused: never guess at a schema.
- A migration that changes or removes rows (not only the schema) says what it did, one line each,
  with ``RAISE INFO`` (sent to the client whatever ``client_min_messages`` is): each line is logged
  and returned on its :class:`Applied` (``zerg db migrate`` prints them).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from psycopg import Connection
from psycopg.errors import Diagnostic
from psycopg.rows import tuple_row

_LOCK_KEY = 0x7A657267  # "zerg"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Applied(Migration):
    """A migration just applied, with what it said it did to the rows (its ``RAISE INFO`` lines)."""

    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Status:
    current: int
    latest: int
    applied: list[int]
    pending: list[Migration]


def available() -> list[Migration]:
    found = []
    for entry in resources.files("zerg.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"migration numbers must be 1..N without gaps, found {versions}")
    return found


def _ensure_table(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
               version     integer PRIMARY KEY,
               name        text NOT NULL,
               checksum    text NOT NULL,
               applied_at  timestamptz NOT NULL DEFAULT now())"""
    )


def _check(conn: Connection, migrations: list[Migration]) -> dict[int, str]:
    cur = conn.cursor(row_factory=tuple_row)
    applied = dict(cur.execute("SELECT version, checksum FROM schema_migrations").fetchall())
    known = {m.version: m for m in migrations}
    newer = sorted(v for v in applied if v not in known)
    if newer:
        raise MigrationError(
            f"database is at schema version {max(applied)}, newer than this code "
            f"(latest {max(known, default=0)}); upgrade Zerg instead of migrating"
        )
    for version, checksum in applied.items():
        if known[version].checksum != checksum:
            raise MigrationError(
                f"migration {version:04d}_{known[version].name} changed after it was applied; "
                "add a new migration instead of editing an applied one"
            )
    return applied


def status(conn: Connection) -> Status:
    """Read-only: a database never migrated is at version 0 (nothing is created here)."""
    migrations = available()
    exists = conn.cursor(row_factory=tuple_row).execute("SELECT to_regclass('schema_migrations')").fetchone()[0]
    applied = _check(conn, migrations) if exists else {}
    return Status(
        current=max(applied, default=0),
        latest=migrations[-1].version if migrations else 0,
        applied=sorted(applied),
        pending=[m for m in migrations if m.version not in applied],
    )


# Indexes that need an extension the server may lack (pg_trgm: Aurora and the embedded 18 have it,
# pgserver's 16 did not, so there 0007 skipped its trigram index). Re-checked at every migrate, so
# a database that has the extension now (e.g. moved by `zerg db upgrade`) gets them; where it is
# still missing nothing happens. Once the index exists it takes no lock: CREATE INDEX IF NOT EXISTS
# would take a SHARE lock on memory_files before finding the index there (waiting behind any open
# memory write, and blocking writes while it waits), and every CLI command migrates; the catalog is
# asked first.
OPTIONAL_INDEXES = """DO $$
BEGIN
    IF to_regclass('memory_files') IS NOT NULL AND to_regclass('memory_files_content_trgm') IS NULL
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
            CREATE EXTENSION pg_trgm;
        END IF;
        CREATE INDEX IF NOT EXISTS memory_files_content_trgm ON memory_files USING gin (content gin_trgm_ops);
    END IF;
END
$$"""


def migrate(conn: Connection) -> list[Applied]:
    """Apply pending migrations, then :data:`OPTIONAL_INDEXES`; return the migrations applied
    (empty when up to date), each with the lines it reported (also logged)."""
    migrations = available()
    done: list[Applied] = []
    notes: list[str] = []

    def heard(diag: Diagnostic) -> None:  # NOTICE is PostgreSQL's chatter ("already exists, skipping")
        if diag.severity_nonlocalized == "INFO" and diag.message_primary:
            notes.append(diag.message_primary)

    conn.add_notice_handler(heard)
    try:
        _apply(conn, migrations, done, notes)
    finally:
        conn.remove_notice_handler(heard)
    if any(m.notes for m in done):
        from zerg import observability

        for m in done:
            for note in m.notes:
                observability.logger().warning(note, extra={"migration": f"{m.version:04d}_{m.name}"})
    return done


def _apply(conn: Connection, migrations: list[Migration], done: list[Applied], notes: list[str]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        _ensure_table(conn)
        applied = _check(conn, migrations)
        for migration in migrations:
            if migration.version in applied:
                continue
            notes.clear()
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            done.append(Applied(migration.version, migration.name, migration.sql, tuple(notes)))
        conn.execute(OPTIONAL_INDEXES)
