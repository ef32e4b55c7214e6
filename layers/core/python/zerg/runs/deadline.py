"""The run deadline (``ZERG_RUN_TIMEOUT_S``): when a run must have answered, and when its workers stop.

Invariants:
- A run's deadline is its ``started_at`` (the database's clock) plus ``ZERG_RUN_TIMEOUT_S``. Every
  step computes it from the run row, so no step needs to be told.
- The clock stops while the run waits for the owner's approval of a tool call (issue 27): its
  deadline moves on by the time it waited (:func:`clock_start`), so a wait of up to an hour never
  spends a run's time.
- Workers stop ``reserve_s`` before the deadline (the *answer-by* time): a worker still running
  then is cancelled, one that had not started never starts, and the supervisor gets one model call
  (at most ``reserve_s``) to answer with what exists. The run then ends ``timeout`` with that answer.
- The state machine's ``TimeoutSeconds`` (``statemachines/run.asl.json``) sits above the largest
  deadline the settings allow (:data:`MAX_RUN_TIMEOUT_S`): a backstop for a run whose own steps
  could not end it, closed by the execution-status rule (AWS) or the orphan reaper (local).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from zerg.config import Settings
from zerg.timestamps import utcnow

MAX_RUN_TIMEOUT_S = 3000  # ZERG_RUN_TIMEOUT_S's upper bound; the ASL's TimeoutSeconds is above it
BACKSTOP_GRACE_S = 120.0  # the local reaper closes a run this long past its deadline


def reserve_s(settings: Settings) -> float:
    """How long before the deadline workers stop: one supervisor model call, at most a quarter of the run."""
    return min(settings.llm_timeout_s, settings.run_timeout_s / 4)


def clock_start(run: dict[str, Any], now: datetime | None = None) -> datetime | None:
    """When the run's clock started: ``started_at`` moved on by the seconds it waited for approvals
    (``approval_wait_s``, and the current wait since ``awaiting_since``). None: not started."""
    started = run.get("started_at")
    if started is None:
        return None
    waited = float(run.get("approval_wait_s") or 0.0)
    since = run.get("awaiting_since")
    if since is not None:
        waited += max(0.0, ((now or utcnow()) - since).total_seconds())
    return started + timedelta(seconds=waited)


def deadline(started_at: datetime, settings: Settings) -> datetime:
    return started_at + timedelta(seconds=settings.run_timeout_s)


def answer_by(started_at: datetime, settings: Settings) -> datetime:
    """When unfinished workers are cancelled and the supervisor must answer."""
    return deadline(started_at, settings) - timedelta(seconds=reserve_s(settings))


def seconds_left(when: datetime, now: datetime | None = None) -> float:
    return (when - (now or utcnow())).total_seconds()


def describe(settings: Settings) -> str:
    return f"the run's deadline (ZERG_RUN_TIMEOUT_S={settings.run_timeout_s:g}s)"
