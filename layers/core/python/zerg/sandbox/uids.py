"""Per-call host uids (when we are root): their slots, and running something as one.

Invariants:
- A call's uid is ``SANDBOX_UID_BASE`` + a slot. A slot is held by a lock for the whole call, so
  two calls running at the same time, in any processes on the host, never share a uid; the lock
  dies with its holder (a crash frees it).
- Whatever runs as a call's uid starts by killing every other process of that uid (``kill -9 -1``
  as the uid, first thing, before the launcher or the command exists): what a crashed call left
  under the uid is gone before a new call can write a file.
- Launchers get a parent-death signal (``setpriv --pdeathsig``): if the zerg process dies, the
  kernel kills them, and with them the sandbox's namespace. Its "parent" is the *thread* that
  started the launcher; that thread waits in :func:`zerg.sandbox.launch.run` until the launcher
  has exited, so it never ends first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

SANDBOX_UID_BASE = 2_100_000_000  # far above any login or container-mapped uid
UID_SLOTS = 4096
# Run as the call's uid before anything else: every process that uid still has dies (the shell
# itself is spared by the kernel), then the launcher replaces the shell.
PRELUDE = 'kill -9 -1 2>/dev/null; exec "$@"'


class SlotsExhausted(RuntimeError):
    pass


def _locks(base: Path) -> Path:
    return base / "uids"


def take(base: Path) -> tuple[int, int]:
    """(uid, lock fd) of the lowest slot no live call holds; close the fd to free it. ``base``
    is the private sandboxes directory, whose ``uids/`` holds one lock file per slot."""
    locks = _locks(base)
    locks.mkdir(mode=0o700, exist_ok=True)
    for slot in range(UID_SLOTS):
        fd = os.open(locks / str(slot), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return SANDBOX_UID_BASE + slot, fd
    raise SlotsExhausted(f"all {UID_SLOTS} sandbox uids are in use")


def is_sandbox_uid(uid: int | None) -> bool:
    return uid is not None and SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + UID_SLOTS


@contextlib.contextmanager
def held_if_free(base: Path, uid: int) -> Iterator[bool]:
    """Hold ``uid``'s slot for the block if no live call holds it (yields True), else yield False."""
    path = _locks(base) / str(uid - SANDBOX_UID_BASE)
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def slot_free(base: Path, uid: int) -> bool:
    with held_if_free(base, uid) as free:
        return free


@lru_cache(maxsize=1)
def _setpriv() -> tuple[str | None, bool]:
    """(setpriv's path, whether it knows --pdeathsig (util-linux >= 2.33))."""
    path = shutil.which("setpriv")
    if path is None:
        return None, False
    import subprocess

    probe = subprocess.run([path, "--pdeathsig=KILL", "--", "true"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return path, probe.returncode == 0


def as_user(argv: list[str], uid: int | None, *, die_with_parent: bool = False) -> tuple[list[str], dict[str, object]]:
    """(argv, Popen keywords) that run ``argv``: as ``uid`` (a call's uid) after :data:`PRELUDE`
    has killed what the uid left, with a parent-death signal; or, ``uid`` None, as we are (with a
    parent-death signal if ``die_with_parent``). Through util-linux ``setpriv`` where there is
    one, because Popen(user=...) cannot use vfork, and forking a worker-sized process costs
    ~3 ms a call (measured against setpriv's extra exec)."""
    setpriv, pdeathsig = _setpriv()
    death = ["--pdeathsig=KILL"] if pdeathsig else []
    if uid is None:
        return ([setpriv, *death, "--", *argv] if die_with_parent and death else argv), {}
    prelude = ["/bin/sh", "-c", PRELUDE, "sh", *argv]
    if setpriv:
        return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *death, "--", *prelude], {}
    return prelude, {"user": uid, "group": uid, "extra_groups": []}


def kill_uid(uid: int) -> None:
    """Kill every process whose uid is ``uid`` (a call's own uid: nothing else has it): the
    prelude's ``kill -9 -1`` as that uid signals all of them in one pass, with forks held off,
    so a forking loop cannot outrun it, and no /proc scan is needed."""
    import subprocess

    argv, user = as_user(["true"], uid)
    subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, **user)
