"""Schema migrations on a real PostgreSQL: fresh → latest, idempotent, refusing the unknown.

They stay valid on PostgreSQL 16, Aurora's major version, while the embedded server is 18: every
migration is applied to a real PostgreSQL 16.2 (pgserver: pgvector 0.6.2, no pg_trgm) and the
memory tables are used there; a cheap static guard names PostgreSQL 17/18-only syntax. The
embedded 18 is checked for what memory needs (pgvector 0.8 iterative scans, pg_trgm).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from tests.conftest import embedded_test_dir
from tests.support.factories import unique_name
from zerg import db
from zerg.migrate import MigrationError, available, migrate, status
from zerg.owners import create_owner
from zerg.runs.threads import append_messages, find_or_create_thread


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


def test_migrating_an_up_to_date_database_waits_on_no_open_memory_write(database_url, owner):
    # Every CLI command migrates: it must neither wait behind a memory write nor block writes.
    with psycopg.connect(database_url) as writer, _connect(database_url) as conn:
        writer.execute("INSERT INTO memory_files (owner_id, path, content, writer, content_hash) "
                       "VALUES (%s, 'open.md', 'not committed yet', 'user', 'h')", (owner,))
        conn.execute("SET lock_timeout = '2s'")
        assert conn.execute("SELECT to_regclass('memory_files_content_trgm') IS NOT NULL AS there").fetchone()["there"]
        assert migrate(conn) == []  # before: CREATE INDEX IF NOT EXISTS waited for a SHARE lock, then failed
        writer.rollback()


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


# --- 0018: contact addresses in any case ---------------------------------------------------------

def _migrated_before(conn: psycopg.Connection, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The database as it was before migration ``name``: the ones before it, applied by migrate()."""
    every = available()
    before = every[:next(i for i, m in enumerate(every) if m.name == name)]
    with monkeypatch.context() as patched:
        patched.setattr("zerg.migrate.available", lambda: before)
        migrate(conn)


def test_contact_addresses_that_differ_only_in_case_are_resolved_and_each_reported(make_database, monkeypatch,
                                                                                   capsys, caplog):
    import logging

    from zerg import config
    from zerg.cli.main import main

    url = make_database()
    with _connect(url) as conn:
        _migrated_before(conn, "contact_address_case", monkeypatch)
        ann, ben, cat = (create_owner(conn, unique_name(n)).owner_id for n in ("ann", "ben", "cat"))

        def contact(owner: int, address: str, kind: str = "email", verified: str | None = None,
                    added: str = "2024-01-01") -> int:
            return conn.execute(
                """INSERT INTO owner_contacts (owner_id, kind, address, verified_at, created_at)
                   VALUES (%s, %s, %s, %s::timestamptz, %s::timestamptz) RETURNING id""",
                (owner, kind, address, verified, added)).fetchone()["id"]

        def sent_to(owner: int, contact_id: int) -> int:
            return conn.execute("INSERT INTO notifications (owner_id, contact_id, channel, purpose, status, address) "
                                "VALUES (%s, %s, 'email', 'alert', 'sent', 'x') RETURNING id",
                                (owner, contact_id)).fetchone()["id"]

        # across owners, both verified: the first verified keeps it (ben's was verified later)
        alice = contact(ann, "alice@example.com", verified="2024-02-01 10:00Z", added="2024-01-05")
        alice_ben = contact(ben, "ALICE@example.com", verified="2024-03-01 09:30Z", added="2024-01-02")
        # one owner, unverified added first and the verified one later: the verified one is kept
        bob_old = contact(ann, "Bob@example.com", added="2024-01-01")
        bob = contact(ann, "bob@example.com", verified="2024-04-01 00:00Z", added="2024-02-01")
        # across owners, neither verified: the first added keeps it
        carol = contact(ben, "carol@example.com", added="2024-01-01")
        carol_cat = contact(cat, "CAROL@example.com", added="2024-01-03")
        # one owner, both verified: the first verified is kept and gets the other's notifications
        dan = contact(cat, "Dan@example.com", verified="2024-01-10 00:00Z")
        dan_too = contact(cat, "dan@example.com", verified="2024-01-20 00:00Z")
        moved, kept_note = sent_to(cat, dan_too), sent_to(cat, dan)
        orphaned = sent_to(ben, alice_ben)
        # no collision: left alone, in the case it was written; numbers have no case
        erin = contact(ben, "Erin.Smith@example.com", verified="2024-01-01 00:00Z")
        phone = contact(ann, "+15551230000", kind="sms", verified="2024-01-01 00:00Z")

        monkeypatch.setenv("DATABASE_URL", url)
        config.get_settings.cache_clear()
        caplog.set_level(logging.INFO)
        assert main(["db", "migrate"]) == 0  # the next migration, as an operator runs it

        out = capsys.readouterr().out
        report = [
            (f"owner_contacts: removed email contact #{alice_ben} ALICE@example.com (owner {ben}, verified 2024-03-01 "
             f"09:30 UTC): the same address as contact #{alice} alice@example.com (owner {ann}, verified 2024-02-01 "
             f"10:00 UTC), which is kept; owner {ben} no longer receives mail there"),
            (f"owner_contacts: removed email contact #{bob_old} Bob@example.com (owner {ann}, unverified): the same "
             f"address as contact #{bob} bob@example.com (the same owner, verified 2024-04-01 00:00 UTC), which is kept "
             "(its notifications moved to it)"),
            (f"owner_contacts: removed email contact #{carol_cat} CAROL@example.com (owner {cat}, unverified): the same "
             f"address as contact #{carol} carol@example.com (owner {ben}, unverified), which is kept"),
            (f"owner_contacts: removed email contact #{dan_too} dan@example.com (owner {cat}, verified 2024-01-20 00:00 "
             f"UTC): the same address as contact #{dan} Dan@example.com (the same owner, verified 2024-01-10 00:00 "
             "UTC), which is kept (its notifications moved to it)"),
        ]
        assert out.splitlines()[:2] == [f"applied {m.version:04d}_{m.name}" for m in available()
                                        if m.name == "contact_address_case"] + [f"  {report[0]}"]
        assert [line.strip() for line in out.splitlines() if line.startswith("  ")] == report
        logged = [r for r in caplog.records if getattr(r, "migration", "").endswith("_contact_address_case")]
        assert [r.getMessage() for r in logged] == report and {r.levelname for r in logged} == {"WARNING"}

        left = conn.execute("SELECT id, owner_id, address, canonical_address FROM owner_contacts ORDER BY id").fetchall()
        assert [(r["id"], r["owner_id"], r["address"]) for r in left] == sorted([
            (alice, ann, "alice@example.com"), (bob, ann, "bob@example.com"), (carol, ben, "carol@example.com"),
            (dan, cat, "Dan@example.com"), (erin, ben, "Erin.Smith@example.com"), (phone, ann, "+15551230000")])
        assert {r["address"]: r["canonical_address"] for r in left}["Erin.Smith@example.com"] == "erin.smith@example.com"
        contact_of = {r["id"]: r["contact_id"] for r in conn.execute(
            "SELECT id, contact_id FROM notifications WHERE id = ANY(%s)", ([moved, kept_note, orphaned],))}
        assert contact_of == {moved: dan, kept_note: dan, orphaned: None}  # another owner's history is not moved
        with pytest.raises(psycopg.errors.UniqueViolation):  # from now on the database refuses a case variant
            conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', 'ERIN.smith@example.com')",
                         (cat,))
        assert migrate(conn) == []  # and it happened once


