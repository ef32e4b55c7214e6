"""An embedded PostgreSQL 16 data dir (pgserver's, from earlier Zerg versions) is never lost: Zerg
refuses to start over it and says how to move it; ``zerg db upgrade`` moves it to PostgreSQL 18.

The old data dirs are real: made by pgserver, migrated, holding rows (owners, a thread message, a
memory file with its embedding), copied per test from one template (``cp -a`` keeps the owner
pgserver's server runs as when the tests run as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.factories import unique_name
from zerg import config, db
from zerg.cli.main import main
from zerg.migrate import migrate, status
from zerg.owners import create_owner
from zerg.runs.threads import append_messages, find_or_create_thread

VECTOR = [round(i / 384, 4) for i in range(384)]


def _seed(conn: psycopg.Connection) -> dict:
    """Rows in the tables memory and runs rely on; what they hold, to find them again."""
    alice = unique_name("alice")
    alice_id = create_owner(conn, alice).owner_id
    create_owner(conn, unique_name("bob"))
    thread = find_or_create_thread(conn, alice_id)
    append_messages(conn, alice_id, thread, None, [("user", "the backup server is called cube", {})])
    file_id = conn.execute(
        """INSERT INTO memory_files (owner_id, path, title, content, tags, writer, content_hash)
           VALUES (%s, 'notes/cube.md', 'cube', 'the backup server is called cube', '{remembered}', 'user', 'h')
           RETURNING id""", (alice_id,)).fetchone()["id"]
    conn.execute(
        """INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash)
           VALUES (%s, %s, 'all-MiniLM-L6-v2', 384, %s::vector, 'h')""", (file_id, alice_id, str(VECTOR)))
    return {"alice": alice, "message": "the backup server is called cube", "path": "notes/cube.md"}


@pytest.fixture(scope="module")
def pg16_template():
    """A stopped pgserver data dir, migrated and seeded: (its pg dir, what the seed wrote)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pgserver
        from pgserver._commands import pg_ctl

    root = Path(tempfile.mkdtemp(prefix="zerg-pg16-template-"))
    server = pgserver.get_server(root / "pg", cleanup_mode=None)
    with psycopg.connect(server.get_uri(), autocommit=True, row_factory=dict_row) as conn:
        migrate(conn)
        seeded = _seed(conn)
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=root / "pg", user=server.system_user, timeout=30)
    yield root / "pg", seeded
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def data_dir(monkeypatch):
    """ZERG_DATA_DIR in a fresh temporary directory (not pytest's 0700 tree: the servers' own user
    must reach it); any embedded server started in it is stopped afterwards."""
    path = Path(tempfile.mkdtemp(prefix="zerg-upgrade-"))
    monkeypatch.setenv("ZERG_DATA_DIR", str(path))
    config.get_settings.cache_clear()
    yield path
    db.close_pools()
    db.stop_embedded(path, force=True)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def old_dir(pg16_template, data_dir):
    """``ZERG_DATA_DIR/pg`` holding the PostgreSQL 16 template's copy: (data dir, seeded facts)."""
    template, seeded = pg16_template
    subprocess.run(["cp", "-a", str(template), str(data_dir / "pg")], check=True)
    return data_dir, seeded


def _tree(root: Path) -> dict[str, tuple]:
    """Every file and directory under ``root`` with its size, mtime, mode and owner."""
    found = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        found[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns, st.st_mode, st.st_uid)
    return found


def test_zerg_refuses_a_postgresql_16_data_dir_with_how_to_upgrade_and_leaves_it_untouched(old_dir, capsys):
    from tests.support.api import call

    data_dir, _ = old_dir
    before, entries = _tree(data_dir / "pg"), set(os.listdir(data_dir))

    assert main(["db", "status"]) == 2
    err = capsys.readouterr().err
    assert "is PostgreSQL 16 data" in err and "cannot open; nothing was started or changed" in err
    assert "zerg db upgrade" in err and "pg-16.bak-" in err and "DATABASE_URL" in err
    assert "Traceback" not in err

    assert main(["doctor"]) == 1
    assert "reachable: NO (the embedded database in " in capsys.readouterr().out

    code, body, result = call("POST", "/api/jarvis/auth", {"device_secret": "zd_whatever"})
    assert code == 503 and body["error"] == "unavailable" and result["headers"]["Retry-After"]

    assert _tree(data_dir / "pg") == before, "the old data dir must not change"
    assert set(os.listdir(data_dir)) <= entries | {".pg-start.lock"}, "nothing initialised elsewhere"
    assert not (data_dir / "pg" / "postmaster.pid").exists()


