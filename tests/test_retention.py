"""Artifact retention (``ZERG_ARTIFACT_RETENTION_DAYS``): old workers lose their artifacts and index
rows, unless the thread cites them or their run is unfinished; ``zerg workers gc`` and the ingress
function's housekeeping event run the same sweep (local directory and moto S3)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.aged_workers import age, gone, indexed, kept, worker
from tests.support.factories import make_job, make_run, unique_name
from zerg.owners import create_owner
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.workers.retention import pinned_workers, run_retention, sweep


def test_old_unpinned_workers_lose_artifacts_and_index_rows_while_pinned_recent_and_running_ones_stay(
        pool, store, owner):
    old = worker(pool, store, owner, "old", days_old=40)
    cited = worker(pool, store, owner, "cited", days_old=40, run="success")
    recent = worker(pool, store, owner, "recent", days_old=5)
    running = worker(pool, store, owner, "running", days_old=40, run="running")
    report = sweep(pool, store, days=30, owner_id=owner)
    assert [w.job_id for w in report.expired] == [old["job_id"]]
    assert report.expired[0].files == 3  # metadata.json, result.txt, one tool output
    assert gone(pool, store, old)
    assert kept(pool, store, cited) and kept(pool, store, recent) and kept(pool, store, running)
    assert (report.kept_pinned, report.kept_unfinished_run, report.failed, report.complete) == (1, 1, [], True)
    assert sweep(pool, store, days=30, owner_id=owner).expired == []  # nothing left to do: idempotent


def test_thread_provenance_pins_the_job_ids_an_answer_cites(pool, store, owner, other_owner):
    cited = worker(pool, store, owner, "cited", days_old=1, run="success")
    with pool.connection() as conn:
        assert cited["job_id"] in pinned_workers(conn, owner).job_ids
        assert pinned_workers(conn, other_owner).job_ids == frozenset()  # one owner's thread pins nothing of another


def test_dry_run_lists_what_would_go_and_deletes_nothing(pool, store, owner):
    old = worker(pool, store, owner, "old", days_old=40)
    worker(pool, store, owner, "cited", days_old=40, run="success")
    report = sweep(pool, store, days=30, owner_id=owner, dry_run=True)
    assert [(w.job_id, w.worker_id) for w in report.expired] == [(old["job_id"], old["worker_id"])]
    assert report.expired[0].bytes > 0 and report.kept_pinned == 1
    lines = report.lines()
    assert lines[0].startswith(f"would delete job {old['job_id']} {old['worker_id']} of owner {owner}: success")
    assert "would delete 1 workers" in lines[-1] and "kept 1 pinned" in lines[-1]
    assert kept(pool, store, old)


def test_an_owner_scoped_sweep_leaves_every_other_owner_alone(pool, store, owner, other_owner):
    mine = worker(pool, store, owner, "mine", days_old=40)
    theirs = worker(pool, store, other_owner, "theirs", days_old=40)
    report = sweep(pool, store, days=30, owner_id=other_owner)
    assert [w.owner_id for w in report.expired] == [other_owner]
    assert gone(pool, store, theirs) and kept(pool, store, mine)


def test_a_job_that_never_started_loses_its_row(pool, store, owner):
    run_id, _ = make_run(pool, owner, "cancelled early")
    job_id = make_job(pool, owner, run_id, "never ran")
    with pool.connection() as conn:
        runs.cancel_run(conn, owner, run_id)
    age(pool, job_id, 40)
    report = sweep(pool, store, days=30, owner_id=owner)
    assert [(w.job_id, w.worker_id, w.status) for w in report.expired] == [(job_id, None, "cancelled")]
    assert not indexed(pool, job_id)


def test_a_sweep_interrupted_anywhere_is_finished_by_the_next(pool, store, owner, monkeypatch):
    first, second = (worker(pool, store, owner, tag, days_old=40) for tag in ("first", "second"))
    real_delete, real_row = type(store).delete_worker, jobs.delete_expired_job

    def disk_trouble(self, worker_id):
        if worker_id == first["worker_id"]:
            raise OSError("input/output error")
        return real_delete(self, worker_id)

    def crash_before_the_row(conn, owner_id, job_id, before):
        raise ConnectionError("database went away")

    monkeypatch.setattr(type(store), "delete_worker", disk_trouble)
    monkeypatch.setattr(jobs, "delete_expired_job", crash_before_the_row)
    report = sweep(pool, store, days=30, owner_id=owner)
    assert [job_id for job_id, _ in report.failed] == [first["job_id"], second["job_id"]]  # the sweep went on
    assert "input/output error" in report.failed[0][1] and "could not delete job" in report.lines()[0]
    assert kept(pool, store, first)
    assert not store.exists(second["worker_id"]) and indexed(pool, second["job_id"])  # artifacts first, row after
    monkeypatch.setattr(type(store), "delete_worker", real_delete)
    monkeypatch.setattr(jobs, "delete_expired_job", real_row)
    report = sweep(pool, store, days=30, owner_id=owner)
    assert sorted(w.job_id for w in report.expired) == [first["job_id"], second["job_id"]] and not report.failed
    assert gone(pool, store, first) and gone(pool, store, second)


def test_a_sweep_told_to_stop_says_so_and_the_next_one_continues(pool, store, owner):
    first, second = (worker(pool, store, owner, tag, days_old=40) for tag in ("first", "second"))
    asked = []

    def after_one() -> bool:  # e.g. a Lambda whose time runs out after the first worker
        asked.append(True)
        return len(asked) > 1

    report = sweep(pool, store, days=30, owner_id=owner, should_stop=after_one)
    assert [w.job_id for w in report.expired] == [first["job_id"]] and report.complete is False
    assert "stopped early" in report.lines()[-1] and kept(pool, store, second)
    assert [w.job_id for w in sweep(pool, store, days=30, owner_id=owner).expired] == [second["job_id"]]


def test_retention_unset_keeps_everything(runtime_env, pool, owner):
    rt = runtime_env()
    old = worker(pool, rt.store, owner, "old", days_old=4000)
    assert run_retention(rt) == {"retention": "off"}
    assert kept(pool, rt.store, old)


# --- zerg workers gc ----------------------------------------------------------------------------

def test_zerg_workers_gc_dry_run_shows_then_gc_deletes_for_the_owner_named(runtime_env, pool, capsys):
    from zerg.cli.main import main

    rt = runtime_env(ZERG_ARTIFACT_RETENTION_DAYS="30")
    with pool.connection() as conn:
        alice, bob = (create_owner(conn, unique_name(n)) for n in ("alice", "bob"))
    a_old, b_old = (worker(pool, rt.store, o.owner_id, o.name, days_old=40) for o in (alice, bob))
    a_cited = worker(pool, rt.store, alice.owner_id, "cited", days_old=40, run="success")

    assert main(["workers", "gc", "--dry-run", "--owner", alice.name]) == 0
    out = capsys.readouterr().out
    assert f"would delete job {a_old['job_id']} {a_old['worker_id']}" in out and b_old["worker_id"] not in out
    assert "would delete 1 workers" in out and "kept 1 pinned" in out
    assert kept(pool, rt.store, a_old)

    assert main(["workers", "gc", "--owner", alice.name]) == 0
    out = capsys.readouterr().out
    assert f"deleted job {a_old['job_id']}" in out and "deleted 1 workers" in out
    assert gone(pool, rt.store, a_old) and kept(pool, rt.store, a_cited) and kept(pool, rt.store, b_old)

    assert main(["workers", "gc", "--owner", "nobody-here"]) == 2
    assert "no owner named 'nobody-here'" in capsys.readouterr().err


def test_zerg_workers_gc_without_a_retention_says_how_to_give_one(runtime_env, pool, owner, capsys):
    from zerg.cli.main import main

    rt = runtime_env()
    old = worker(pool, rt.store, owner, "old", days_old=40)
    assert main(["workers", "gc"]) == 2
    assert "ZERG_ARTIFACT_RETENTION_DAYS is unset" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["workers", "gc", "--days", "0"])
    assert "not a number of days" in capsys.readouterr().err
    assert kept(pool, rt.store, old)


# --- AWS: the ingress function's housekeeping event ----------------------------------------------

class LambdaContext(SimpleNamespace):
    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_the_housekeeping_event_runs_the_retention_sweep(runtime_env, pool, owner):
    from functions.events.handler import handler

    rt = runtime_env(ZERG_ARTIFACT_RETENTION_DAYS="30")
    old = worker(pool, rt.store, owner, "old", days_old=40)
    cited = worker(pool, rt.store, owner, "cited", days_old=40, run="success")
    out = handler({"trigger": "housekeeping", "task": "retention"}, LambdaContext(remaining_ms=4_000))
    assert out["result"]["complete"] is False and kept(pool, rt.store, old)  # too little time left: nothing started
    out = handler({"trigger": "housekeeping", "task": "retention"}, LambdaContext(remaining_ms=25_000))
    assert out["trigger"] == "housekeeping" and out["task"] == "retention"
    assert out["result"]["retention_days"] == 30 and out["result"]["complete"] is True
    assert out["result"]["workers"] >= 1 and out["result"]["kept_pinned"] >= 1
    assert gone(pool, rt.store, old) and kept(pool, rt.store, cited)


@pytest.mark.parametrize("event, field", [
    ({"trigger": "housekeeping", "task": "vacuum"}, "task"),
    ({"trigger": "housekeeping"}, "task"),
    ({"trigger": "housekeeping", "task": "retention", "days": 1}, "days"),
])
def test_an_invalid_housekeeping_event_is_refused_naming_the_field(runtime_env, event, field):
    from functions.events.handler import handler
    from zerg.handler_input import InvalidEvent

    runtime_env(ZERG_ARTIFACT_RETENTION_DAYS="30")
    with pytest.raises(InvalidEvent, match=rf"invalid housekeeping event: {field}: "):
        handler(event, None)
