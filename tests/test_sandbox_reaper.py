"""Removing what a sandbox call leaves: its directory whatever the command did to it, and nothing
above it, with real processes racing the removal."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.sandbox import outside_uid, require_root, wait_for
from zerg.sandbox import processes, reaper


@pytest.fixture
def shared_tmp(request) -> Path:
    """A stand-in for the host's /tmp (sticky, world-writable), reachable by any uid."""
    path = Path(tempfile.mkdtemp(prefix="zerg-shared-tmp-"))
    path.chmod(0o1777)
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(path)], check=False))
    return path


def writer(directory: Path, uid: int) -> subprocess.Popen:
    """A process of ``uid`` that keeps creating files in ``directory``, as PID 1 of a user and PID
    namespace of its own, made as ``uid`` (so its parent-death signal survives: a uid change
    after it is set would clear it). :func:`stop` ends it."""
    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid != os.geteuid() else []
    loop = 'i=0; while :; do i=$((i+1)); : > "$1/f$i" 2>/dev/null; done'
    return subprocess.Popen([*as_uid, "unshare", "--user", "--map-current-user", "--pid", "--fork", "--kill-child",
                             "/bin/sh", "-c", loop, "sh", str(directory)], stdin=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    """End the writer: its namespace's PID 1 (the kernel then empties the namespace); the launcher
    reaps it and exits by itself (killing the launcher first would leave a zombie to init)."""
    for pid in processes.children(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_failed_removal_never_changes_the_mode_of_the_directory_above_it(shared_tmp):
    """Another uid keeps writing into the tree while it is removed, so the last rmdir can fail:
    a failure is logged, not raised, and the shared directory above keeps its mode (1777)."""
    uid = outside_uid(11)  # another uid when we are root
    top = shared_tmp / "zerg-sandbox-left"
    (top / "sub").mkdir(parents=True)
    top.chmod(0o777)
    proc = writer(top, uid)
    try:
        wait_for(lambda: len(os.listdir(top)) > 50, "the writer")
        gone = reaper.remove_tree(top)
    finally:
        stop(proc)
    assert stat.S_IMODE(os.stat(shared_tmp).st_mode) == 0o1777
    assert gone is not top.exists()
    wait_for(lambda: reaper.remove_tree(top), "the removal, once the writer is gone")
    assert not top.exists()


def test_a_link_in_the_tree_is_removed_and_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    (outside / "keep").write_text("not the sandbox's")
    top = tmp_path / "call"
    (top / "home" / "locked").mkdir(parents=True)
    (top / "home" / "link").symlink_to(outside)
    (top / "home" / "locked" / "f").write_text("x")
    (top / "home" / "locked").chmod(0)
    (top / "home").chmod(0o500)
    assert reaper.remove_tree(top) is True
    assert not top.exists()
    assert (outside / "keep").read_text() == "not the sandbox's"
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o755


def test_removing_a_symlink_removes_the_link_only(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "f").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert reaper.remove_tree(link) is True
    assert not link.is_symlink() and (target / "f").read_text() == "kept"


SLOT_SCRIPT = """
import fcntl, os, subprocess, sys
from zerg.sandbox import processes, reaper
call = reaper.new_call_dir()
mount = call.home / "mounted"
mount.mkdir()
subprocess.run(["mount", "-t", "tmpfs", "none", str(mount)], check=True)
(mount / "file").write_text("x")
try:
    call.release()
    print("released")
except Exception as exc:
    print("raised", type(exc).__name__)
print("slot free" if reaper.slot_free(call.uid) else "slot held")
print(call.path)
"""


def test_a_call_directory_that_cannot_be_removed_still_frees_its_uid_slot():
    """A mount point inside the call's directory (rmdir: busy): release() logs the failure, does
    not raise, and the call's uid slot is free again."""
    require_root("per-call uid slots and a private mount namespace")
    pythonpath = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", SLOT_SCRIPT],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pythonpath}, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[:2] == ["released", "slot free"], (lines, done.stderr)
    left = Path(lines[2])
    assert "sandbox" in done.stderr or "remove" in done.stderr  # the failure was logged
    assert reaper.remove_tree(left) is True  # outside the mount namespace: an empty directory
