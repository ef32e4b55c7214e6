"""One command in one sandbox: build it with the chosen mechanism, run it, capture it, tear it down.

Invariants:
- One sandbox per call, never reused: its own directory (see :mod:`zerg.sandbox.reaper`) and,
  as root, its own host uid. Output goes to files outside the sandbox, each read back up to
  ``output_cap`` bytes; the command's files are capped by RLIMIT_FSIZE, core dumps are off.
- When :func:`run` returns, nothing the command started is alive and its directory is gone. With
  ``bwrap``/``unshare`` the PID namespace guarantees it: its init exiting makes the kernel kill
  every process in it before the launcher sees the exit; on a timeout or a cancel (the ``cancel``
  signal fired) the init is killed first and the launcher then waited for. With ``best-effort``
  the process group is killed, then every process with the call's uid (as root) or its marker
  variable (otherwise).
- The command's environment is exactly ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and ``TERM`` (plus
  the marker variable in best effort): no secret, no cloud credential. The parent makes itself
  non-dumpable before the first command, so its own /proc entries (environment, memory) are
  closed to a same-uid command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from zerg.sandbox import invocation, reaper

BWRAP, UNSHARE, BEST_EFFORT = "bwrap", "unshare", "best-effort"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOME_INSIDE = "/home/sandbox"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Limits set by the shell itself for bwrap and best effort (no preexec_fn: unsafe in a threaded
# process): no file, the capture files included, may outgrow the bound; no core dumps.
_WRAPPER = 'ulimit -f {blocks} -c 0 2>/dev/null; exec /bin/sh -c "$1"'


class Cancel(Protocol):
    """What :func:`run` needs of a cancel signal (``zerg.tools.base.CancelSignal``)."""

    def is_set(self) -> bool: ...

    def fileno(self) -> int: ...


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None  # None: killed at the timeout or by a cancel
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int
    mechanism: str
    cancelled: bool = False  # the cancel signal fired: the sandbox was killed


_hardened = False


def harden_parent() -> None:
    """PR_SET_DUMPABLE=0: our /proc entries become root-owned, unreadable to same-uid commands."""
    global _hardened
    if _hardened:
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass
    _hardened = True


@lru_cache(maxsize=1)
def _nsinit_name() -> str:
    import hashlib

    source = Path(__file__).with_name("nsinit.py").read_bytes()
    return f"nsinit-{hashlib.sha256(source + sys.version.encode()).hexdigest()[:16]}.pyc"


def _nsinit_program(base: Path) -> Path:
    """nsinit compiled once into the (private, 0711) sandboxes directory: the sandbox's uid may
    read it wherever zerg is installed, and no call pays for compiling it (~4 ms)."""
    target = base / _nsinit_name()
    if not target.exists():
        import py_compile

        import threading

        tmp = base / f".{target.name}.{os.getpid()}.{threading.get_ident()}"
        py_compile.compile(str(Path(__file__).with_name("nsinit.py")), cfile=str(tmp), doraise=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    return target


def _bwrap_argv(binary: str, call: reaper.CallDir, network: bool, wrapped: list[str]) -> list[str]:
    argv = [binary, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        argv.append("--unshare-net")  # bwrap brings lo up in the new namespace
    argv += ["--disable-userns", "--die-with-parent", "--new-session", "--hostname", "zerg-sandbox"]
    for name in SYSTEM_DIRS:
        host = f"/{name}"
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    argv += ["--proc", "/proc", "--dev", "/dev", "--bind", str(call.tmp), "/tmp",
             "--bind", str(call.home), HOME_INSIDE, "--chdir", HOME_INSIDE, "--remount-ro", "/", "--"]
    return argv + wrapped


def _unshare_argv(binary: str, call: reaper.CallDir, network: bool, command: str, output_cap: int) -> list[str]:
    argv = [binary, "--map-current-user", "--keep-caps", "--pid", "--fork", "--kill-child",
            "--mount", "--ipc", "--uts"]
    if not network:
        argv.append("--net")
    python = os.path.realpath(sys.executable)
    return argv + ["--", python, "-I", "-S", str(_nsinit_program(call.path.parent)), str(call.root), str(call.home),
                   str(call.tmp), "1" if network else "0", str(output_cap), command]


def _command(mechanism: str, call: reaper.CallDir, network: bool, command: str,
             output_cap: int, binary: str | None) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, working directory) of the launcher."""
    wrapped = ["/bin/sh", "-c", _WRAPPER.format(blocks=max(1, output_cap // 512)), "sh", command]
    if mechanism == BEST_EFFORT:
        env = {"PATH": SAFE_PATH, "HOME": str(call.home), "TMPDIR": str(call.tmp), "LANG": "C.UTF-8",
               "TERM": "dumb", reaper.MARKER_ENV: call.marker}
        return wrapped, env, str(call.home)
    env = {"PATH": SAFE_PATH, "HOME": HOME_INSIDE, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb"}
    if binary is None:
        raise reaper.SandboxError(f"no {mechanism} binary")
    if mechanism == BWRAP:  # the launchers start in the call's home: never a directory of ours
        return _bwrap_argv(binary, call, network, wrapped), env, str(call.home)
    return _unshare_argv(binary, call, network, command, output_cap), env, str(call.home)


def _read(path: Path, cap: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


EXITED, TIMED_OUT, CANCELLED = "exited", "timed out", "cancelled"


def _wait(proc: subprocess.Popen, timeout_s: float, cancel: Cancel | None = None) -> str:
    """How the wait for the launcher ended: it exited, ``timeout_s`` passed, or ``cancel`` fired.
    Woken by a pidfd the moment it exits (``Popen.wait(timeout)`` polls with doubling sleeps, which
    added up to ~15 ms to a 20 ms call) and by the cancel signal's descriptor the moment it is set."""
    if cancel is not None and cancel.is_set():
        return CANCELLED
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: the polling wait, in slices for the cancel
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                proc.wait(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
                return EXITED
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    return CANCELLED
                if time.monotonic() >= deadline:
                    return TIMED_OUT
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if cancel is not None:
            poller.register(cancel.fileno(), select.POLLIN)
        ready = {f for f, _ in poller.poll(max(0.0, timeout_s) * 1000)}
        if fd in ready:  # exited: even if the cancel fired in the same instant, it ran to its end
            return EXITED
        return CANCELLED if ready else TIMED_OUT
    finally:
        os.close(fd)


def _stop(proc: subprocess.Popen, mechanism: str) -> None:
    """Kill what is left of the call, the namespace's init first: the launcher exits only once the
    kernel has emptied the namespace, so waiting for it means waiting for all of it."""
    if proc.poll() is None and mechanism != BEST_EFFORT:
        for pid in reaper.children(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # best effort: the group
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run(command: str, timeout_s: float, *, mechanism: str, binary: str | None = None, network: bool = False,
        output_cap: int, cancel: Cancel | None = None) -> SandboxResult:
    """Run ``command`` with ``/bin/sh -c`` in a new sandbox of ``mechanism``; end it early when
    ``timeout_s`` passes or ``cancel`` fires (then everything it started is gone before we return)."""
    harden_parent()
    call = reaper.new_call_dir()
    try:
        argv, env, cwd = _command(mechanism, call, network, command, output_cap, binary)
        out_path, err_path = call.capture / "stdout", call.capture / "stderr"
        user = call.uid
        argv, as_user = reaper.as_user(argv, user)
        start = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,  # the launcher's own group: nothing of ours is in it
                **as_user,
            )
            ended = TIMED_OUT
            try:
                ended = _wait(proc, max(0.01, timeout_s), cancel)
            finally:
                _stop(proc, mechanism)
        early = ended != EXITED
        if user is not None and (early or mechanism == BEST_EFFORT):
            reaper.kill_uid(user)  # nothing else on the host has this uid
            if mechanism == BEST_EFFORT:
                reaper.remove_owned_by(user)
        elif mechanism == BEST_EFFORT:
            reaper.kill_marked([call.marker])
        duration_ms = int((time.monotonic() - start) * 1000)
        return SandboxResult(None if early else proc.returncode, _read(out_path, output_cap),
                             _read(err_path, output_cap), ended == TIMED_OUT, duration_ms, mechanism,
                             cancelled=ended == CANCELLED)
    finally:
        if mechanism == BEST_EFFORT:  # only there can a process escape its call's teardown
            invocation.record(call.marker)
        call.release()
