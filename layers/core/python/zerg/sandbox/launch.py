"""One command in one sandbox: build it with the chosen mechanism, run it, capture it, tear it down.

Invariants:
- One sandbox per call, never reused: its own directory (see :mod:`zerg.sandbox.reaper`) and,
  as root, its own host uid. stdout and stderr are pipes, relayed to an :class:`OutputSink` as
  the bytes arrive (memory holds one read at a time); by default they are collected up to
  ``output_cap`` bytes each. A sink that refuses more bytes (its bound is reached) ends the call as
  a timeout would. The command's files are capped by RLIMIT_FSIZE (``output_cap``), core dumps are off.
- When :func:`run` returns, nothing the command started is alive and its directory is gone. With
  ``bwrap``/``unshare`` the PID namespace guarantees it: its init exiting makes the kernel kill
  every process in it before the launcher sees the exit; on a timeout, a sink refusing more or a
  cancel (the ``cancel`` signal fired) the init is killed first and the launcher then waited for.
  With ``best-effort`` the process group is killed, then every process with the call's uid (as
  root) or its marker variable (otherwise).
- The command's environment is exactly ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and ``TERM`` (plus
  the marker variable in best effort): no secret, no cloud credential. The parent makes itself
  non-dumpable before the first command, so its own /proc entries (environment, memory) are
  closed to a same-uid command.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from zerg.sandbox import invocation, processes, reaper, uids

BWRAP, UNSHARE, BEST_EFFORT = "bwrap", "unshare", "best-effort"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOME_INSIDE = "/home/sandbox"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Limits set by the shell itself for bwrap and best effort (no preexec_fn: unsafe in a threaded
# process): no file the command writes may outgrow the bound; no core dumps.
_WRAPPER = 'ulimit -f {blocks} -c 0 2>/dev/null; exec /bin/sh -c "$1"'
READ_BYTES = 1 << 16  # one read from a pipe: the most output held in memory at once
DRAIN_S = 2.0  # after teardown, how long a pipe may stay open (an escaped best-effort process)
# How a relay ended: the launcher exited, the deadline passed, the cancel fired, the sink refused
# more, or (draining after teardown) both pipes reached end of file.
EXITED, TIMED_OUT, CANCELLED, FULL, EOF = "exited", "timed out", "cancelled", "full", "eof"


class Cancel(Protocol):
    """What :func:`run` needs of a cancel signal (``zerg.loop.tool.CancelSignal``)."""

    def is_set(self) -> bool: ...

    def fileno(self) -> int: ...


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None  # None: killed at the timeout, by a cancel or over the sink's bound
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int
    mechanism: str
    over_cap: bool = False  # the sink refused more output: the call was ended (exit_code None)
    cancelled: bool = False  # the cancel signal fired: the sandbox was killed


class OutputSink(Protocol):
    """Takes the command's output as it arrives; False: no more (the call is ended)."""

    def stdout(self, data: bytes) -> bool: ...

    def stderr(self, data: bytes) -> bool: ...


class _Collect:
    """The default sink: each stream kept in memory up to ``cap`` bytes."""

    def __init__(self, cap: int) -> None:
        self.cap, self.out, self.err = cap, bytearray(), bytearray()

    def stdout(self, data: bytes) -> bool:
        return self._add(self.out, data)

    def stderr(self, data: bytes) -> bool:
        return self._add(self.err, data)

    def _add(self, kept: bytearray, data: bytes) -> bool:
        room = self.cap - len(kept)
        kept += data[:room]
        return len(data) <= room


class _Discard:
    def stdout(self, data: bytes) -> bool:
        return True

    stderr = stdout


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
    """As root (the call has its own uid) the namespaces are made as root, without a user
    namespace, and nsinit becomes the call's uid just before the command: so this Python runs as
    root, wherever it is installed (a 0700 ``/root/.pyenv`` included). Otherwise a user namespace
    maps us to its root, and nsinit holds capabilities of the new namespaces only."""
    argv = [binary, "--pid", "--fork", "--kill-child", "--mount", "--ipc", "--uts"]
    if call.uid is None:
        argv[1:1] = ["--map-current-user", "--keep-caps"]
    if not network:
        argv.append("--net")
    python = os.path.realpath(sys.executable)
    become = "-" if call.uid is None else str(call.uid)
    return argv + ["--", python, "-I", "-S", str(_nsinit_program(call.path.parent)), str(call.root), str(call.home),
                   str(call.tmp), "1" if network else "0", str(output_cap), become, str(uids.PROCESS_LIMIT), command]


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


