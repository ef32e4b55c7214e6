"""A symbolic link planted in a worker directory (a link to a file outside, to a directory, a
dangling one, a linked parent directory, a worker directory linked to another owner's) is listed
as a link without its target's size, and never followed: not by the store, the evidence mount,
the supervisor's worker tools or the HTTP file routes. Real links on a real file system."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from tests.support.api import call
from tests.support.factories import make_finished_worker, make_run
from zerg.artifacts import ArtifactError, ArtifactNotFound, ArtifactPathError, FileInfo
from zerg.artifacts.local import LocalArtifactStore
from zerg.loop.tool import ToolContext, invoke
from zerg.owners import create_owner
from zerg.supervisor.evidence import build_evidence_mount
from zerg.tools.worker_access import TOOLS

SECRET = "OUTSIDE-SECRET-" + "x" * 4306  # 4,321 bytes: its size must not show up either
SUP_TOOLS = {t.name: t for t in TOOLS}


@pytest.fixture
def outside(tmp_path) -> Path:
    """A directory outside the store holding a secret file (what a planted link points at)."""
    where = tmp_path / "outside"
    where.mkdir()
    (where / "secret.txt").write_text(SECRET)
    (where / "001_ssh_exec.txt").write_text(SECRET)
    return where


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def worker_dir(store: LocalArtifactStore, wid: str) -> Path:
    return store.root / "workers" / wid


def planted(rt, pool, owner, outside) -> tuple[int, str]:
    """A finished worker whose directory holds every kind of link next to a real tool output."""
    run_id, _ = make_run(pool, owner)
    job_id, wid = make_finished_worker(pool, rt.store, owner, run_id, "check disk", "real result",
                                       tool_outputs=[("ssh_exec", "REAL-OUTPUT", True)])
    d = worker_dir(rt.store, wid)
    os.symlink(outside / "secret.txt", d / "tool_calls" / "002_leak.txt")  # to a file outside
    os.symlink(outside, d / "logs")  # to a directory
    os.symlink("/nonexistent/zerg-gone", d / "tool_calls" / "003_gone.txt")  # dangling
    return job_id, wid


def test_list_shows_links_as_links_without_a_size_and_never_enters_a_linked_directory(rt, pool, owner, outside):
    _, wid = planted(rt, pool, owner, outside)
    files = {f.path: f for f in rt.store.list_files(wid)}
    assert files["tool_calls/002_leak.txt"] == FileInfo("tool_calls/002_leak.txt", None, "symlink")
    assert files["tool_calls/003_gone.txt"] == FileInfo("tool_calls/003_gone.txt", None, "symlink")
    assert files["logs"] == FileInfo("logs", None, "symlink")
    assert not any(p.startswith("logs/") for p in files)  # the linked directory is not walked
    assert files["tool_calls/001_ssh_exec.txt"] == FileInfo("tool_calls/001_ssh_exec.txt", 11, "file")


@pytest.mark.parametrize(("path", "component"), [
    ("tool_calls/002_leak.txt", "002_leak.txt"),  # a file outside
    ("tool_calls/003_gone.txt", "003_gone.txt"),  # dangling: refused as a link, not "missing"
    ("logs/secret.txt", "logs"),  # through a linked directory
])
def test_every_store_read_refuses_a_link_in_any_component(rt, pool, owner, outside, path, component):
    _, wid = planted(rt, pool, owner, outside)
    store = rt.store
    for read in (lambda: store.read_file(wid, path), lambda: store.head(wid, path, 100),
                 lambda: store.tail(wid, path, 100), lambda: store.size(wid, path)):
        with pytest.raises(ArtifactPathError, match=f"'{component}' is a symbolic link"):
            read()


def test_a_linked_parent_directory_is_refused_not_followed(rt, pool, owner, outside):
    run_id, _ = make_run(pool, owner)
    _, wid = make_finished_worker(pool, rt.store, owner, run_id, "t", "r", tool_outputs=[("ssh_exec", "REAL", True)])
    d = worker_dir(rt.store, wid)
    (d / "tool_calls" / "001_ssh_exec.txt").unlink()
    (d / "tool_calls").rmdir()
    os.symlink(outside, d / "tool_calls")  # outside/001_ssh_exec.txt holds the secret
    with pytest.raises(ArtifactPathError, match="'tool_calls' is a symbolic link"):
        rt.store.read_file(wid, "tool_calls/001_ssh_exec.txt")
    with pytest.raises(ArtifactPathError, match="'tool_calls' is a symbolic link"):
        rt.store.tail(wid, "tool_calls/001_ssh_exec.txt", 10)
    assert [f for f in rt.store.list_files(wid) if f.path.startswith("tool_calls")] == [
        FileInfo("tool_calls", None, "symlink")]
    with pytest.raises(ArtifactPathError):  # nor written through: the next tool output is refused
        rt.store.save_tool_output(wid, "ssh_exec", "new output")
    assert sorted(p.name for p in outside.iterdir()) == ["001_ssh_exec.txt", "secret.txt"]


def test_writes_never_go_through_a_planted_link(rt, pool, owner, tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    wid = rt.store.create_worker("t", owner)
    d = worker_dir(rt.store, wid)
    os.symlink(target, d / "thread.jsonl")
    with pytest.raises(ArtifactPathError, match="'thread.jsonl' is a symbolic link"):
        rt.store.append_thread(wid, {"role": "user", "content": "appended"})
    os.symlink(tmp_path / "created-by-link.txt", d / "result.txt")  # dangling: O_EXCL sees the link
    with pytest.raises(ArtifactError, match="already has a result.txt"):
        rt.store.save_result(wid, "result through a link")
    assert target.read_text() == "untouched" and not (tmp_path / "created-by-link.txt").exists()


def test_a_worker_directory_linked_to_another_owners_worker_reads_nothing(rt, pool, owner, other_owner):
    run_a, _ = make_run(pool, owner)
    _, wid_a = make_finished_worker(pool, rt.store, owner, run_a, "a's task", "A-PRIVATE-RESULT")
    run_b, _ = make_run(pool, other_owner)
    job_b, wid_b = make_finished_worker(pool, rt.store, other_owner, run_b, "b's task", "b result")
    d = worker_dir(rt.store, wid_b)
    for p in sorted(d.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    d.rmdir()
    os.symlink(worker_dir(rt.store, wid_a), d)  # B's worker id now names A's directory
    assert not rt.store.exists(wid_b) and wid_b not in list(rt.store._worker_ids())
    with pytest.raises(ArtifactNotFound):
        rt.store.read_file(wid_b, "result.txt")
    out = _tool(rt, other_owner, "read_worker_result", job_id=job_b)
    assert "A-PRIVATE-RESULT" not in out and out.startswith("ERROR:")
    with pool.connection() as conn:
        assert build_evidence_mount(conn, rt.store, other_owner, run_b).count("A-PRIVATE-RESULT") == 0


def test_a_fifo_is_listed_as_other_and_refused_without_blocking(rt, pool, owner):
    wid = rt.store.create_worker("t", owner)
    os.mkfifo(worker_dir(rt.store, wid) / "pipe.txt")
    assert FileInfo("pipe.txt", None, "other") in rt.store.list_files(wid)
    with pytest.raises(ArtifactPathError, match="'pipe.txt' is not a regular file"):
        rt.store.read_file(wid, "pipe.txt")  # a blocking open would hang here: O_NONBLOCK + fstat
    with pytest.raises(ArtifactPathError, match="not a regular file"):
        rt.store.tail(wid, "pipe.txt", 10)


def _tool(rt, owner_id, name, **args) -> str:
    return invoke(SUP_TOOLS, name, json.dumps(args), ToolContext(settings=rt.settings, owner_id=owner_id, runtime=rt)).text


def test_the_supervisor_tools_and_the_evidence_mount_never_follow_a_link(rt, pool, owner, outside):
    job_id, wid = planted(rt, pool, owner, outside)
    out = _tool(rt, owner, "read_worker_file", job_id=job_id, path="tool_calls/002_leak.txt")
    assert out.startswith("ERROR: refused: ") and "symbolic link" in out
    out = _tool(rt, owner, "read_worker_file", job_id=job_id, path="logs/secret.txt")
    assert out.startswith("ERROR: refused: ") and "'logs' is a symbolic link" in out
    meta = _tool(rt, owner, "get_worker_metadata", job_id=job_id)
    assert "tool_calls/002_leak.txt (symlink: never read)" in meta and "4321" not in meta
    assert "No match" in _tool(rt, owner, "grep_workers", pattern="OUTSIDE-SECRET")
    (worker_dir(rt.store, wid) / "result.txt").unlink()
    os.symlink(outside / "secret.txt", worker_dir(rt.store, wid) / "result.txt")
    out = _tool(rt, owner, "read_worker_result", job_id=job_id)
    assert out.startswith("ERROR: refused: ") and "'result.txt' is a symbolic link" in out
    with pool.connection() as conn:
        run_id = conn.execute("SELECT run_id FROM worker_jobs WHERE id=%s", (job_id,)).fetchone()["run_id"]
        mount = build_evidence_mount(conn, rt.store, owner, run_id)
    assert "REAL-OUTPUT" in mount and "OUTSIDE-SECRET" not in mount and "4321" not in mount
    assert "002_leak.txt" not in mount and "logs" not in mount  # no pointer to a link either


def test_the_api_lists_links_without_size_and_refuses_them_with_400(rt, pool, outside):
    with pool.connection() as conn:
        alice = create_owner(conn, f"alice-{secrets.token_hex(3)}")
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})
    token = body["token"]
    job_id, wid = planted(rt, pool, alice.owner_id, outside)
    status, detail, _ = call("GET", f"/api/jarvis/workers/{job_id}", token=token)
    assert status == 200
    files = {f["path"]: f for f in detail["files"]}
    assert files["tool_calls/002_leak.txt"] == {"path": "tool_calls/002_leak.txt", "size": None, "kind": "symlink"}
    assert files["logs"] == {"path": "logs", "size": None, "kind": "symlink"}
    assert files["result.txt"] == {"path": "result.txt", "size": 11, "kind": "file"}
    for path, component in (("tool_calls/002_leak.txt", "002_leak.txt"), ("tool_calls%2F002_leak.txt", "002_leak.txt"),
                            ("tool_calls/003_gone.txt", "003_gone.txt"), ("logs/secret.txt", "logs")):
        status, err, raw = call("GET", f"/api/jarvis/workers/{job_id}/files/{path}", token=token)
        assert status == 400, (path, status, err)
        assert err["error"] == "bad_path" and f"'{component}' is a symbolic link" in err["message"]
        assert "OUTSIDE-SECRET" not in raw["body"]
    status, text, _ = call("GET", f"/api/jarvis/workers/{job_id}/files/tool_calls/001_ssh_exec.txt", token=token)
    assert status == 200 and text == "REAL-OUTPUT"
