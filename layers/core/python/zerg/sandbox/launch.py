"""One command in one sandbox: build it with the chosen mechanism, run it, capture it, tear it down.

Invariants:
- One sandbox per call, never reused: its own directory (see :mod:`zerg.sandbox.reaper`) and,
  as root, its own host uid. stdout and stderr are pipes, relayed to an :class:`OutputSink` as
  the bytes arrive (memory holds one read at a time); by default they are collected up to
  ``output_cap`` bytes each. A sink that refuses more bytes (its bound is reached) ends the call as
  a timeout would.
- The command's :class:`Limits` are set with ``setrlimit`` by the launcher, never by a shell (dash
  and bash differ; a rejected ``ulimit`` is silent): ``prlimit`` (util-linux) inside bwrap,
  ``nsinit`` at the other levels. Each of its files at most ``file`` bytes (RLIMIT_FSIZE), each
  process at most ``memory`` bytes of address space (RLIMIT_AS) and ``cpu_s`` CPU seconds
  (RLIMIT_CPU: SIGXCPU, SIGKILL a second later), no core dumps; as root, its uid at most
  :data:`~zerg.sandbox.uids.PROCESS_LIMIT` processes (RLIMIT_NPROC). In the namespace levels its
  home and /tmp are each a fresh tmpfs of ``writable`` bytes (host files are never written); at
  best effort they are directories on the host's disk, capped per file only. What a limit stopped
  is in the result (:attr:`SandboxResult.limits`): from the exit status (128 + SIGXFSZ/SIGXCPU)
  or from the error the command printed (``File too large``, ``MemoryError``, ``No space left on
  device``...).
- When :func:`run` returns, nothing the command started is alive and its directory is gone. With
  ``bwrap``/``unshare`` the PID namespace guarantees it: its init exiting makes the kernel kill
  every process in it before the launcher sees the exit; on a timeout, a sink refusing more or a
  cancel (the ``cancel`` signal fired) the init is killed first and the launcher then waited for.
  With ``best-effort`` the launcher (``nsinit best``) is a child subreaper with a parent-death
  signal: nothing the command starts leaves its tree, and it kills the whole tree when the command
  ends, when it is told to stop (SIGTERM) and when zerg dies; then the process group is killed, and
  every process with the call's uid (as root) or its marker variable (otherwise).
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

from zerg.config import Settings
from zerg.sandbox import invocation, processes, reaper, uids

BWRAP, UNSHARE, BEST_EFFORT = "bwrap", "unshare", "best-effort"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOME_INSIDE = "/home/sandbox"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
MIB = 1 << 20
READ_BYTES = 1 << 16  # one read from a pipe: the most output held in memory at once
DRAIN_S = 2.0  # after teardown, how long a pipe may stay open (an escaped best-effort process)
# How a relay ended: the launcher exited, the deadline passed, the cancel fired, the sink refused
# more, or (draining after teardown) both pipes reached end of file.
EXITED, TIMED_OUT, CANCELLED, FULL, EOF = "exited", "timed out", "cancelled", "full", "eof"


@dataclass(frozen=True)
class Limits:
    """What one call's command may use (see the module's invariants); settings: ZERG_SANDBOX_*."""

    file: int = 50 * MIB  # bytes, each file (RLIMIT_FSIZE)
    memory: int = 1024 * MIB  # bytes of address space, each process (RLIMIT_AS)
    cpu_s: int = 120  # CPU seconds, each process (RLIMIT_CPU)
    writable: int = 256 * MIB  # bytes, each of home and /tmp (a tmpfs: namespace levels only)

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(settings.sandbox_file_mib * MIB, settings.sandbox_memory_mib * MIB, settings.sandbox_cpu_s,
                   settings.sandbox_writable_mib * MIB)

    def rlimits(self, processes: int | None) -> str:
        """``FSIZE,AS,CPU,NPROC`` for nsinit (0: not set)."""
        return f"{self.file},{self.memory},{self.cpu_s},{processes or 0}"

    def prlimit(self, binary: str, processes: int | None) -> list[str]:
        """The same, set by util-linux ``prlimit`` (each capped at the hard limit we already have)."""
        import resource

        def capped(which: int, value: int) -> int:
            hard = resource.getrlimit(which)[1]
            return value if hard == resource.RLIM_INFINITY else min(value, hard)

        cpu_hard = capped(resource.RLIMIT_CPU, self.cpu_s + 1)
        argv = [binary, f"--fsize={capped(resource.RLIMIT_FSIZE, self.file)}", "--core=0",
                f"--as={capped(resource.RLIMIT_AS, self.memory)}", f"--cpu={min(self.cpu_s, cpu_hard)}:{cpu_hard}"]
        if processes:
            argv.append(f"--nproc={capped(resource.RLIMIT_NPROC, processes)}")
        return [*argv, "--"]

    def summary(self, isolated: bool) -> str:
        """One line for ``zerg doctor``."""
        space = (f"home and /tmp a {_mib(self.writable)} tmpfs each" if isolated
                 else "home and /tmp on the host's disk, not capped in total (no mount namespace)")
        return (f"each file <= {_mib(self.file)}, each process <= {_mib(self.memory)} of address space and "
                f"{self.cpu_s} CPU s, {space}")

    def describe(self, kind: str) -> str:
        size = {FILE_SIZE: self.file, WRITABLE: self.writable, MEMORY: self.memory}.get(kind)
        amount = f"{self.cpu_s} s" if size is None else _mib(size)
        return f"{kind} {amount}"


def _mib(size: int) -> str:
    return f"{size // MIB} MiB" if size % MIB == 0 else f"{size} bytes"


# What a limit stopped, in the order a result names them; how each shows in the command's errors
# (lower case): the shells' words for SIGXFSZ/SIGXCPU, strerror of EFBIG, ENOMEM and ENOSPC,
# Python's MemoryError, GNU's "memory exhausted", C++'s bad_alloc.
FILE_SIZE, WRITABLE, MEMORY, CPU = "file size", "writable space", "memory", "cpu time"
_SIGNS: dict[str, tuple[bytes, ...]] = {
    FILE_SIZE: (b"file size limit exceeded", b"file too large"),
    WRITABLE: (b"no space left on device",),
    MEMORY: (b"memoryerror", b"cannot allocate memory", b"memory exhausted", b"out of memory", b"bad_alloc"),
    CPU: (b"cpu time limit exceeded",),
}
_SIGN_TAIL = max(len(sign) for signs in _SIGNS.values() for sign in signs) - 1
_BY_STATUS = {128 + signal.SIGXFSZ: FILE_SIZE, 128 + signal.SIGXCPU: CPU}  # every launcher: 128 + the signal


class _LimitWatch:
    """Passes the output on to ``sink``; notes in ``found`` each limit whose sign shows in stderr
    (across reads: the last bytes of one are kept for the next)."""

    def __init__(self, sink: OutputSink, kinds: tuple[str, ...]) -> None:
        self.sink, self.kinds, self.found = sink, kinds, set[str]()
        self._tail = b""

    def stdout(self, data: bytes) -> bool:
        return self.sink.stdout(data)

    def stderr(self, data: bytes) -> bool:
        if len(self.found) < len(self.kinds):
            text = self._tail + data.lower()
            self.found.update(kind for kind in self.kinds if kind not in self.found
                              and any(sign in text for sign in _SIGNS[kind]))
            self._tail = text[-_SIGN_TAIL:]
        return self.sink.stderr(data)


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
    limits: tuple[str, ...] = ()  # what a limit stopped, e.g. ("file size 50 MiB",)

    def limit_line(self) -> str:
        """One line for the model: ``limit: file size 50 MiB exceeded`` ('' when none was hit)."""
        return "limit: " + ", ".join(f"{limit} exceeded" for limit in self.limits) if self.limits else ""


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


def _prlimit() -> str:
    """util-linux ``prlimit``, where bwrap can run it (under a system directory it binds)."""
    import shutil

    found = shutil.which("prlimit", path=SAFE_PATH)
    if found is None or found.split("/")[1] not in SYSTEM_DIRS:
        raise reaper.SandboxError("prlimit (util-linux) is not installed: it sets the command's limits in bwrap")
    return found


def _bwrap_argv(binary: str, call: reaper.CallDir, network: bool, command: str, limits: Limits,
                binds: tuple[str, ...] = ()) -> list[str]:
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
    argv += ["--proc", "/proc", "--dev", "/dev"]
    writable = ("/tmp", HOME_INSIDE)
    for inside in writable:  # the only writable places: each a tmpfs of its own, capped
        argv += ["--size", str(limits.writable), "--perms", "0700", "--tmpfs", inside]
    # Read-only host directories a caller asked for (an MCP server's install), mounted after the tmpfs
    # mounts: an install under /tmp (a clone there) stays visible instead of being hidden by them.
    for path in binds:
        covered = [w for w in writable if w == path or w.startswith(path.rstrip("/") + "/")]
        if covered:
            raise reaper.SandboxError(f"cannot mount {path} read-only in the sandbox: it would cover {covered[0]}")
        argv += ["--ro-bind", path, path]
    argv += ["--chdir", HOME_INSIDE, "--remount-ro", "/", "--"]
    return argv + limits.prlimit(_prlimit(), _processes(call)) + [
        "/bin/sh", "-c", command]


def _processes(call: reaper.CallDir) -> int | None:
    """The call's process limit: only when it has a uid of its own (RLIMIT_NPROC counts per uid)."""
    return uids.PROCESS_LIMIT if call.uid is not None else None