def _pidfd(proc: subprocess.Popen) -> int | None:
    """A descriptor readable the moment the launcher exits (Linux >= 5.3), else None (polled)."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _relay(proc: subprocess.Popen, sink: OutputSink, deadline: float, *, until_exit: bool,
           cancel: Cancel | None = None) -> str:
    """Feed the pipes to ``sink`` as bytes arrive. Ends with EXITED (the launcher, when
    ``until_exit``; woken by a pidfd at once, no polling sleeps), EOF (both pipes closed, when not
    ``until_exit``), TIMED_OUT (``deadline`` passed), CANCELLED (``cancel`` fired: woken by its
    descriptor) or FULL (the sink refused more)."""
    if cancel is not None and cancel.is_set():
        return CANCELLED
    selector = selectors.DefaultSelector()
    pidfd = _pidfd(proc) if until_exit else None
    try:
        for pipe, take in ((proc.stdout, sink.stdout), (proc.stderr, sink.stderr)):
            selector.register(pipe, selectors.EVENT_READ, take)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ, EXITED)
        if cancel is not None:
            selector.register(cancel.fileno(), selectors.EVENT_READ, CANCELLED)
        polled = until_exit and pidfd is None
        while True:
            if polled and proc.poll() is not None:
                return EXITED
            if not until_exit and not selector.get_map():
                return EOF
            left = deadline - time.monotonic()
            if left <= 0:
                return TIMED_OUT
            ready = [key for key, _ in selector.select(min(left, 0.05) if polled else left)]
            woken = {key.data for key in ready if isinstance(key.data, str)}
            if woken:  # exited wins over a cancel in the same instant: the command ran to its end
                return EXITED if EXITED in woken else CANCELLED
            for key in ready:
                data = os.read(key.fd, READ_BYTES)
                if not data:
                    selector.unregister(key.fileobj)
                elif not key.data(data):
                    return FULL
    finally:
        selector.close()
        if pidfd is not None:
            os.close(pidfd)


def _stop(proc: subprocess.Popen, mechanism: str) -> None:
    """Kill what is left of the call, the namespace's init first: the launcher exits only once the
    kernel has emptied the namespace, so waiting for it means waiting for all of it."""
    if proc.poll() is None and mechanism != BEST_EFFORT:
        for pid in processes.children(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # best effort: the group
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run(command: str, timeout_s: float, *, mechanism: str, binary: str | None = None, network: bool = False,
        output_cap: int, sink: OutputSink | None = None, cancel: Cancel | None = None) -> SandboxResult:
    """Run ``command`` with ``/bin/sh -c`` in a new sandbox of ``mechanism``. With a ``sink`` the
    output goes there as it arrives (the result's stdout and stderr are then empty). It is ended
    early when ``timeout_s`` passes or ``cancel`` fires (then everything it started is gone before
    we return)."""
    harden_parent()
    collected = _Collect(output_cap) if sink is None else None
    sink = sink or collected
    call = reaper.new_call_dir()
    try:
        argv, env, cwd = _command(mechanism, call, network, command, output_cap, binary)
        user = call.uid
        # A launcher dies with us (bwrap: --die-with-parent; unshare: a parent-death signal).
        if mechanism == UNSHARE and user is not None:  # launched as root; nsinit becomes the uid
            uids.kill_uid(user)  # what the prelude would have done: the uid carries nothing over
            argv, as_user = uids.as_user(argv, None, die_with_parent=True)
        else:
            argv, as_user = uids.as_user(argv, user, die_with_parent=mechanism == UNSHARE)
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            bufsize=0, start_new_session=True,  # the launcher's own group: nothing of ours is in it
            **as_user,
        )
        try:
            ended = TIMED_OUT
            try:
                ended = _relay(proc, sink, start + max(0.01, timeout_s), until_exit=True, cancel=cancel)
            finally:
                _stop(proc, mechanism)
            interrupted = ended != EXITED
            if user is not None and (interrupted or mechanism == BEST_EFFORT):
                uids.kill_uid(user)  # nothing else on the host has this uid
                if mechanism == BEST_EFFORT:  # the host's /tmp and IPC namespace are shared
                    reaper.remove_owned_by(user)
                    uids.remove_ipc(user)
            elif mechanism == BEST_EFFORT:
                processes.kill_marked([call.marker])
            duration_ms = int((time.monotonic() - start) * 1000)
            # What the pipes still hold once every writer is gone (bounded: an escaped process may
            # hold one); a cancelled call keeps it too, so its artifact shows how far the command got.
            over_cap = ended == FULL or _relay(proc, sink, time.monotonic() + DRAIN_S, until_exit=False) == FULL
            if over_cap:
                _relay(proc, _Discard(), time.monotonic() + DRAIN_S, until_exit=False)
        finally:
            proc.stdout.close()
            proc.stderr.close()
        out = err = ""
        if collected is not None:
            out, err = collected.out.decode("utf-8", "replace"), collected.err.decode("utf-8", "replace")
        return SandboxResult(None if interrupted else proc.returncode, out, err, ended == TIMED_OUT, duration_ms,
                             mechanism, over_cap=over_cap, cancelled=ended == CANCELLED)
    finally:
        if mechanism == BEST_EFFORT:  # only there can a process escape its call's teardown
            invocation.record(call.marker)
        call.release()