def test_the_canonical_address_column_is_the_python_function(database_url, owner):
    import string

    from zerg.notify.contacts import canonical_address

    tricky = "".join(string.printable.split()) + "İıKKß"  # every printable ASCII, and letters lower() changes oddly
    with _connect(database_url) as conn, conn.transaction(force_rollback=True):
        row = conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', %s) "
                           "RETURNING canonical_address", (owner, tricky)).fetchone()
    assert row["canonical_address"] == canonical_address(tricky)
    assert canonical_address("ALICE.Smith+Tag@Example.COM") == "alice.smith+tag@example.com"
    assert canonical_address("İKK") == "İkK"  # non-ASCII as it is: only A-Z fold, in SQL as here


# --- PostgreSQL 16 (Aurora) and the embedded 18 ---------------------------------------------

VECTOR = "[" + ",".join(str(i / 384) for i in range(384)) + "]"


def _fresh_database(admin_url: str) -> Iterator[psycopg.Connection]:
    name = f"zerg_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True, row_factory=dict_row) as conn:
            yield conn
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg16_conn(pg16):
    yield from _fresh_database(pg16)


def test_every_migration_applies_on_postgresql_16_and_the_memory_tables_work(pg16_conn):
    conn = pg16_conn
    assert conn.execute("SHOW server_version").fetchone()["server_version"].startswith("16.")
    assert [m.version for m in migrate(conn)] == [m.version for m in available()]
    assert status(conn).pending == []
    info = db.server_info(conn)
    assert info["pgvector"] == "0.6.2" and not info["pg_trgm_available"]
    indexes = {r["indexname"] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memory_files'")}
    assert "memory_files_search" in indexes and "memory_files_content_trgm" not in indexes  # 0007: only with pg_trgm

    owner = create_owner(conn, unique_name("pg16")).owner_id
    thread = find_or_create_thread(conn, owner)
    append_messages(conn, owner, thread, None, [("user", "m1", {}), ("assistant", "m2", {})])
    first, last = (r["id"] for r in conn.execute(
        "SELECT id FROM thread_messages WHERE thread_id = %s ORDER BY id", (thread,)))
    file_id = conn.execute(
        """INSERT INTO memory_files (owner_id, path, title, content, tags, writer, content_hash)
           VALUES (%s, 'notes/cube.md', 'Backup server', 'the backup server is called cube', '{remembered}',
                   'user', 'h1') RETURNING id""", (owner,)).fetchone()["id"]
    conn.execute(
        """INSERT INTO memory_file_versions (owner_id, path, title, content, tags, metadata, writer,
                                             content_hash, written_at, reason)
           VALUES (%s, 'notes/cube.md', '', 'old', '{}', '{}', 'user', 'h0', now(), 'overwrite')""", (owner,))
    conn.execute(
        """INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash)
           VALUES (%s, %s, 'all-MiniLM-L6-v2', 384, %s::vector, 'h1')""", (file_id, owner, VECTOR))
    conn.execute("INSERT INTO org_memory (owner_id, category, content, importance, writer) "
                 "VALUES (%s, 'profile', 'prefers short answers', 8, 'supervisor')", (owner,))
    conn.execute(
        """INSERT INTO conversation_summaries (owner_id, thread_id, first_message_id, last_message_id,
                                               message_count, summary) VALUES (%s, %s, %s, %s, 2, 'two messages')""",
        (owner, thread, first, last))

    hit = conn.execute("SELECT path FROM memory_files WHERE owner_id = %s AND search @@ plainto_tsquery('english', %s)",
                       (owner, "backup cube")).fetchone()
    assert hit["path"] == "notes/cube.md"
    nearest = """SELECT file_id FROM memory_embeddings WHERE owner_id = %s AND model = 'all-MiniLM-L6-v2'
                 ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 5"""
    with conn.transaction():  # the per-model partial HNSW index (an expression index) works on 16 too
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = " ".join(r["QUERY PLAN"] for r in conn.execute(
            """EXPLAIN SELECT file_id FROM memory_embeddings WHERE model = 'all-MiniLM-L6-v2'
               ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 5""", (VECTOR,)))
        assert "memory_embeddings_hnsw_minilm" in plan, plan
    assert conn.execute(nearest, (owner, VECTOR)).fetchone()["file_id"] == file_id


def test_the_embedded_server_has_what_memory_needs():
    for conn in _fresh_database(db.embedded_database_url(embedded_test_dir())):
        migrate(conn)
        info = db.server_info(conn)
        assert int(conn.execute("SHOW server_version_num").fetchone()["server_version_num"]) >= 180000
        major, minor = (int(p) for p in info["pgvector"].split(".")[:2])
        assert (major, minor) >= (0, 8), info
        conn.execute("SET hnsw.iterative_scan = relaxed_order")  # pgvector 0.8's owner-filtered top-k
        assert info["pg_trgm"], "0007 installs pg_trgm where the server has it"
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'memory_files_content_trgm'").fetchone()


# A tripwire, not a parser: each pattern is syntax PostgreSQL 16 rejects (with the version that
# added it and an example it must catch). The real check is the PostgreSQL 16 run above.
POSTGRES_17_18_ONLY = {
    "uuidv7() (18)": (r"\buuidv7\s*\(", "DEFAULT uuidv7()"),
    "JSON_TABLE (17)": (r"\bJSON_TABLE\s*\(", "SELECT * FROM JSON_TABLE(doc, '$[*]' COLUMNS (a int))"),
    "SQL/JSON query functions (17)": (r"\bJSON_(QUERY|VALUE|EXISTS)\s*\(", "JSON_VALUE(doc, '$.a')"),
    "MERGE ... RETURNING (17)": (r"\bMERGE\b[^;]*\bRETURNING\b", "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING *"),
    "MERGE ... NOT MATCHED BY SOURCE (17)": (r"\bNOT\s+MATCHED\s+BY\s+SOURCE\b", "WHEN NOT MATCHED BY SOURCE THEN DELETE"),
    "COPY ... ON_ERROR (17)": (r"\bON_ERROR\b", "COPY t FROM STDIN (ON_ERROR ignore)"),
    "virtual generated columns (18)": (r"\bGENERATED\s+ALWAYS\s+AS\s*\([^;]*?\)\s*VIRTUAL\b|\bVIRTUAL\s*[,)]", "b int GENERATED ALWAYS AS (a * 2) VIRTUAL,"),
    "temporal keys WITHOUT OVERLAPS / PERIOD (18)": (r"\bWITHOUT\s+OVERLAPS\b|\bPERIOD\s+\w+\s*\)", "PRIMARY KEY (id, valid WITHOUT OVERLAPS)"),
    "NOT ENFORCED constraints (18)": (r"\bNOT\s+ENFORCED\b", "CHECK (a > 0) NOT ENFORCED"),
    "OLD./NEW. in RETURNING (18)": (r"\bRETURNING\b[^;]*\b(OLD|NEW)\s*\.", "UPDATE t SET a = 1 RETURNING old.a, new.a"),
}


def _without_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


@pytest.mark.parametrize("what", sorted(POSTGRES_17_18_ONLY))
def test_migrations_use_no_postgresql_17_or_18_only_syntax(what):
    pattern, example = POSTGRES_17_18_ONLY[what]
    regex = re.compile(pattern, re.IGNORECASE)
    assert regex.search(example), "the pattern must catch its own example"
    offenders = [f"{m.version:04d}_{m.name}" for m in available() if regex.search(_without_comments(m.sql))]
    assert offenders == [], f"{what} is not valid on PostgreSQL 16 (Aurora): {offenders}"