def _check_upgraded(data_dir: Path, seeded: dict) -> None:
    (backup,) = data_dir.glob("pg-16.bak-*")
    assert (backup / "PG_VERSION").read_text().strip() == "16"
    assert not (data_dir / db.UPGRADE_DIR).exists()
    with psycopg.connect(db.embedded_database_url(data_dir), row_factory=dict_row) as conn:
        assert int(conn.execute("SHOW server_version_num").fetchone()["server_version_num"]) >= 180000
        assert db.server_info(conn)["pgvector"].startswith("0.8.")
        st = status(conn)
        assert st.current == st.latest
        owner = conn.execute("SELECT id FROM owners WHERE name = %s", (seeded["alice"],)).fetchone()
        assert owner, "the owner moved"
        assert conn.execute("SELECT content FROM thread_messages WHERE owner_id = %s",
                            (owner["id"],)).fetchone()["content"] == seeded["message"]
        row = conn.execute(
            """SELECT f.content, e.embedding::text AS vector FROM memory_files f
               JOIN memory_embeddings e ON e.file_id = f.id WHERE f.owner_id = %s AND f.path = %s""",
            (owner["id"], seeded["path"])).fetchone()
        assert row["content"] == seeded["message"]
        assert [float(x) for x in row["vector"].strip("[]").split(",")] == pytest.approx(VECTOR)
        # 0007 skipped the trigram index on 16 (no pg_trgm there); 0008 adds it on 18.
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'memory_files_content_trgm'").fetchone()


def test_db_upgrade_moves_every_row_to_postgresql_18_and_keeps_the_old_dir(old_dir, capsys):
    data_dir, seeded = old_dir
    assert main(["db", "upgrade"]) == 0
    out = capsys.readouterr().out
    assert "started the old PostgreSQL 16.2" in out and "every count matches" in out
    assert "upgraded the embedded database to PostgreSQL 18." in out and "pg-16.bak-" in out
    _check_upgraded(data_dir, seeded)

    assert main(["db", "upgrade"]) == 0  # once done, a re-run changes nothing
    assert "nothing to upgrade" in capsys.readouterr().out
    assert len(list(data_dir.glob("pg-16.bak-*"))) == 1


class Crash(Exception):
    """The process dying at a chosen point."""


@pytest.mark.parametrize("crash_at", ["stopping the old server", "restoring after the rename"])
def test_db_upgrade_finishes_after_a_crash_midway(old_dir, capsys, crash_at):
    from unittest import mock

    from zerg.local import pg_upgrade

    data_dir, seeded = old_dir
    if crash_at == "stopping the old server":  # dumps written, state not yet: a re-run starts over
        crash = mock.patch.object(db, "stop_embedded", side_effect=Crash)
    else:  # old dir renamed, new server initialised: a re-run restores from the kept dumps
        real_run = pg_upgrade._run

        def run(tool: str, *args: str) -> None:
            if tool == "pg_restore":
                raise Crash
            real_run(tool, *args)

        crash = mock.patch.object(pg_upgrade, "_run", run)
    with crash, pytest.raises(Crash):
        main(["db", "upgrade"])

    if crash_at == "restoring after the rename":
        assert list(data_dir.glob("pg-16.bak-*")) and (data_dir / db.UPGRADE_DIR / "state.json").exists()
        capsys.readouterr()
        assert main(["db", "status"]) == 2, "a half-restored database is never used"
        assert "unfinished; run `zerg db upgrade` again" in capsys.readouterr().err
    else:  # the old server still runs over the untouched old dir
        assert (data_dir / "pg" / "PG_VERSION").read_text().strip() == "16"
        assert (data_dir / "pg" / "postmaster.pid").exists()

    assert main(["db", "upgrade"]) == 0
    assert "every count matches" in capsys.readouterr().out
    _check_upgraded(data_dir, seeded)


def test_db_upgrade_without_pgserver_says_how_to_install_it(data_dir, capsys, monkeypatch):
    (data_dir / "pg").mkdir()
    (data_dir / "pg" / "PG_VERSION").write_text("16\n")
    monkeypatch.setitem(sys.modules, "pgserver", None)  # import pgserver -> ImportError
    assert main(["db", "upgrade"]) == 2
    err = capsys.readouterr().err
    assert "needs pgserver, which is not installed" in err and "-m pip install pgserver==0.1.4" in err
    assert sorted(p.name for p in data_dir.iterdir()) == [".pg-start.lock", "pg"]
    assert [p.name for p in (data_dir / "pg").iterdir()] == ["PG_VERSION"]


def test_db_upgrade_works_only_on_the_embedded_database(data_dir, capsys, monkeypatch):
    assert main(["db", "upgrade"]) == 0
    assert "nothing to upgrade: there is no embedded database" in capsys.readouterr().out
    monkeypatch.setenv("DATABASE_URL", "postgresql://zerg@127.0.0.1:9/zerg")
    config.get_settings.cache_clear()
    assert main(["db", "upgrade"]) == 2
    assert "works only on the embedded database" in capsys.readouterr().err
