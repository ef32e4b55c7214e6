"""What makes a ``schedules`` row fire (the port: :class:`zerg.ports.Scheduler`). On AWS an
EventBridge Scheduler schedule per row (:mod:`zerg.schedules.eventbridge`); locally the rows are
the schedule and the ticker of ``zerg serve`` reads them (:class:`LocalScheduler`, here).

Invariants:
- One port, two implementations, one contract (tests/test_scheduler_contract.py): after
  ``put(row)``, ``describe(row id)`` shows the row's expression, time zone, state and the fire's
  input; ``put`` again changes them; after the row is deleted and ``delete(id)`` called, describe
  shows nothing; ``delete`` of what is not there is fine.
- ``put`` and ``delete`` raise :class:`SchedulerUnavailable` (never a provider's exception) when the
  change could not be made; the service then rolls the row back, so row and schedule agree.
- The fire's input is the same everywhere: ``{"trigger": "schedule", "schedule_id": N,
  "scheduled_time": T}``: Scheduler fills T with ``<aws.scheduler.scheduled-time>``, the ticker
  with the due ``next_fire_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg.ports import fire_input, schedule_name

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


class LocalScheduler:
    """Locally the row is the schedule: ``put`` checks the row can fire, ``delete`` has nothing to
    remove, ``describe`` reads the row as the ticker will."""

    def __init__(self, pool: Callable[[], ConnectionPool]) -> None:
        self._pool = pool

    def put(self, row: dict[str, Any]) -> None:
        from zerg.schedules.expressions import when_of

        when_of(row)  # a row the ticker could not read would be a bug here, not a silent skip later

    def delete(self, schedule_id: int) -> None:
        return None

    def describe(self, schedule_id: int) -> dict[str, Any] | None:
        from zerg.schedules import store

        with self._pool().connection() as conn:
            row = store.get_for_fire(conn, schedule_id)
        if row is None:
            return None
        return {"name": schedule_name(schedule_id), "expression": row["expression"], "timezone": row["timezone"],
                "state": "ENABLED" if row["enabled"] else "DISABLED", "input": fire_input(schedule_id),
                "next_fire_at": row["next_fire_at"], "target": "ticker"}
