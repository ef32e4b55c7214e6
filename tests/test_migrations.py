"""Schema migrations on a real PostgreSQL: fresh → latest, idempotent, refusing the unknown."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.factories import unique_name
from zerg.migrate import MigrationError, available, migrate, status
from zerg.owners import create_owner
from zerg.runs.threads import find_or_create_thread


def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def test_fresh_database_migrates_to_latest(make_database):
    with _connect(make_database()) as conn:
        assert status(conn).current == 0
        applied = migrate(conn)
        assert [m.version for m in applied] == [m.version for m in available()]
        st = status(conn)
        assert st.current == st.latest and not st.pending
        tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        assert {"owners", "owner_contacts", "threads", "thread_messages", "runs", "worker_jobs", "run_events"} <= tables
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone()


def test_migrating_twice_changes_nothing(make_database):
    with _connect(make_database()) as conn:
        migrate(conn)
        before = conn.execute("SELECT version, applied_at FROM schema_migrations ORDER BY version").fetchall()
        assert migrate(conn) == []
        after = conn.execute("SELECT version, applied_at FROM schema_migrations ORDER BY version").fetchall()
        assert before == after


def test_concurrent_migrators_apply_each_migration_once(make_database):
    url = make_database()
    results: list[int] = []

    def run() -> None:
        with _connect(url) as conn:
            results.append(len(migrate(conn)))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 0, len(available())]


def test_a_database_newer_than_the_code_is_refused(make_database):
    with _connect(make_database()) as conn:
        migrate(conn)
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')")
        with pytest.raises(MigrationError, match="newer than this code"):
            migrate(conn)
        with pytest.raises(MigrationError, match="newer than this code"):
            status(conn)


def test_an_applied_migration_that_changed_is_refused(make_database):
    with _connect(make_database()) as conn:
        migrate(conn)
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(MigrationError, match="changed after it was applied"):
            migrate(conn)


def test_one_supervisor_thread_per_owner_under_concurrent_find_or_create(pool):
    with pool.connection() as conn:
        owner_id = create_owner(conn, unique_name("racer")).owner_id
    barrier = threading.Barrier(2)
    got: list[int] = []

    def find() -> None:
        with pool.connection() as conn:
            barrier.wait()
            got.append(find_or_create_thread(conn, owner_id))

    threads = [threading.Thread(target=find) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1]
    with pool.connection() as conn:
        count = conn.execute("SELECT count(*) AS n FROM threads WHERE owner_id=%s", (owner_id,)).fetchone()
        assert count["n"] == 1
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO threads (owner_id, kind) VALUES (%s, 'supervisor')", (owner_id,))
