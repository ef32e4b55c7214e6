"""Per-call host uids (when we are root): their slots, what a uid may carry over, and running
something as one.

Invariants:
- A call's uid is ``SANDBOX_UID_BASE`` + a slot, drawn at random among ~a million free ones. A
  slot is held by a lock (an OFD lock on its byte of one host-wide lock file, under ``/run``) for
  the whole call, so two calls running at the same time, in any zerg process on the host, never
  share a uid; the lock dies with its holder (a crash frees it). Slots below
  :data:`LEGACY_SLOTS` were handed out by earlier versions (one ``flock``'ed file per slot under
  the sandboxes directory): they are never drawn, and count as held unless their lock file here
  exists and is free. The slots just above them are not used at all (earlier versions' tests ran
  uids of their own there).
- A uid carries nothing from one call to the next:
  - processes: whatever runs as a call's uid starts by killing every other process of that uid
    (``kill -9 -1`` as the uid, first thing, before the launcher or the command exists);
- A call's uid may run at most :data:`PROCESS_LIMIT` processes and threads at once
  (``RLIMIT_NPROC``, set with the command's other limits: :mod:`zerg.sandbox.launch`): a fork
  bomb stops there, whatever the mechanism.
  - System V IPC objects (shared memory, semaphores, message queues: a best-effort command shares
    the host's IPC namespace) are removed when the slot is taken and after each best-effort call;
  - kernel keyrings: root has no reliable way to empty another uid's keyrings (the uid can take
    root's access away from its own keys), so a uid that holds any key (``/proc/key-users``) is
    never handed out again until the host reboots; random draws keep that from running short.
- Launchers get a parent-death signal (``setpriv --pdeathsig``): if the zerg process dies, the
  kernel kills them, and with them the sandbox's namespace. Its "parent" is the *thread* that
  started the launcher; that thread waits in :func:`zerg.sandbox.launch.run` until the launcher
  has exited, so it never ends first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import struct
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

SANDBOX_UID_BASE = 2_100_000_000  # far above any login or container-mapped uid
UID_SLOTS = 1 << 20
LEGACY_SLOTS = 4096  # earlier versions' slots (lowest free first, a flock'ed file each)
FIRST_SLOT = 2 * LEGACY_SLOTS  # slots in between are never ours: earlier tests put uids there
HOST_LOCK = Path("/run/zerg-sandbox-uids.lock")  # root-only directory, one per host (not per TMPDIR)
DRAWS = 64  # random slots tried before giving up (all busy or keyed: practically never)
PROCESS_LIMIT = 512  # RLIMIT_NPROC of a call's uid: processes and threads, launcher included
# Run as the call's uid before anything else: kill every process that uid still has (the kernel
# spares the shell itself), then let the launcher replace the shell.
PRELUDE = 'kill -9 -1 2>/dev/null; exec "$@"'
IPC_KINDS = (("shm", "shmid", "-m"), ("sem", "semid", "-s"), ("msg", "msqid", "-q"))


class SlotsExhausted(RuntimeError):
    pass


def _lock_file(base: Path) -> int:
    """A new open file description of the slots' lock file: OFD locks belong to it, so each call,
    in any thread, holds its own. Host-wide under /run, so zerg processes with different temp
    directories still see each other's slots; ``base`` (the private sandboxes directory) only
    where /run is missing."""
    path = HOST_LOCK if HOST_LOCK.parent.is_dir() and os.access(HOST_LOCK.parent, os.W_OK) else base / "uids.lock"
    return os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _lock(fd: int, slot: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, slot, 1, 0))
    except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: a live call holds it
        return False
    return True


def keyed_uids() -> set[int]:
    """Uids that hold kernel keys (a keyring counts), from ``/proc/key-users``."""
    try:
        with open("/proc/key-users") as fh:
            return {int(line.split(":", 1)[0]) for line in fh if ":" in line}
    except (OSError, ValueError):
        return set()


def take(base: Path) -> tuple[int, int]:
    """(uid, lock fd) of a random free slot whose uid holds no key, its IPC objects removed;
    close the fd to free the slot."""
    keyed = keyed_uids()
    fd = -1
    try:
        for _ in range(DRAWS):
            slot = FIRST_SLOT + secrets.randbelow(UID_SLOTS - FIRST_SLOT)
            uid = SANDBOX_UID_BASE + slot
            if uid in keyed:
                continue
            if fd < 0:
                fd = _lock_file(base)
            if _lock(fd, slot):
                remove_ipc(uid)
                fd, taken = -1, fd
                return uid, taken
    finally:
        if fd >= 0:
            os.close(fd)
    raise SlotsExhausted(f"no free sandbox uid found in {DRAWS} draws among {UID_SLOTS}")


def is_sandbox_uid(uid: int | None) -> bool:
    """A uid that a call of this version or an earlier one may have run as."""
    if uid is None:
        return False
    slot = uid - SANDBOX_UID_BASE
    return 0 <= slot < LEGACY_SLOTS or FIRST_SLOT <= slot < UID_SLOTS


@contextlib.contextmanager
def held_if_free(base: Path, uid: int) -> Iterator[bool]:
    """Hold ``uid``'s slot for the block if no live call holds it (yields True), else yield False."""
    slot = uid - SANDBOX_UID_BASE
    try:
        fd = _lock_file(base) if slot >= LEGACY_SLOTS else os.open(base / "uids" / str(slot), os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # no lock file of ours: an earlier version's slot in another temp dir, not ours to judge
        yield False
        return
    try:
        if slot >= LEGACY_SLOTS:
            yield _lock(fd, slot)
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
            else:
                yield True
    finally:
        os.close(fd)


def slot_free(base: Path, uid: int) -> bool:
    with held_if_free(base, uid) as free:
        return free


def ipc_objects() -> dict[int, list[tuple[str, str]]]:
    """System V IPC objects by owner or creator uid: {uid: [(ipcrm flag, id), ...]}."""
    found: dict[int, list[tuple[str, str]]] = {}
    for kind, id_column, flag in IPC_KINDS:
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                header, *rows = fh.read().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        try:
            at = {name: names.index(name) for name in (id_column, "uid", "cuid")}
        except ValueError:  # a layout we do not know: nothing to go on
            continue
        for row in rows:
            cols = row.split()
            try:
                owners = {int(cols[at["uid"]]), int(cols[at["cuid"]])}
            except (IndexError, ValueError):
                continue
            for owner in owners:
                found.setdefault(owner, []).append((flag, cols[at[id_column]]))
    return found


def remove_ipc(uid: int, objects: list[tuple[str, str]] | None = None) -> int:
    """Remove ``uid``'s System V IPC objects (with util-linux ``ipcrm``); how many there were.
    Reading /proc/sysvipc costs ~0.1 ms; ``ipcrm`` runs only when there is something to remove."""
    objects = ipc_objects().get(uid, []) if objects is None else objects
    if not objects:
        return 0
    ipcrm = shutil.which("ipcrm")
    if ipcrm is None:
        from zerg import observability

        observability.logger().warning("ipcrm not installed: a sandbox uid's IPC objects stay",
                                       extra={"uid": uid, "objects": len(objects)})
        return len(objects)
    import subprocess

    argv = [ipcrm] + [part for flag, ident in objects for part in (flag, ident)]
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return len(objects)


@lru_cache(maxsize=1)
def _setpriv() -> tuple[str | None, bool]:
    """(setpriv's path, whether it knows --pdeathsig (util-linux >= 2.33))."""
    path = shutil.which("setpriv")
    if path is None:
        return None, False
    import subprocess

    # /bin/sh, not a program PATH must find: a PATH without coreutils must not make the launchers
    # lose their parent-death signal.
    probe = subprocess.run([path, "--pdeathsig=KILL", "--", "/bin/sh", "-c", ":"], stdin=subprocess.DEVNULL,
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
