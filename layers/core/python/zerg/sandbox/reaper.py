"""What a sandbox leaves behind, and its removal: call directories, host uids, processes.

Invariants:
- Every call gets its own directory ``<tmp>/zerg-sandboxes-<euid>/<pid>-<token>/`` (``home``,
  ``tmp``, ``root``: the sandbox's; ``capture``: its output, never mounted into it). The name
  carries the creating process's pid: a directory whose process is dead is a crash's leftover,
  removed by :func:`reap_leftovers` at the next start. Directories of live processes are never
  touched.
- When we are root, each call runs as its own unprivileged host uid (``SANDBOX_UID_BASE`` + a
  slot held for the whole call: see :mod:`zerg.sandbox.uids`), so two calls running at the same
  time, in any processes on the host, never share a uid.
- Killing is targeted: a call's processes are those of its uid (root) or those carrying its
  marker variable, never found by name. Only on Lambda, where the function's process tree is all
  there is, does :func:`kill_all_but_us` kill everything but this process and Lambda's init.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zerg.sandbox import uids
from zerg.sandbox.uids import SANDBOX_UID_BASE, UID_SLOTS, as_user, kill_uid

__all__ = ["SANDBOX_UID_BASE", "UID_SLOTS", "as_user", "kill_uid"]  # the uid side lives in uids.py

MARKER_ENV = "ZERG_SANDBOX_CALL"  # best effort: set in the command's environment to find it again


class SandboxError(RuntimeError):
    """The sandbox could not be prepared (the command did not run)."""


def sandboxes_root() -> Path:
    return Path(tempfile.gettempdir()) / f"zerg-sandboxes-{os.geteuid()}"


def _private_dir(path: Path, mode: int) -> Path:
    """``path`` as a real directory of ours with ``mode`` (refusing a planted symlink or another
    user's directory in a shared /tmp)."""
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise SandboxError(f"{path} is not a directory owned by uid {os.geteuid()}: refusing to use it")
    if stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)
    return path


@dataclass
class CallDir:
    path: Path
    uid: int | None  # the call's own host uid (root only), else None: the command runs as us
    marker: str
    _lock_fd: int | None = None

    @property
    def home(self) -> Path:
        return self.path / "home"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    @property
    def root(self) -> Path:
        return self.path / "root"

    @property
    def capture(self) -> Path:
        return self.path / "capture"

    def release(self) -> None:
        try:
            remove_tree(self.path)
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # frees the uid slot, whatever became of the directory
                self._lock_fd = None


def slot_free(uid: int) -> bool:
    """True when no live call holds ``uid``'s slot."""
    return uids.slot_free(sandboxes_root(), uid)


