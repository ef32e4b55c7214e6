"""The supervisor's worker tools: summaries only, owner-scoped, bounded, errors as text."""

from __future__ import annotations

import json

import pytest

from tests.support.factories import make_finished_worker, make_job, make_run
from zerg.loop.tool import ToolContext, invoke
from zerg.tools.worker_access import TOOLS

SUP_TOOLS = {t.name: t for t in TOOLS}


def call(rt, owner_id, name, **args) -> str:
    ctx = ToolContext(settings=rt.settings, owner_id=owner_id, runtime=rt)
    return invoke(SUP_TOOLS, name, json.dumps(args), ctx).text


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def test_list_workers_never_returns_result_text_and_fits_the_token_budget(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    results = []
    for n in range(60):
        result = f"RESULT-{n:02d} " + "disk usage details line\n" * 85  # ~2 KB
        results.append(result)
        make_finished_worker(pool, rt.store, owner, run_id, f"Check disk usage on server {n}", result,
                             summary=f"Server {n}: root 78% full, /var 41%, ~2-3 months of headroom left at current rate")
    out = call(rt, owner, "list_workers", limit=60)
    assert "RESULT-" not in out and "disk usage details line" not in out
    assert out.count("\n- #") == 60 and out.endswith("Full output: read_worker_result(job_id).")
    fifty = call(rt, owner, "list_workers", limit=50)
    assert len(fifty) / 4 <= 1500, f"{len(fifty) / 4:.0f} tokens"
    assert "Server 59: root 78% full" in fifty.splitlines()[1]  # newest first


def test_list_workers_shows_the_task_cut_to_150_chars_until_a_summary_exists(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    make_job(pool, owner, run_id, "T" * 400)
    out = call(rt, owner, "list_workers")
    assert "T" * 150 in out and "T" * 151 not in out and "[queued]" in out


def test_list_workers_filters_by_status_and_age(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    make_finished_worker(pool, rt.store, owner, run_id, "ok one", "x", summary="fine")
    make_finished_worker(pool, rt.store, owner, run_id, "bad one", "y", status="failed", summary="broke")
    out = call(rt, owner, "list_workers", status="failed")
    assert "broke" in out and "fine" not in out
    with pool.connection() as conn:
        conn.execute("UPDATE worker_jobs SET created_at = now() - interval '3 days' WHERE owner_id=%s AND summary='fine'", (owner,))
    assert "fine" not in call(rt, owner, "list_workers", since_hours=24)
    assert "must be" in call(rt, owner, "list_workers", status="great") or "Input should be" in call(rt, owner, "list_workers", status="great")


def test_read_worker_result_gives_the_full_text_and_says_when_running(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    big = "line\n" * 5000
    job_id, _ = make_finished_worker(pool, rt.store, owner, run_id, "t", big)
    assert call(rt, owner, "read_worker_result", job_id=job_id) == big
    queued = make_job(pool, owner, run_id, "later")
    assert "still queued" in call(rt, owner, "read_worker_result", job_id=queued)


def test_read_worker_file_reads_artifacts_and_explains_refusals(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    job_id, _ = make_finished_worker(pool, rt.store, owner, run_id, "t", "r", tool_outputs=[("ssh_exec", "Filesystem 78%", True)])
    assert call(rt, owner, "read_worker_file", job_id=job_id, path="tool_calls/001_ssh_exec.txt") == "Filesystem 78%"
    out = call(rt, owner, "read_worker_file", job_id=job_id, path="../../etc/passwd")
    assert out.startswith("ERROR: refused:") and "contains '..'" in out
    out = call(rt, owner, "read_worker_file", job_id=job_id, path="/etc/passwd")
    assert "absolute" in out
    missing = call(rt, owner, "read_worker_file", job_id=job_id, path="nope.txt")
    assert "has no file 'nope.txt'" in missing and "tool_calls/001_ssh_exec.txt" in missing


def test_read_worker_file_gives_head_and_tail_of_a_huge_file(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    job_id, _ = make_finished_worker(pool, rt.store, owner, run_id, "t", "r",
                                     tool_outputs=[("ssh_exec", "START" + "x" * 1_000_000 + "END", True)])
    out = call(rt, owner, "read_worker_file", job_id=job_id, path="tool_calls/001_ssh_exec.txt")
    assert out.startswith("START") and out.endswith("END") and "[...truncated" in out and len(out) < 70_000


def test_grep_workers_is_literal_case_insensitive_and_bounded(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    make_finished_worker(pool, rt.store, owner, run_id, "a", "all good", tool_outputs=[
        ("ssh_exec", "kernel: Out Of Memory: killed process 42 (postgres)\nok\n", True)])
    make_finished_worker(pool, rt.store, owner, run_id, "b", "x" * 1000 + " OOM[.*] " + "y" * 1000)
    out = call(rt, owner, "grep_workers", pattern="out of memory")
    assert "tool_calls/001_ssh_exec.txt:1: kernel: Out Of Memory" in out
    lit = call(rt, owner, "grep_workers", pattern="OOM[.*]")
    assert "result.txt:1:" in lit and len(lit.splitlines()[1]) < 260  # cut to 200 chars + prefix
    make_finished_worker(pool, rt.store, owner, run_id, "c", "needle\n" * 80)
    many = call(rt, owner, "grep_workers", pattern="NEEDLE")
    assert many.count(": needle") == 50 and "stopped at 50 matches" in many
    assert "No match" in call(rt, owner, "grep_workers", pattern="absent-string")


def test_get_worker_metadata_describes_the_worker(rt, pool, owner):
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "check", "r", summary="all fine",
                                       tool_outputs=[("container_exec", "out", True)])
    out = call(rt, owner, "get_worker_metadata", job_id=job_id)
    for expected in (f"job_id: {job_id}", f"worker_id: {wid}", "status: success", "model: gpt-4o-mini",
                     "summary: all fine", "tool_calls/001_container_exec.txt (3 bytes)", "result.txt (1 bytes)"):
        assert expected in out


@pytest.mark.parametrize(
    ("tool", "extra"),
    [("read_worker_result", {}), ("read_worker_file", {"path": "result.txt"}), ("get_worker_metadata", {})],
)
def test_another_owners_job_is_not_found_on_every_tool(rt, pool, owner, other_owner, tool, extra):
    run_id, _ = make_run(pool, owner)
    job_id, _ = make_finished_worker(pool, rt.store, owner, run_id, "private task", "private result", summary="private summary")
    out = call(rt, other_owner, tool, job_id=job_id, **extra)
    assert out == f"ERROR: worker {job_id} not found"
    assert out == call(rt, other_owner, tool, job_id=10**9, **extra).replace(str(10**9), str(job_id))


def test_another_owners_workers_never_appear_in_list_or_grep(rt, pool, owner, other_owner):
    run_id, _ = make_run(pool, owner)
    make_finished_worker(pool, rt.store, owner, run_id, "private task", "private-needle", summary="private summary")
    assert "private" not in call(rt, other_owner, "list_workers")
    assert "No match" in call(rt, other_owner, "grep_workers", pattern="private-needle")
