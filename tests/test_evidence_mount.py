"""The evidence mount: this run's evidence, failed calls first, within budget, cheap to read."""

from __future__ import annotations

from tests.support.factories import make_finished_worker, make_job, make_run
from zerg.supervisor.evidence import HEADER, build_evidence_mount


def _mount(pool, store, owner, run_id, budget=32_000):
    with pool.connection() as conn:
        return build_evidence_mount(conn, store, owner, run_id, budget)


def test_big_outputs_stay_within_budget_failed_call_first_with_pointers(runtime_env, pool, owner):
    rt = runtime_env()
    store = rt.store
    run_id, _ = make_run(pool, owner)
    five_mb = "log line of some service output\n" * 160_000
    jobs = []
    for n in range(3):
        outputs = [
            ("ssh_exec", f"HEAD-{n}-A\n" + five_mb + f"TAIL-{n}-A", True),
            ("ssh_exec", f"HEAD-{n}-B\n" + five_mb + f"TAIL-{n}-B-FAILED", False),
            ("container_exec", f"HEAD-{n}-C\n" + five_mb + f"TAIL-{n}-C", True),
        ]
        jobs.append(make_finished_worker(pool, store, owner, run_id, f"check server {n}", f"worker {n} prose", outputs))
    before = store.bytes_read
    text = _mount(pool, store, owner, run_id)
    read = store.bytes_read - before

    assert len(text.encode()) <= 32_000
    assert text.startswith(f"{HEADER}\nRun: {run_id}\nWorkers: 3\n")
    for n, (job_id, wid) in enumerate(jobs):
        section = text.split(f"Worker {job_id} (")[1]
        # The failed call (002) comes before the newer successful one (003) and the older one.
        assert section.index("tool_calls/002_ssh_exec.txt (size") < section.index("tool_calls/003_container_exec.txt (size")
        assert f"TAIL-{n}-B-FAILED" in section and f"HEAD-{n}-B" in section
        assert "[...truncated" in section
        assert f"read_worker_result({job_id})" in section
        assert f'read_worker_file({job_id}, "tool_calls/001_ssh_exec.txt")' in section
        assert f"worker {n} prose" in section
    # Bytes read track the budget (plus three small metadata.json files), not the 45 MB stored.
    assert read <= 32_000 + 3 * 4_000, read


def test_only_this_runs_workers_are_mounted(runtime_env, pool, owner):
    rt = runtime_env()
    this_run, _ = make_run(pool, owner)
    other_run, _ = make_run(pool, owner)
    mine, _ = make_finished_worker(pool, rt.store, owner, this_run, "this run's task", "THIS-RUN")
    theirs, _ = make_finished_worker(pool, rt.store, owner, other_run, "other run's task", "OTHER-RUN")
    text = _mount(pool, rt.store, owner, this_run)
    assert "THIS-RUN" in text and "OTHER-RUN" not in text and f"Worker {theirs} " not in text


def test_another_owner_gets_nothing_from_the_mount(runtime_env, pool, owner, other_owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    make_finished_worker(pool, rt.store, owner, run_id, "secret", "SECRET-EVIDENCE")
    assert _mount(pool, rt.store, other_owner, run_id) is None


def test_unstarted_and_missing_artifacts_degrade_to_placeholders(runtime_env, pool, owner, tmp_path):
    import shutil

    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    queued = make_job(pool, owner, run_id, "not yet started")
    gone, wid = make_finished_worker(pool, rt.store, owner, run_id, "artifacts deleted", "x")
    shutil.rmtree(rt.store.root / "workers" / wid)
    ok, _ = make_finished_worker(pool, rt.store, owner, run_id, "fine", "GOOD-EVIDENCE")
    text = _mount(pool, rt.store, owner, run_id)
    assert f"Worker {queued} (not started) [queued]" in text and "no artifacts yet" in text
    assert f"Worker {gone} (" in text and "GOOD-EVIDENCE" in text


def test_a_run_without_workers_has_no_mount(runtime_env, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    assert _mount(pool, rt.store, owner, run_id) is None


def test_small_outputs_are_mounted_whole(runtime_env, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    make_finished_worker(pool, rt.store, owner, run_id, "df", "", [("ssh_exec", "/dev/sda1 78% /", True)])
    text = _mount(pool, rt.store, owner, run_id)
    assert "/dev/sda1 78% /" in text and "[...truncated" not in text
