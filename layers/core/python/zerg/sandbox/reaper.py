"""What a sandbox leaves behind, and its removal: call directories, files, a crash's leftovers.

Invariants:
- Every call gets its own directory ``<tmp>/zerg-sandboxes-<euid>/<pid>-<token>/`` (``home``,
  ``tmp``, ``root``: the sandbox's; ``capture``: its output, never mounted into it). The name
  carries the creating process's pid: a directory whose process is dead is a crash's leftover,
  removed by :func:`reap_leftovers` at the next start. Directories of live processes are never
  touched.
- When we are root, each call runs as its own unprivileged host uid (``SANDBOX_UID_BASE`` + a
  slot held for the whole call: see :mod:`zerg.sandbox.uids`), so two calls running at the same
  time, in any processes on the host, never share a uid.
- At the next start (:func:`reap_leftovers`) a crash's processes are killed
  (:func:`zerg.sandbox.processes.kill_orphans`) before its directories are removed.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from zerg import pids
from zerg.sandbox import processes, uids
from zerg.sandbox.processes import ancestors
from zerg.sandbox.uids import SANDBOX_UID_BASE, UID_SLOTS

# The uid side lives in uids.py, processes in processes.py; these names stay importable from here.
__all__ = ["SANDBOX_UID_BASE", "UID_SLOTS", "ancestors"]

MARKER_ENV = processes.MARKER_ENV


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
        processes.kill_orphans(base)
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
        if not (pid.isdigit() and token) or pids.alive(int(pid)):
            continue
        remove_tree(Path(entry.path))
        removed.append(Path(entry.path))
    return removed


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
