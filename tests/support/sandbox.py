"""Helpers for sandbox tests that need real processes in a PID namespace of the test's own.

Anything that kills broadly (``kill -1``, a sweep of every process) runs only inside a namespace
created here: its PID 1 is a shell started by the test, so when that shell exits the kernel
kills whatever is left in it, and nothing outside is ever visible to the code under test. The
namespace has an IPC namespace of its own too, so removing a uid's IPC objects stays in there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.parts import need
from tests.support.waiting import wait_for  # noqa: F401  (the sandbox tests import it from here)
from zerg.sandbox import detect, processes, reaper

_available: dict[str, str | None] = {}


def require(mechanism: str) -> str:
    """``mechanism`` when it works here; else a visible skip (a failure under CI=true)."""
    if mechanism not in _available:
        binary = shutil.which(mechanism)
        _available[mechanism] = detect._probe(mechanism, binary) if binary else f"{mechanism} is not installed"
    problem = _available[mechanism]
    need(problem and f"the {mechanism} sandbox is unavailable here: {problem}", f"the {mechanism} sandbox tests")
    return mechanism


def require_root(why: str) -> None:
    need(None if os.geteuid() == 0 else f"needs root: {why}", "this test (CI runs as root)")


def outside_uid(n: int = 7) -> int:
    """A host uid no sandbox slot uses (root tests run their fake environments as it)."""
    return reaper.SANDBOX_UID_BASE + reaper.UID_SLOTS + n if os.geteuid() == 0 else os.geteuid()


def private_tmp() -> Path:
    """A fresh temp directory that per-call uids may traverse (removed by the caller). It is the
    test's own: a namespace of :func:`run_in_pid_namespace` runs as the test's host uid, whatever
    uid it shows inside."""
    path = Path(tempfile.mkdtemp(prefix="zerg-ns-test-"))
    path.chmod(0o711)
    return path


def run_in_pid_namespace(script: str, args: list[str], *, uid: int, tmp: Path, env: dict[str, str] | None = None,
                         before: str = "", after: str = "true", userns: bool = True,
                         timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -c script args`` as ``uid`` in a new PID namespace whose PID 1 is a shell
    (Lambda's init stands in for it). The shell first runs ``before`` (processes that are not the
    runtime's), then Python, then ``after`` (a probe of what is left), then exits, taking
    everything left in the namespace with it. ``userns``: a user namespace too (the namespace
    is then made as ``uid``); without it (root only) the namespace is made as root and only
    Python runs as ``uid`` (root itself when ``uid`` is 0), so ``before`` may start processes of
    other uids.

    ``uid`` is what the processes see (``os.geteuid()``), never a host uid switched to: a root test
    maps its own uid to ``uid`` in a user namespace, without capabilities. So Python and the
    checkout need not be readable by other host uids (a venv under a 0700 directory is not)."""
    as_uid = ["unshare", f"--map-user={uid}", f"--map-group={uid}", "--"] if uid != os.geteuid() else []
    pythonpath = os.pathsep.join(p for p in sys.path if p)
    inner = "" if userns else " ".join(as_uid) + " "
    shell = f'{before}\n{inner}"$@"; echo "exit=$?"; {after}'
    flags = (as_uid[1:3] or ["--map-current-user"]) if userns else []
    argv = ["unshare", *flags, "--pid", "--ipc", "--fork", "--kill-child", "--mount-proc", "--",
            "/bin/sh", "-c", shell, "sh", sys.executable, "-c", script, *args]
    full_env = {"PATH": os.environ["PATH"], "PYTHONPATH": pythonpath, "TMPDIR": str(tmp), "HOME": str(tmp),
                **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=timeout)


def host_pids(token: str) -> list[int]:
    """Host processes whose command line holds ``token``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if token.encode() in fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def argv_of(pid: int) -> list[str]:
    """The command line of ``pid`` as a list ([] once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode() for a in fh.read().split(b"\0")[:-1]]
    except OSError:
        return []


def sleepers(duration: str) -> list[int]:
    """Host pids of ``sleep <duration>`` processes (exact argv)."""
    return [pid for pid in host_pids(duration) if argv_of(pid) == ["sleep", duration]]


def running(pid: int) -> bool:
    """The process exists and is not a zombie (a killed child not yet reaped is gone as a command)."""
    return processes._live(pid)


def live(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (not zombies)."""
    return [pid for pid in pids if running(pid)]