def _nsinit(call: reaper.CallDir) -> list[str]:
    return [os.path.realpath(sys.executable), "-I", "-S", str(_nsinit_program(call.path.parent))]


def _unshare_argv(binary: str, call: reaper.CallDir, network: bool, command: str, limits: Limits) -> list[str]:
    """As root (the call has its own uid) the namespaces are made as root, without a user
    namespace, and nsinit becomes the call's uid just before the command: so this Python runs as
    root, wherever it is installed (a 0700 ``/root/.pyenv`` included). Otherwise a user namespace
    maps us to its root, and nsinit holds capabilities of the new namespaces only."""
    argv = [binary, "--pid", "--fork", "--kill-child", "--mount", "--ipc", "--uts"]
    if call.uid is None:
        argv[1:1] = ["--map-current-user", "--keep-caps"]
    if not network:
        argv.append("--net")
    become = "-" if call.uid is None else str(call.uid)
    return argv + ["--", *_nsinit(call), "ns", str(call.root), "1" if network else "0",
                   limits.rlimits(_processes(call)),
                   str(limits.writable), become, command]


def _best_effort_argv(call: reaper.CallDir, command: str, limits: Limits) -> list[str]:
    """nsinit as the call's subreaper (as root it stays root; the command runs as the call's uid)."""
    become = "-" if call.uid is None else str(call.uid)
    return [*_nsinit(call), "best", str(os.getpid()), limits.rlimits(_processes(call)), become, command]


