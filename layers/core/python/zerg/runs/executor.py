"""Which process executes a run, whether it still lives, and its heartbeat.

A locally executed run records its executor (``runs.executor``) before its execution starts:
``local:{host}:{boot id}:{pid}:{process start}``. The orphan reaper (:mod:`zerg.runs.orphans`)
asks :func:`gone` about it.

Invariants:
- An executor on this host is judged by the kernel, not by time: it is gone when the machine
  rebooted since (another boot id), its pid is dead or a zombie, or the pid now belongs to a
  process that started at another time (pid reuse). A live executor is never judged gone, however
  late its heartbeat (a database outage stops heartbeats, not runs).
- An executor on another host (two machines sharing one database) is judged by its heartbeat
  alone: gone after :data:`STALE_AFTER_S` without one.
- Anything else (an executor this code cannot read, Step Functions' runs, which record none) is
  never judged gone here.
- The heartbeat is best effort: a failed beat is logged and the next one tries again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from zerg import pids

log = logging.getLogger(__name__)

PREFIX = "local"
HEARTBEAT_S = 15.0
STALE_AFTER_S = 120.0  # another host's executor without a heartbeat for this long is gone
UNKNOWN = "-"


@dataclass(frozen=True)
class Executor:
    host: str
    boot_id: str
    pid: int
    started: str  # the process's start time in clock ticks since boot (/proc/PID/stat field 22)

    @property
    def token(self) -> str:
        return f"{PREFIX}:{self.host}:{self.boot_id}:{self.pid}:{self.started}"

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def parse(token: str | None) -> Executor | None:
    """The executor a ``runs.executor`` value names, or None when it is not a local one."""
    if not token or not token.startswith(PREFIX + ":"):
        return None
    try:
        host, boot_id, pid, started = token[len(PREFIX) + 1:].rsplit(":", 3)
        return Executor(host, boot_id, int(pid), started)
    except ValueError:
        return None


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _boot_id() -> str:
    return (_read("/proc/sys/kernel/random/boot_id") or UNKNOWN).strip()


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of ``pid`` from /proc, or None when there is no such process (or no /proc)."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
    return fields[0], fields[19]


def this_process() -> Executor:
    pid = os.getpid()
    stat = _proc_stat(pid)
    return Executor(socket.gethostname(), _boot_id(), pid, stat[1] if stat else UNKNOWN)


def gone(executor: Executor, heartbeat_at: datetime | None, now: datetime) -> bool:
    """True when ``executor`` can no longer be executing anything (see the module's invariants)."""
    if executor.host != socket.gethostname():
        return heartbeat_at is None or (now - heartbeat_at).total_seconds() > STALE_AFTER_S
    if UNKNOWN not in (executor.boot_id, _boot_id()) and executor.boot_id != _boot_id():
        return True  # the machine rebooted since: every process of that boot is gone
    stat = _proc_stat(executor.pid)
    if stat is None:
        return not pids.alive(executor.pid) if _boot_id() == UNKNOWN else True  # no /proc: ask kill(0)
    state, started = stat
    return state in ("Z", "X") or (executor.started != UNKNOWN and started != executor.started)


class Heartbeat:
    """A daemon thread stamping ``heartbeat_at`` on every unfinished run this process executes."""

    def __init__(self, pool: Any, executor: Executor, interval_s: float = HEARTBEAT_S) -> None:
        self.pool, self.executor, self.interval_s = pool, executor, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="zerg-run-heartbeat", daemon=True)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        from zerg.runs import store as runs

        while not self._stop.wait(self.interval_s):
            try:
                with self.pool.connection() as conn:
                    runs.heartbeat(conn, self.executor.token)
            except Exception as exc:  # the database is away: the next beat tries again
                log.warning("run heartbeat failed: %s: %s", type(exc).__name__, exc)
