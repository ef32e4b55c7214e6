"""``zerg serve``'s housekeeping: named periodic tasks run in the background while the server runs.

On AWS each task is an EventBridge rule invoking the ingress function (``{"trigger":
"housekeeping", "task": NAME}``); here one :class:`Housekeeping` runs the list that
:func:`default_tasks` builds. Adding a task is one line there.

Invariants:
- Each task runs in its own daemon thread: first ``first_delay_s`` after :meth:`Housekeeping.start`
  (0: at once, so a machine that restarts daily still sweeps), then every ``interval_s`` after the
  previous run *ended* (a slow run never overlaps the next one).
- A task that raises is logged (with its traceback) and counted, and runs again at its next
  interval; it never stops itself or any other task.
- Every run is logged: the task's name, how long it took, and what it returned (a small dict of
  counts) or why it failed.
- :meth:`Housekeeping.stop` ends every loop; a task in the middle of a run finishes that run first
  (the threads are daemons, so a stuck task never holds the process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from zerg import observability

if TYPE_CHECKING:
    from zerg.runtime import Runtime

DAY_S = 24 * 3600.0
HOUR_S = 3600.0


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    interval_s: float
    run: Callable[[], Any]  # returns something small to log (a dict of counts), or None
    first_delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.first_delay_s < 0:
            raise ValueError(f"housekeeping task {self.name!r}: interval must be > 0 and the first delay >= 0")


@dataclass
class TaskStats:
    runs: int = 0  # finished runs, failed ones included
    failures: int = 0
    last_error: str | None = None
    last_result: Any = None


class Housekeeping:
    """Runs each :class:`PeriodicTask` on its own schedule until :meth:`stop`; usable as a context manager."""

    def __init__(self, tasks: Sequence[PeriodicTask]) -> None:
        names = [t.name for t in tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"housekeeping task names must be unique: {names}")
        self.tasks = tuple(tasks)
        self.stats = {t.name: TaskStats() for t in self.tasks}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> "Housekeeping":
        if self._threads:
            raise RuntimeError("housekeeping already started")
        log = observability.logger()
        for task in self.tasks:
            thread = threading.Thread(target=self._loop, args=(task,), name=f"zerg-housekeeping-{task.name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        log.info("housekeeping started", extra={"tasks": {t.name: t.interval_s for t in self.tasks}})
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ends every loop; waits up to ``timeout`` in all for a run in progress to finish."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        busy = [t.name for t in self._threads if t.is_alive()]
        if busy:
            observability.logger().warning("housekeeping stopped with tasks still finishing a run",
                                           extra={"threads": busy})

    def __enter__(self) -> "Housekeeping":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self, task: PeriodicTask) -> None:
        delay = task.first_delay_s
        while not self._stop.wait(delay):
            self._run_once(task)
            delay = task.interval_s

    def _run_once(self, task: PeriodicTask) -> None:
        log, stats = observability.logger(), self.stats[task.name]
        started = time.monotonic()
        try:
            result = task.run()
        except Exception as exc:  # one task's failure is logged and retried next interval, nothing more
            stats.runs += 1
            stats.failures += 1
            stats.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("housekeeping task failed", exc_info=True, extra={
                "task": task.name, "duration_ms": _ms(started), "reason": stats.last_error,
                "next_in_s": task.interval_s})
            return
        stats.runs += 1
        stats.last_result = result
        log.info("housekeeping task done", extra={"task": task.name, "duration_ms": _ms(started), "result": result})


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def default_tasks(rt: "Runtime") -> list[PeriodicTask]:
    """What ``zerg serve`` runs in the background, from the settings. One line per task."""
    from zerg.memory import filesystem, org
    from zerg.runs import orphans
    from zerg.workers import reconcile, retention

    # zerg serve sweeps orphans once before it serves; this task repeats it.
    tasks = [PeriodicTask("orphans", orphans.SWEEP_EVERY_S, partial(orphans.sweep_counts, rt),
                          first_delay_s=orphans.SWEEP_EVERY_S)]
    if rt.settings.artifact_retention_days is not None:
        tasks.append(PeriodicTask("retention", DAY_S, partial(retention.run_retention, rt)))
    tasks.append(PeriodicTask("reconcile", reconcile.RECONCILE_INTERVAL_S, partial(reconcile.run_reconcile, rt),
                              first_delay_s=reconcile.RECONCILE_INTERVAL_S))  # the index vs metadata.json
    from zerg.tracing import store as spans

    tasks.append(PeriodicTask("trace-retention", DAY_S, partial(spans.prune, rt)))  # kept spans: 30 days
    tasks.append(PeriodicTask("memory-versions", DAY_S, partial(filesystem.prune_versions, rt)))  # 30 days kept
    tasks.append(PeriodicTask("memory-facts", DAY_S, partial(org.prune_forgotten_facts, rt)))  # forgotten: 30 days kept
    if not rt.settings.escalation_state_machine_arn:  # escalations whose (local) execution stopped
        from zerg.alerts import repeats

        tasks.append(PeriodicTask("escalations", repeats.SWEEP_EVERY_S, partial(repeats.resume_orphaned, rt)))
    from zerg.notify import deliver

    tasks.append(PeriodicTask("notifications", deliver.RELEASE_EVERY_S, partial(deliver.release_held, rt)))  # quiet hours over
    if rt.embedder is not None:  # memory files new or edited since their last vector
        from zerg.memory import indexer

        tasks.append(PeriodicTask("embed", indexer.SWEEP_EVERY_S, partial(indexer.run_sweep, rt),
                                  first_delay_s=indexer.SWEEP_EVERY_S))  # not at once: writes kick their own
    from zerg.inbound import local_inbox

    # Replies dropped into the inbox directory, and replies a crash left half done.
    tasks.append(PeriodicTask("inbound", local_inbox.SWEEP_EVERY_S, partial(local_inbox.run_sweep, rt)))
    if not rt.settings.schedule_group:  # owners' schedules: Scheduler fires them on AWS, the ticker here
        from zerg.schedules import service, ticker

        tasks.append(PeriodicTask("schedules", rt.settings.tick_s, partial(ticker.tick, rt)))  # at once: missed fires
        tasks.append(PeriodicTask("schedules-prune", HOUR_S, partial(service.prune_fired_one_offs, rt)))  # one-offs a week after
    return tasks