def _command(mechanism: str, call: reaper.CallDir, network: bool, command: str,
             limits: Limits, binary: str | None, binds: tuple[str, ...] = (),
             path: str = SAFE_PATH) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, working directory) of the launcher. ``binds``: host directories the command
    sees read-only (bwrap; at best effort it sees the host anyway); ``path``: its PATH."""
    if mechanism == BEST_EFFORT:
        env = {"PATH": path, "HOME": str(call.home), "TMPDIR": str(call.tmp), "LANG": "C.UTF-8",
               "TERM": "dumb", reaper.MARKER_ENV: call.marker}
        return _best_effort_argv(call, command, limits), env, str(call.home)
    env = {"PATH": path, "HOME": HOME_INSIDE, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb"}
    if binary is None:
        raise reaper.SandboxError(f"no {mechanism} binary")
    if mechanism == BWRAP:  # the launchers start in the call's home: never a directory of ours
        return _bwrap_argv(binary, call, network, command, limits, binds), env, str(call.home)
    return _unshare_argv(binary, call, network, command, limits), env, str(call.home)


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
    kernel has emptied the namespace, so waiting for it means waiting for all of it. At best effort
    the launcher is told to stop (SIGTERM): it kills its whole tree, then exits."""
    if proc.poll() is None:
        if mechanism == BEST_EFFORT:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        else:
            for pid in processes.children(proc.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # best effort: the group
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run(command: str, timeout_s: float, *, mechanism: str, binary: str | None = None, network: bool = False,
        output_cap: int, sink: OutputSink | None = None, cancel: Cancel | None = None,
        limits: Limits = Limits()) -> SandboxResult:
    """Run ``command`` with ``/bin/sh -c`` in a new sandbox of ``mechanism``, within ``limits``.
    With a ``sink`` the output goes there as it arrives (the result's stdout and stderr are then
    empty). It is ended early when ``timeout_s`` passes or ``cancel`` fires (then everything it
    started is gone before we return)."""
    harden_parent()
    collected = _Collect(output_cap) if sink is None else None
    watch = _LimitWatch(sink or collected, (FILE_SIZE, MEMORY, CPU) if mechanism == BEST_EFFORT else tuple(_SIGNS))
    sink = watch
    call = reaper.new_call_dir()
    try:
        argv, env, cwd = _command(mechanism, call, network, command, limits, binary)
        user = call.uid
        # A launcher dies with us (bwrap: --die-with-parent; unshare: a parent-death signal; nsinit
        # at best effort sets its own).
        if mechanism == BEST_EFFORT:  # nsinit: as root it stays root, the command becomes the uid
            as_user: dict[str, object] = {}
        elif mechanism == UNSHARE and user is not None:  # launched as root; nsinit becomes the uid
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
        found = set(watch.found)
        if not interrupted and proc.returncode in _BY_STATUS:
            found.add(_BY_STATUS[proc.returncode])
        hit = tuple(limits.describe(kind) for kind in _SIGNS if kind in found)
        return SandboxResult(None if interrupted else proc.returncode, out, err, ended == TIMED_OUT, duration_ms,
                             mechanism, over_cap=over_cap, cancelled=ended == CANCELLED, limits=hit)
    finally:
        if mechanism == BEST_EFFORT:  # only there can a process escape its call's teardown
            invocation.record(call.marker)
        call.release()
