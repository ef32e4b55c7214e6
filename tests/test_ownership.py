"""Ownership decided in one place: another owner's worker is simply not found."""

from __future__ import annotations

import pytest

from zerg.runs import jobs
from zerg.runs.worker_artifacts import NotFound, NotStarted, open_worker, resolve_worker


def test_owner_b_cannot_resolve_owner_a_worker_by_job_or_worker_id(pool, store, owner, other_owner):
    with pool.connection() as conn:
        job_id = jobs.create_job(conn, owner, "secret task")
        wid = store.create_worker("secret task", owner, job_id=job_id)
        jobs.mark_started(conn, job_id, wid, jobs.parse_iso(store.read_metadata(wid)["started_at"]))

        assert resolve_worker(conn, owner, job_id=job_id).worker_id == wid
        assert resolve_worker(conn, owner, worker_id=wid).job_id == job_id
        with pytest.raises(NotFound) as by_job:
            resolve_worker(conn, other_owner, job_id=job_id)
        with pytest.raises(NotFound) as by_wid:
            resolve_worker(conn, other_owner, worker_id=wid)
        with pytest.raises(NotFound) as missing:
            resolve_worker(conn, other_owner, job_id=10**12)
    # Same answer for "someone else's" and "does not exist": no existence leak.
    assert str(by_job.value) == f"worker {job_id} not found"
    assert str(missing.value) == f"worker {10**12} not found"
    assert str(by_wid.value) == f"worker {wid} not found"  # echoes only what the caller sent


def test_artifact_handle_reads_only_its_own_worker(pool, store, owner):
    with pool.connection() as conn:
        job_id = jobs.create_job(conn, owner, "t")
        wid = store.create_worker("t", owner, job_id=job_id)
        store.save_result(wid, "the answer")
        jobs.mark_started(conn, job_id, wid, jobs.parse_iso(store.read_metadata(wid)["started_at"]))
        handle = open_worker(conn, store, owner, job_id=job_id)
    assert handle.read_file("result.txt") == "the answer"
    assert {f.path for f in handle.list_files()} == {"metadata.json", "result.txt"}


def test_a_queued_job_has_no_artifacts_yet(pool, store, owner):
    with pool.connection() as conn:
        job_id = jobs.create_job(conn, owner, "t")
        handle = open_worker(conn, store, owner, job_id=job_id)
    with pytest.raises(NotStarted, match="has not started"):
        handle.read_file("result.txt")


def test_no_owner_no_data(pool):
    with pool.connection() as conn, pytest.raises(NotFound):
        resolve_worker(conn, 0, job_id=1)
