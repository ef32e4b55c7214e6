"""The main job with no model configured: the offline planner through the real state machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zerg.llm.offline import OFFLINE_NOTE, OfflineChatModel, topics_in
from zerg.local.engine import WAIT_NOTICE


def _quiet(stderr: str, own_workers: set[str] | None = None) -> bool:
    """Nothing on stderr but, when the Remember step was still running, the one line saying so. With
    ``own_workers``: the orphan sweep's line about another test's worker in the shared database (its
    artifacts live in that test's directory) is not this run's."""
    def others(line: str) -> bool:
        found = re.search(r"could not close the artifacts of worker (\S+):", line)
        return own_workers is not None and found is not None and found.group(1) not in own_workers

    return {line for line in stderr.strip().splitlines() if not others(line)} <= {WAIT_NOTICE}


def test_playbook_topics_come_from_the_task_words():
    assert topics_in("check disk and memory on this machine") == ["disk", "memory"]
    assert topics_in("any errors in the logs? which ports listen?") == ["ports", "logs"]
    assert topics_in("how is my server") == []


def test_offline_supervisor_spawns_one_worker_per_topic_and_host():
    llm = OfflineChatModel(ssh_hosts=["cube", "slim"])
    tools = [{"type": "function", "function": {"name": "spawn_worker"}}]
    reply = llm.complete([{"role": "user", "content": "disk on cube and slim"}], model="m", tools=tools)
    assert [c.name for c in reply.tool_calls] == ["spawn_worker", "spawn_worker"]
    assert '"Check disk usage on cube"' in reply.tool_calls[0].arguments
    assert '"Check disk usage on slim"' in reply.tool_calls[1].arguments


def test_offline_worker_uses_ssh_for_an_allowlisted_host():
    llm = OfflineChatModel(ssh_hosts=["cube"])
    tools = [{"type": "function", "function": {"name": "container_exec"}}]
    reply = llm.complete([{"role": "user", "content": "Check memory usage on cube"}], model="m", tools=tools)
    assert reply.tool_calls[0].name == "ssh_exec" and '"host": "cube"' in reply.tool_calls[0].arguments


def test_zerg_run_offline_completes_and_leaves_the_artifact_tree(database_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    env |= {"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts")}
    out = subprocess.run(
        [sys.executable, "-m", "zerg.cli", "run", "check disk and memory on this machine"],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert OFFLINE_NOTE in out.stdout
    assert "+ worker #" in out.stdout and "✓ worker #" in out.stdout
    assert "- worker #" in out.stdout  # the synthesis cites each worker
    dirs = [Path(line.strip()) for line in out.stdout.splitlines() if str(tmp_path) in line]
    assert len(dirs) == 2
    for d in dirs:
        names = {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}
        assert {"metadata.json", "result.txt", "thread.jsonl", "tool_calls/001_container_exec.txt"} <= names
    assert "Traceback" not in out.stderr
    assert _quiet(out.stderr, {d.name for d in dirs})  # quiet unless asked: no log lines on the terminal


def test_zerg_run_acts_for_the_owner_named_and_refuses_an_unknown_one(database_url, tmp_path, pool):
    from zerg.owners import create_owner

    with pool.connection() as conn:
        bob = create_owner(conn, f"bob-{tmp_path.name}").owner_id
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    env |= {"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts")}
    out = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "--owner", f"bob-{tmp_path.name}", "check disk"],
                         capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    run_id = int(next(line for line in out.stdout.splitlines() if line.startswith("run ")).split()[1].rstrip(":"))
    with pool.connection() as conn:
        assert conn.execute("SELECT owner_id FROM runs WHERE id = %s", (run_id,)).fetchone()["owner_id"] == bob
    unknown = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "--owner", "nobody-here", "check disk"],
                             capture_output=True, text=True, env=env, timeout=60)
    assert unknown.returncode == 2 and "no owner named 'nobody-here'" in unknown.stderr


def test_zerg_run_offline_notes_what_to_remember_and_writes_the_episode_before_it_exits(database_url, tmp_path, pool):
    from zerg.owners import create_owner

    name = f"carol-{tmp_path.name}"
    with pool.connection() as conn:
        carol = create_owner(conn, name).owner_id
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    env |= {"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"), "ZERG_EMBEDDINGS": "off"}
    out = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "--owner", name,
                          "Remember that the backup server is called cube"],
                         capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Noted: Saved to the owner's memory as notes/" in out.stdout and "+ worker #" not in out.stdout
    assert _quiet(out.stderr, set())  # this run has no workers: a worker line is another test's
    run_id = int(next(line for line in out.stdout.splitlines() if line.startswith("run ")).split()[1].rstrip(":"))
    with pool.connection() as conn:  # the process has exited: its Remember step ran before that
        paths = [r["path"] for r in conn.execute(
            "SELECT path FROM memory_files WHERE owner_id = %s ORDER BY path", (carol,)).fetchall()]
    assert len(paths) == 2 and paths[0].startswith("episodes/") and f"/{run_id}-remember-that-the-backup" in paths[0]
    assert paths[1].endswith("-the-backup-server-is-called-cube.md")


@pytest.mark.parametrize(("args", "message"), [(["run", " "], "give a task"), (["run", "x" * 9000], "the limit is 8192")])
def test_zerg_run_refuses_an_empty_or_huge_task(args, message):
    out = subprocess.run([sys.executable, "-m", "zerg.cli", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_zerg_run_with_a_state_machine_arn_says_why_it_cannot_run_and_starts_nothing(database_url, tmp_path, pool):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    env |= {"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"),
            "ZERG_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:zerg-run"}
    with pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"]
    out = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "check disk"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "unset ZERG_STATE_MACHINE_ARN" in out.stderr and "Traceback" not in out.stderr
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == before
