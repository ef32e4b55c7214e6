"""Stopping a running worker when its run is cancelled: the signal its tool calls wait on.

Invariants:
- A worker must stop when its job is cancelled or its run is closed (cancelled, failed, timed out:
  nobody will read what it does next). The database says so; :func:`stop_requested` asks it.
- While a worker runs, :func:`watch` gives it a :class:`~zerg.loop.tool.CancelSignal` that fires
  when the database says stop: a thread of the worker polls every ``POLL_S`` (the only way on
  Lambda, where the cancel arrives in another process), and :func:`stop_run_workers` wakes the
  workers of this process at once. The running command is ended by the tool that waits on it
  (sandbox killed, SSH command killed), before the worker records its job.
- A stopped worker records its job ``cancelled``, then calls ``runs.finish_cancel``: a cancelled
  run's terminal event is written only once none of its jobs is running, so no event follows it
  and no command of the run outlives it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from zerg import observability
from zerg.loop.tool import CancelSignal
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.runtime import Runtime
from zerg.statuses import RUN_FINAL

POLL_S = 0.5  # how often a running worker asks the database whether to stop (two indexed reads)
CANCELLED_BY_USER = "cancelled by the user"

_lock = threading.Lock()
_signals: dict[int, dict[int, tuple[int, CancelSignal]]] = {}  # run id -> job id -> (owner id, signal)


def stop_requested(rt: Runtime, job_id: int, owner_id: int, run_id: int) -> str | None:
    """Why the job's worker must stop (None: it goes on)."""
    with rt.pool.connection() as conn:
        run_status = runs.run_status(conn, owner_id, run_id)
        job_status = jobs.job_status(conn, job_id)
    if run_status == "cancelled":
        return CANCELLED_BY_USER
    if run_status is None:
        return "the run no longer exists"
    if run_status in RUN_FINAL:
        return f"the run ended ({run_status})"
    if job_status == "cancelled":
        return "the job was cancelled"
    return None


@contextmanager
def watch(rt: Runtime, job_id: int, owner_id: int, run_id: int) -> Iterator[CancelSignal]:
    """A cancel signal for the job's worker, kept in step with the database while the block runs."""
    signal = CancelSignal()
    done = threading.Event()

    def poll() -> None:
        while not done.wait(POLL_S) and not signal.is_set():
            try:
                reason = stop_requested(rt, job_id, owner_id, run_id)
            except Exception as exc:  # a database blip: ask again at the next poll
                observability.logger().warning("cancel check failed", extra={"job_id": job_id, "error": str(exc)})
                continue
            if reason:
                signal.set(reason)

    with _lock:
        _signals.setdefault(run_id, {})[job_id] = (owner_id, signal)
    thread = threading.Thread(target=poll, name=f"zerg-cancel-watch-{job_id}", daemon=True)
    thread.start()
    try:
        yield signal
    finally:
        done.set()
        with _lock:
            live = _signals.get(run_id, {})
            live.pop(job_id, None)
            if not live:
                _signals.pop(run_id, None)
        thread.join(timeout=POLL_S + 1.0)  # ends after its current poll; never blocks the worker long
        signal.close()


def stop_run_workers(rt: Runtime, owner_id: int, run_id: int, *, wait_s: float) -> list[int]:
    """Make the run's running workers stop now, and wait up to ``wait_s`` for them to have stopped.

    Call it after committing what stops them (the run closed, or its jobs cancelled): the workers of
    this process re-check the database at once, the others at their next poll. Each ends its
    running command and records its job. Returns the ids of the run's jobs still running (empty:
    every worker has stopped). For any closer of a run: the cancel, a deadline, orphan recovery.
    """
    with _lock:
        local = [(job_id, signal) for job_id, (owner, signal) in _signals.get(run_id, {}).items() if owner == owner_id]
    for job_id, signal in local:
        reason = stop_requested(rt, job_id, owner_id, run_id)
        if reason:
            signal.set(reason)
    deadline = time.monotonic() + wait_s
    while True:
        with rt.pool.connection() as conn:
            running = jobs.running_job_ids(conn, owner_id, run_id)
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.05)
