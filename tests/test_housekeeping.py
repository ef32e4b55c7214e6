"""``zerg serve``'s housekeeping loop: named periodic tasks, each on its own schedule, one failing
task never stopping the others, every run logged; and ``zerg serve`` really runs the retention sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.waiting import wait_for
from zerg.local.housekeeping import DAY_S, Housekeeping, PeriodicTask, default_tasks


def test_the_loop_runs_each_task_again_and_again_and_survives_a_failing_one(log_lines):
    counted = []

    def explode():
        raise RuntimeError("reaper broke")

    with Housekeeping([PeriodicTask("broken", 0.01, explode),
                       PeriodicTask("counter", 0.01, lambda: counted.append(1) or {"count": len(counted)})]) as hk:
        wait_for(lambda: len(counted) >= 3 and hk.stats["broken"].failures >= 3,
                 "three runs and three failures", 30, 0.01)
    assert hk.stats["broken"].runs == hk.stats["broken"].failures  # failed every time, and kept being run
    assert hk.stats["broken"].last_error == "RuntimeError: reaper broke"
    assert hk.stats["counter"].failures == 0 and hk.stats["counter"].last_result == {"count": hk.stats["counter"].runs}
    lines = log_lines()
    failed = [line for line in lines if line["message"] == "housekeeping task failed"]
    assert failed and failed[0]["task"] == "broken" and "reaper broke" in failed[0]["reason"]
    assert "Traceback" in failed[0]["exception"]
    done = [line for line in lines if line["message"] == "housekeeping task done"]
    assert done and {line["task"] for line in done} == {"counter"} and "duration_ms" in done[0]
    assert any(line["message"] == "housekeeping started" for line in lines)


def test_stop_ends_every_loop_and_no_task_runs_after_it():
    runs = []
    hk = Housekeeping([PeriodicTask("tick", 0.01, lambda: runs.append(1))]).start()
    wait_for(lambda: len(runs) >= 2, "two runs", 30, 0.01)
    hk.stop()
    assert not any(t.name.startswith("zerg-housekeeping-") and t.is_alive() for t in threading.enumerate())
    after = len(runs)
    time.sleep(0.05)  # a few intervals: a loop still running would have added a run
    assert len(runs) == after


def test_a_task_runs_first_after_its_first_delay_then_at_its_interval():
    started = threading.Event()
    hk = Housekeeping([PeriodicTask("later", DAY_S, started.set, first_delay_s=DAY_S),
                       PeriodicTask("now", DAY_S, lambda: None)]).start()
    wait_for(lambda: hk.stats["now"].runs == 1, "the first run", 30, 0.01)
    hk.stop()
    assert not started.is_set() and hk.stats["later"].runs == 0 and hk.stats["now"].runs == 1


def test_task_names_are_unique_and_intervals_positive():
    with pytest.raises(ValueError, match="unique"):
        Housekeeping([PeriodicTask("a", 1, lambda: None), PeriodicTask("a", 2, lambda: None)])
    with pytest.raises(ValueError, match="interval"):
        PeriodicTask("zero", 0, lambda: None)


def test_zerg_serve_sweeps_retention_only_when_it_is_configured(runtime_env):
    tasks = {t.name: t for t in default_tasks(runtime_env())}  # the job index vs metadata.json, orphaned runs
    orphans = tasks["orphans"]
    assert (orphans.name, orphans.interval_s, orphans.first_delay_s) == ("orphans", 60.0, 60.0)  # swept at start
    assert "reconcile" in tasks and "retention" not in tasks
    task = {t.name: t for t in default_tasks(runtime_env(ZERG_ARTIFACT_RETENTION_DAYS="30"))}["retention"]
    assert (task.name, task.interval_s, task.first_delay_s) == ("retention", DAY_S, 0.0)


def test_zerg_serve_prunes_memory_file_versions_daily_whatever_the_retention(runtime_env, pool, owner):
    from zerg.memory import filesystem as fs

    rt = runtime_env(ZERG_EMBEDDINGS="off")
    fs.write(rt, owner, "a.md", "one", writer="user")
    fs.write(rt, owner, "a.md", "two", writer="user")
    fs.write(rt, owner, "a.md", "three", writer="user")
    with pool.connection() as conn:
        conn.execute("UPDATE memory_file_versions SET replaced_at = now() - interval '31 days' "
                     "WHERE owner_id = %s AND content = 'one'", (owner,))
    task = {t.name: t for t in default_tasks(rt)}["memory-versions"]
    assert (task.interval_s, task.first_delay_s) == (DAY_S, 0.0)
    out = task.run()
    assert out["complete"] is True and out["memory_versions_pruned"] >= 1
    assert [v.reason for v in fs.versions_of(rt, owner, "a.md")] == ["overwrite"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM memory_file_versions WHERE owner_id = %s",
                            (owner,)).fetchone()["n"] == 1


def test_zerg_serve_deletes_kept_spans_past_their_retention_and_keeps_the_rest(runtime_env, pool, owner):
    from tests.support.factories import make_run
    from zerg.tracing import store as spans

    rt = runtime_env(ZERG_TRACE_RETENTION_DAYS="30")
    run_id, _ = make_run(pool, owner)
    now = datetime.now(timezone.utc)
    rows = [{"owner_id": owner, "run_id": run_id, "trace_id": "a" * 32, "span_id": f"{i:016x}", "parent_span_id": None,
             "name": "invoke_agent worker", "kind": "internal", "started_at": now - timedelta(days=days),
             "duration_ms": 1.0, "status": "unset", "status_message": None, "attributes": {}}
            for i, days in enumerate((45, 31, 29, 0), start=1)]
    with pool.connection() as conn:
        spans.insert_spans(conn, rows)
    task = {t.name: t for t in default_tasks(rt)}["trace-retention"]
    assert (task.interval_s, task.first_delay_s) == (DAY_S, 0.0)
    assert spans.prune(rt, batch=1) == {"spans_deleted": 2}  # batch by batch until none is left
    with pool.connection() as conn:
        left = [r["span_id"] for r in spans.spans_of_run(conn, owner, run_id)]
    assert left == [f"{3:016x}", f"{4:016x}"]
    assert runtime_env().settings.trace_retention_days == 30  # the default


def test_zerg_serve_deletes_an_old_unpinned_worker_at_start_and_keeps_a_cited_one(database_url, pool, owner, tmp_path):
    from tests.support.aged_workers import gone, kept, worker
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    old = worker(pool, store, owner, "old", days_old=40)
    cited = worker(pool, store, owner, "cited", days_old=40, run="success")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))} | {
        "DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"),
        "ZERG_DATA_DIR": str(tmp_path / "data"), "ZERG_ARTIFACT_RETENTION_DAYS": "30"}
    server = subprocess.Popen([sys.executable, "-m", "zerg.cli", "serve", "--port", "0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: gone(pool, store, old) or server.poll() is not None, "the old worker's deletion", 120, 0.01)
        assert server.poll() is None, server.communicate()
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert kept(pool, store, cited)
    done = [json.loads(line) for line in err.splitlines() if '"housekeeping task done"' in line]
    retention = [line for line in done if line["task"] == "retention"]
    assert retention[0]["result"]["kept_pinned"] >= 1
