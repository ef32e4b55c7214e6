"""The worker_jobs index: concurrent workers, rebuild from metadata.json, and the CLI."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from zerg.artifacts.local import LocalArtifactStore
from zerg.migrate import available
from zerg.runs import jobs


def _run_worker(pool, store, owner_id: int, n: int) -> tuple[int, str]:
    """What a worker does to its index row and artifacts, minus the model."""
    with pool.connection() as conn:
        job_id = jobs.create_job(conn, owner_id, f"task {n}", model="m")
    wid = store.create_worker(f"task {n}", owner_id, job_id=job_id, model="m")
    meta = store.read_metadata(wid)
    with pool.connection() as conn:
        jobs.mark_started(conn, job_id, wid, jobs.parse_iso(meta["started_at"]))
    store.save_tool_output(wid, "container_exec", f"output of {n}")
    store.append_thread(wid, {"role": "assistant", "content": f"done {n}"})
    store.save_result(wid, f"result {n}")
    meta = store.complete_worker(wid, "success")
    with pool.connection() as conn:
        jobs.mark_finished(conn, job_id, meta)
    return job_id, wid


def test_50_concurrent_workers_get_distinct_ids_rows_and_files(pool, store, owner):
    with ThreadPoolExecutor(max_workers=16) as ex:
        done = list(ex.map(lambda n: _run_worker(pool, store, owner, n), range(50)))
    assert len({wid for _, wid in done}) == 50 and len({j for j, _ in done}) == 50
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, worker_id, status FROM worker_jobs WHERE owner_id = %s", (owner,)
        ).fetchall()
    assert len(rows) == 50 and {r["status"] for r in rows} == {"success"}
    for n, (job_id, wid) in enumerate(done):
        assert store.read_file(wid, "result.txt") == f"result {n}"
        assert store.read_file(wid, "tool_calls/001_container_exec.txt") == f"output of {n}"
        assert store.read_metadata(wid)["job_id"] == job_id


def test_reindex_rebuilds_lost_rows_with_the_same_job_ids(pool, owner, tmp_path):
    store = LocalArtifactStore(tmp_path / "a")
    done = [_run_worker(pool, store, owner, n) for n in range(5)]
    with pool.connection() as conn:
        store.update_summary(done[0][1], "five things", {"version": 1, "model": "m", "generated_at": "t", "error": None})
        conn.execute("DELETE FROM worker_jobs WHERE owner_id = %s", (owner,))
        report = jobs.reindex(conn, store)
        assert (report.scanned, report.indexed, report.skipped) == (5, 5, [])
        rows = conn.execute(
            "SELECT id, worker_id, status, summary FROM worker_jobs WHERE owner_id = %s ORDER BY id", (owner,)
        ).fetchall()
        assert [(r["id"], r["worker_id"]) for r in rows] == sorted(done)
        assert rows[0]["summary"] == "five things"
        # New jobs never collide with the restored ids.
        assert jobs.create_job(conn, owner, "after") > max(j for j, _ in done)
        # Running it again changes nothing.
        assert jobs.reindex(conn, store).indexed == 5
        assert conn.execute("SELECT count(*) AS n FROM worker_jobs WHERE owner_id=%s", (owner,)).fetchone()["n"] == 6


def test_reindex_reports_corrupt_metadata_and_leaves_it_alone(pool, owner, tmp_path):
    store = LocalArtifactStore(tmp_path / "a")
    _, good = _run_worker(pool, store, owner, 1)
    _, bad = _run_worker(pool, store, owner, 2)
    path = tmp_path / "a" / "workers" / bad / "metadata.json"
    path.write_text("{corrupt")
    with pool.connection() as conn:
        report = jobs.reindex(conn, store)
    assert report.indexed == 1
    assert [wid for wid, _ in report.skipped] == [bad]
    assert path.read_text() == "{corrupt"


def test_reindex_skips_a_worker_whose_owner_is_gone(pool, tmp_path):
    store = LocalArtifactStore(tmp_path / "a")
    wid = store.create_worker("orphan", owner_id=987654321)
    with pool.connection() as conn:
        report = jobs.reindex(conn, store)
    assert report.skipped == [(wid, "owner 987654321 does not exist")]


def _zerg(*args: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items()} | env_extra
    return subprocess.run(
        [sys.executable, "-m", "zerg.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_migrate_status_and_reindex(make_database, tmp_path, owner, database_url, pool):
    fresh = make_database()
    out = _zerg("db", "migrate", env_extra={"DATABASE_URL": fresh})
    assert out.returncode == 0, out.stderr
    assert "applied 0001_initial" in out.stdout
    again = _zerg("db", "migrate", env_extra={"DATABASE_URL": fresh})
    assert "up to date" in again.stdout
    st = _zerg("db", "status", env_extra={"DATABASE_URL": fresh})
    latest = available()[-1].version
    assert st.returncode == 0 and f"schema version: {latest} of {latest}" in st.stdout and "pgvector: " in st.stdout

    store = LocalArtifactStore(tmp_path / "art")
    job_id, wid = _run_worker(pool, store, owner, 7)
    with pool.connection() as conn:
        conn.execute("DELETE FROM worker_jobs WHERE id = %s", (job_id,))
    out = _zerg("workers", "reindex", env_extra={"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "art")})
    assert out.returncode == 0, out.stderr
    assert "indexed 1" in out.stdout
    with pool.connection() as conn:
        assert conn.execute("SELECT worker_id FROM worker_jobs WHERE id=%s", (job_id,)).fetchone()["worker_id"] == wid


def test_cli_bad_setting_is_one_clear_line(tmp_path):
    out = _zerg("db", "status", env_extra={"ZERG_DB_POOL_MAX": "lots"})
    assert out.returncode == 2
    assert out.stderr.strip() == "zerg: error: invalid ZERG_DB_POOL_MAX='lots': Input should be a valid integer, unable to parse string as an integer"
    assert "Traceback" not in out.stderr


def test_db_stop_stops_the_embedded_server_and_keeps_its_data(tmp_path):
    data = tmp_path / "zerg-data"
    env = {"ZERG_DATA_DIR": str(data)}
    import os

    env_all = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("ZERG_")} | env
    up = subprocess.run([sys.executable, "-m", "zerg.cli", "db", "migrate"], capture_output=True, text=True, env=env_all, timeout=120)
    assert up.returncode == 0, up.stderr
    assert (data / "pg" / "postmaster.pid").exists()
    down = subprocess.run([sys.executable, "-m", "zerg.cli", "db", "stop"], capture_output=True, text=True, env=env_all, timeout=60)
    assert "stopped the embedded PostgreSQL" in down.stdout
    assert not (data / "pg" / "postmaster.pid").exists() and (data / "pg" / "PG_VERSION").exists()
    again = subprocess.run([sys.executable, "-m", "zerg.cli", "db", "status"], capture_output=True, text=True, env=env_all, timeout=120)
    assert again.returncode == 0 and "schema version" in again.stdout  # restarts on the kept data
    subprocess.run([sys.executable, "-m", "zerg.cli", "db", "stop"], capture_output=True, env=env_all, timeout=60)


def test_reindex_never_hands_another_owners_job_row_to_a_worker(pool, owner, other_owner, tmp_path):
    store = LocalArtifactStore(tmp_path / "a")
    job_id, wid = _run_worker(pool, store, owner, 1)
    with pool.connection() as conn:  # a restore reused the id for someone else's job
        conn.execute("DELETE FROM worker_jobs WHERE id = %s", (job_id,))
        conn.execute("INSERT INTO worker_jobs (id, owner_id, task, worker_id) VALUES (%s, %s, 'theirs', 'x-their-worker')",
                     (job_id, other_owner))
        report = jobs.reindex(conn, store)
        row = conn.execute("SELECT owner_id, task, worker_id FROM worker_jobs WHERE id = %s", (job_id,)).fetchone()
    assert (row["owner_id"], row["task"], row["worker_id"]) == (other_owner, "theirs", "x-their-worker")
    assert report.skipped == [(wid, f"job {job_id} in the index belongs to another worker or owner")]