def new_call_dir() -> CallDir:
    """A fresh call directory (and, as root, the call's own uid, which owns home, tmp and root)."""
    as_root = os.geteuid() == 0
    base = _private_dir(sandboxes_root(), 0o711 if as_root else 0o700)
    try:
        uid, lock_fd = uids.take(base) if as_root else (None, None)
    except uids.SlotsExhausted as exc:
        raise SandboxError(str(exc)) from None
    token = secrets.token_hex(6)
    path = base / f"{os.getpid()}-{token}"
    try:
        path.mkdir(mode=0o711)
        for name in ("home", "tmp", "root"):
            (path / name).mkdir(mode=0o700)
            if uid is not None:
                os.chown(path / name, uid, uid)
        (path / "capture").mkdir(mode=0o700)
    except OSError:
        remove_tree(path)
        if lock_fd is not None:
            os.close(lock_fd)
        raise
    return CallDir(path, uid, f"{os.getpid()}-{token}", lock_fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> bool:
    """Remove ``path`` (a directory tree, or one entry) whatever the command did inside it; True
    when it is gone. Never raises: a failure is logged.

    Nothing is followed and nothing above ``path`` is touched: every entry is reached from its
    directory's descriptor (``O_NOFOLLOW``), a link is unlinked, never entered. As root nothing is
    chmod'ed (root needs no permission bits). Otherwise a directory the command made unreadable or
    read-only, ``path`` included, is given back ``u+rwx`` through a descriptor of that very
    directory, never by a name that could have been swapped for a link."""
    path = Path(path)
    errors: list[str] = []
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError as exc:
        errors.append(f"{path.parent}: {exc.strerror}")
    else:
        try:
            _remove_entry(parent, path.name, str(path), errors)
        finally:
            os.close(parent)
    if errors:
        from zerg import observability

        observability.logger().warning("sandbox directory not fully removed", extra={
            "path": str(path), "errors": errors[:5], "error_count": len(errors)})
    return not errors and not os.path.lexists(path)


def _remove_entry(parent: int, name: str, shown: str, errors: list[str]) -> None:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent)  # a file, a link (never followed), a socket...
            return
        fd = _open_dir(parent, name)
        try:
            for attempt in range(2):  # a second pass for what appeared during the first
                with os.scandir(fd) as entries:
                    names = [entry.name for entry in entries]
                for child in names:
                    _remove_entry(fd, child, f"{shown}/{child}", errors)
                try:
                    os.rmdir(name, dir_fd=parent)
                    return
                except OSError as exc:
                    if exc.errno != errno.ENOTEMPTY or attempt:
                        raise
        finally:
            os.close(fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        errors.append(f"{shown}: {exc.strerror}")


def _open_dir(parent: int, name: str) -> int:
    """A descriptor of directory ``name`` (no link followed), made ``u+rwx`` if we are not root
    and the command took that from us."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        if os.geteuid() == 0:
            raise
        # Unreadable: pin the directory itself (O_PATH needs no permission on it), chmod that
        # inode through /proc, then open it for reading.
        pinned = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            os.chmod(f"/proc/self/fd/{pinned}", 0o700)
            fd = os.open(f"/proc/self/fd/{pinned}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        finally:
            os.close(pinned)
        return fd
    if os.geteuid() != 0:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o700 != 0o700:
            os.fchmod(fd, mode | 0o700)  # entries of a read-only directory cannot be unlinked
    return fd


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


LEGACY_PREFIXES = ("zerg-sandbox-", "zerg-capture-")  # the per-call dirs of zerg before this module


def _reap_legacy(tmp: Path, older_than_s: float = 3600) -> list[Path]:
    """The flat /tmp/zerg-sandbox-* dirs that versions before this module left when they crashed.
    Their names carry no pid, so only those untouched for an hour go (a call lasts ≤ 10 minutes):
    an older zerg still running on the host keeps its live ones."""
    import time

    removed = []
    cutoff = time.time() - older_than_s
    try:
        entries = [e for e in os.scandir(tmp) if e.name.startswith(LEGACY_PREFIXES)]
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if st.st_mtime > cutoff or (os.geteuid() != 0 and st.st_uid != os.geteuid()):
                continue
        except OSError:
            continue
        remove_tree(Path(entry.path))
        removed.append(Path(entry.path))
    return removed


def reap_leftovers(base: Path | None = None) -> list[Path]:
    """Kill what a crash left running, then remove the call directories of dead processes (a
    crash's leftovers); return the directories."""
    base = base or sandboxes_root()
    try:
        kill_orphans(base)
    except OSError as exc:  # never a reason not to start
        from zerg import observability

        observability.logger().warning("could not look for a crash's sandbox processes", extra={"error": str(exc)})
    removed = _reap_legacy(base.parent)
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        pid, _, token = entry.name.partition("-")
        if not (pid.isdigit() and token) or _alive(int(pid)):
            continue
        remove_tree(Path(entry.path))
        removed.append(Path(entry.path))
    return removed


# --- processes --------------------------------------------------------------------------------

def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def _status(pid: int) -> dict[str, str]:
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        pass
    return fields


def _real_uid(pid: int) -> int | None:
    uid = _status(pid).get("Uid")
    return int(uid.split()[0]) if uid else None


def _live(pid: int) -> bool:
    """Not a zombie (a dead process waiting for its parent: nothing left to kill)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _kill_rounds(select: Callable[[int], bool], rounds: int = 20) -> int:
    """SIGKILL every process ``select`` picks until a scan finds none (a forking loop loses the
    race); return how many distinct processes were signalled."""
    killed: set[int] = set()
    me = os.getpid()
    for _ in range(rounds):
        victims = [pid for pid in _pids() if pid != me and _live(pid) and select(pid)]
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
    return len(killed)


def kill_marked(markers: Iterable[str]) -> int:
    """Kill every process of ours carrying one of the calls' marker variables (best effort: a
    command can drop the variable from its children's environment)."""
    needles = {f"{MARKER_ENV}={m}".encode() for m in markers}
    if not needles:
        return 0
    me = os.geteuid()

    def marked(pid: int) -> bool:
        if me != 0 and _real_uid(pid) != me:
            return False
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                return bool(needles.intersection(fh.read().split(b"\0")))
        except OSError:
            return False

    return _kill_rounds(marked)


def _marker_owner(pid: int) -> int | None:
    """The zerg process whose call ``pid`` belongs to, from its marker variable (best effort)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{MARKER_ENV}=".encode()
    for item in env:
        if item.startswith(prefix):
            owner = item[len(prefix):].split(b"-", 1)[0]
            return int(owner) if owner.isdigit() else None
    return None


def kill_orphans(base: Path) -> int:
    """Kill the processes of calls whose zerg process is gone (a crash): as root, every process
    of a sandbox uid whose slot no live call holds (killed while we hold the slot, so no new call
    can take it meanwhile), whose IPC objects go too; anyone, every process of ours whose marker
    names a dead zerg process.
    Returns how many uids and processes were found."""
    me, found = os.geteuid(), 0
    stray_uids: set[int] = set()
    orphans: set[int] = set()
    for pid in _pids():
        uid = _real_uid(pid)
        if me == 0 and uids.is_sandbox_uid(uid):
            stray_uids.add(uid)  # type: ignore[arg-type]  (is_sandbox_uid: not None)
        elif uid == me and pid != os.getpid():
            owner = _marker_owner(pid)
            if owner is not None and owner != os.getpid() and not _alive(owner):
                orphans.add(pid)
    ipc = uids.ipc_objects() if me == 0 else {}
    stray_uids.update(uid for uid in ipc if uids.is_sandbox_uid(uid))
    for uid in stray_uids:
        with uids.held_if_free(base, uid) as free:
            if free:
                kill_uid(uid)
                uids.remove_ipc(uid, ipc.get(uid, []))
                found += 1
    if orphans:
        found += _kill_rounds(lambda pid: pid in orphans)
    return found


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the sandbox's init, for a launcher process)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return [p for p in _pids() if _status(p).get("PPid") == str(pid)]


def kill_all_but_us() -> int:
    """Lambda only (:func:`zerg.hosting.lambda_runtime`: we are the runtime, right under Lambda's
    init): SIGKILL every process we may signal, in one ``kill(-1)``. The kernel signals them all
    while holding off forks, so a process that forks and exits in a loop cannot outrun it (a
    /proc scan followed by one kill per pid can lose that race forever); it spares the caller
    and PID 1. Returns how many processes were there to kill."""
    me = os.getpid()
    found = sum(1 for pid in _pids() if pid not in (1, me) and _live(pid))
    with contextlib.suppress(ProcessLookupError):  # nothing we may signal
        os.kill(-1, signal.SIGKILL)
    return found


def others_alive(passes: int = 5, pause_s: float = 0.05) -> list[int]:
    """Processes other than PID 1 and this one still alive after ``passes`` looks (SIGKILL takes
    effect as each victim leaves the kernel; zombies are dead): [] once one look finds none."""
    import time

    me, left = os.getpid(), []
    for attempt in range(passes):
        if attempt:
            time.sleep(pause_s)
        left = [pid for pid in _pids() if pid not in (1, me) and _live(pid)]
        if not left:
            break
    return left


def remove_owned_by(uid: int, dirs: Iterable[str] = ("/tmp", "/var/tmp", "/dev/shm")) -> None:
    """Best effort as root: delete what a call's uid left in the host's world-writable dirs, so the
    next call that gets the same uid finds nothing."""
    for top in dirs:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                remove_tree(Path(entry.path))
            except OSError:
                continue
