"""Finding and killing a sandbox call's processes (best effort, crashes, Lambda), by uid or
marker, never by name.

Invariants:
- A call's processes are those of its uid (root) or those carrying its marker variable
  (:data:`MARKER_ENV`); a crash's are those of a sandbox uid whose slot nobody holds, or whose
  marker names a dead zerg process.
- Only on Lambda, where the function's process tree is all there is, does
  :func:`kill_all_but_us` kill everything but this process and Lambda's init, in one ``kill(-1)``.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from zerg import pids
from zerg.sandbox import uids
from zerg.sandbox.uids import kill_uid

MARKER_ENV = "ZERG_SANDBOX_CALL"  # best effort: set in the command's environment to find it again


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
    can take it meanwhile), whose IPC objects go too; not root, every process of ours whose
    marker names a dead zerg process (as root, commands never run as us). Returns how many uids
    and processes were found."""
    me, found = os.geteuid(), 0
    stray_uids: set[int] = set()
    orphans: set[int] = set()
    for pid in _pids():
        uid = _real_uid(pid)
        if me == 0 and uids.is_sandbox_uid(uid):
            stray_uids.add(uid)  # type: ignore[arg-type]  (is_sandbox_uid: not None)
        elif me != 0 and uid == me and pid != os.getpid():
            owner = _marker_owner(pid)
            if owner is not None and owner != os.getpid() and not pids.alive(owner):
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
    """Direct children of ``pid`` (the sandbox's init, for a launcher process), whichever of its
    threads started them."""
    try:
        found = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(p) for p in fh.read().split()]
        return found
    except OSError:
        return [p for p in _pids() if _status(p).get("PPid") == str(pid)]


def ancestors(pid: int | None = None) -> set[int]:
    """``pid`` (default: this process) and every process above it."""
    chain, current = set(), pid or os.getpid()
    while current > 0 and current not in chain:
        chain.add(current)
        ppid = _status(current).get("PPid")
        current = int(ppid) if ppid and ppid.isdigit() else 0
    return chain


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
