"""Idle schedules pause themselves (issue 27): a check whose results nobody opened or acknowledged
for ``idle_pause_days`` days (default 14, per schedule; null: never) stops firing, with one notice
saying why and how to resume.

Invariants:
- "Attended to" is known from the task inbox (:mod:`zerg.alerts.inbox`): an item acknowledged
  (API, CLI, dashboard) or opened (its run's details fetched, GET /api/jarvis/runs/{id}). An owner's
  change to the schedule (``updated_at``: a resume, an edit) counts as attention too.
- A schedule is idle when its last attention is at least N days old and at least one of its
  results came after it unseen (a schedule that produced nothing is not idle: nothing was ignored).
- Decided in a fire's phase 1 (:mod:`zerg.schedules.firing`, the one path of EventBridge
  Scheduler, the local ticker and run-now), under the schedule's row lock: the fire is ``skipped``
  with the reason and ``idle_paused_at`` is set, once; after the commit the schedule is paused
  through :func:`zerg.schedules.service.pause` (so Scheduler stops firing it too) and whoever set
  ``idle_paused_at`` sends the one notice. A resume clears it; the clock starts again from then.
- Only checks pause: digests and reminders make no run and cost nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.alerts import inbox

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime


def idle_reason(conn: "Connection", schedule: dict[str, Any], now: datetime) -> str | None:
    """Why the schedule pauses now (its fire's detail), or None when it is attended to."""
    days = schedule.get("idle_pause_days")
    if days is None or schedule["kind"] != "check":
        return None
    seen = inbox.attention(conn, schedule["owner_id"], schedule["id"], schedule["updated_at"])
    last = max(schedule["updated_at"], seen["last_seen"] or schedule["updated_at"])
    if now - last < timedelta(days=days) or not seen["unseen"]:
        return None
    return (f"paused: nobody opened or acknowledged its results for {days} days "
            f"({seen['unseen']} unseen since {last:%Y-%m-%d})")


def resume_hint(schedule: dict[str, Any]) -> str:
    return (f"Resume it with `zerg schedules resume {schedule['name']}` or PATCH /api/jarvis/schedules/{schedule['id']} "
            '{"enabled": true}; the same PATCH with {"idle_pause_days": N} changes how long its results may go '
            "unseen (null: never pause).")


def pause(rt: "Runtime", schedule: dict[str, Any], reason: str, *, tell: bool) -> None:
    """Pause the schedule (Scheduler too) and, when ``tell``, send the owner the one notice.
    Best effort: a failure is logged; the next fire finds the schedule idle again and retries."""
    from zerg.notify.deliver import deliver
    from zerg.schedules import service

    try:
        service.pause(rt, schedule["owner_id"], schedule["id"])
    except Exception:  # Scheduler unavailable: the row stays enabled, the next fire skips and retries
        observability.logger().warning("idle schedule not paused", exc_info=True,
                                       extra={"schedule_id": schedule["id"]})
    if not tell:
        return
    try:
        deliver(rt, schedule["owner_id"], channel="email", purpose="idle_pause", schedule_id=schedule["id"],
                subject=f"Zerg: paused the scheduled check {schedule['name']!r} (nobody looked at its results)",
                body=(f"The scheduled check {schedule['name']!r} was paused: {reason.removeprefix('paused: ')}.\n"
                      "It stops spending on model calls until you resume it.\n\n" + resume_hint(schedule) + "\n"))
    except Exception:
        observability.logger().warning("idle pause notice not sent", exc_info=True,
                                       extra={"schedule_id": schedule["id"]})
