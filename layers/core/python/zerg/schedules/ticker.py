"""The local ticker: what EventBridge Scheduler does on AWS, done by ``zerg serve`` over the same
rows (a housekeeping task every ``ZERG_TICK_S``, registered only when no ``ZERG_SCHEDULE_GROUP``).

Invariants:
- One tick reads the due schedules (enabled, ``next_fire_at <= now``) and fires each at the latest
  of its fire times in (last fire, now]: after downtime only that latest missed fire runs; how many
  it passed over is in the fire's detail and the log.
- Firing is :func:`zerg.schedules.firing.fire`, so two tickers on one database (two ``zerg serve``)
  compute the same fire time and the fire's claim lets only one of them start anything.
- One schedule's failure is logged and counted; the others still fire. The tick ends with the
  recovery sweep of fires a stopped process left pending.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.schedules import store
from zerg.schedules.firing import fire, recover_pending

if TYPE_CHECKING:
    from zerg.runtime import Runtime

DUE_LIMIT = 500  # schedules fired per tick at most; the rest are due next tick
MISSED_COUNT_CAP = 1000  # counting the fires passed over stops here ("at least")
_TICK = timedelta(microseconds=1)


def tick(rt: "Runtime", now: datetime | None = None) -> dict[str, int]:
    """Fire what is due at ``now`` (default: the current time); counts by outcome."""
    from zerg.schedules.expressions import when_of

    now = (now or datetime.now(UTC)).astimezone(UTC)
    counts: Counter[str] = Counter()
    with rt.pool.connection() as conn:
        due = store.due(conn, now, DUE_LIMIT)
    counts["due"] = len(due)
    for schedule in due:
        try:
            when = when_of(schedule)
            # next_fire_at is the first fire time not yet fired; a run-now may have fired later.
            since = max(schedule["next_fire_at"] - _TICK, schedule["last_fire_at"] or schedule["next_fire_at"] - _TICK)
            latest = when.latest_fire(now, since)
            if latest is None:  # nothing left in (since, now]: e.g. run-now fired it a moment ago
                _move_on(rt, schedule["id"], when.next_fire(now))
                counts["advanced"] += 1
                continue
            missed = count_missed(when, since, latest)
            if missed:
                observability.logger().warning("schedule missed fires: only the latest runs", extra={
                    "schedule_id": schedule["id"], "missed": missed, "fires_at": latest.isoformat()})
            result = fire(rt, schedule["id"], latest, source="ticker", missed=missed)
        except Exception:  # one broken schedule never stops the others
            observability.logger().exception("schedule tick failed", extra={"schedule_id": schedule["id"]})
            counts["errors"] += 1
            continue
        counts["duplicates" if result.duplicate else result.outcome] += 1
    try:
        counts["recovered"] = recover_pending(rt)
    except Exception:
        observability.logger().exception("schedule fire recovery failed")
        counts["errors"] += 1
    return {k: v for k, v in counts.items() if v or k == "due"}


def _move_on(rt: "Runtime", schedule_id: int, next_fire_at: datetime | None) -> None:
    """Only the next fire changes (under the row's lock: a fire meanwhile keeps its last fire)."""
    with rt.pool.connection() as conn, conn.transaction():
        row = store.get_for_fire(conn, schedule_id, for_update=True)
        if row is not None:
            store.advance(conn, schedule_id, fired_at=row["last_fire_at"], next_fire_at=next_fire_at)


def count_missed(when: Any, since: datetime, latest: datetime) -> int:
    """The fire times in (since, latest), at most :data:`MISSED_COUNT_CAP`."""
    count, at = 0, when.next_fire(since)
    while at is not None and at < latest and count < MISSED_COUNT_CAP:
        count += 1
        at = when.next_fire(at)
    return count
