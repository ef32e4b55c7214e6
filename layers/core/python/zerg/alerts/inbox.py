"""The task inbox (``inbox_items``): one item per background run with its assessment (severity,
headline, details), unacknowledged first. Every SQL statement on the table lives here.

Invariants:
- One item per run (``UNIQUE (run_id)``): :func:`add` is idempotent, and says whether it wrote
  the item, so whoever wrote it is the one that notifies (a second closer or a redelivered step
  sends nothing twice).
- Every read and write is scoped by owner; another owner's run is simply not found.
- Acknowledging keeps the first time: acknowledging twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import Connection

if TYPE_CHECKING:
    from zerg.alerts.severity import Assessment

# The item as the API and the CLI show it: with its schedule's name (NULL once the schedule is gone).
_ITEM = """SELECT i.run_id, i.schedule_id, s.name AS schedule_name, i.severity, i.headline, i.details,
                  i.assessed_by, i.created_at, i.acknowledged_at
           FROM inbox_items i LEFT JOIN schedules s ON s.id = i.schedule_id AND s.owner_id = i.owner_id"""


def add(conn: Connection, owner_id: int, run_id: int, schedule_id: int | None,
        assessment: "Assessment") -> dict[str, Any] | None:
    """Write the run's item; the new row, or None when the run has one already (nothing changes)."""
    return conn.execute(
        """INSERT INTO inbox_items (owner_id, run_id, schedule_id, severity, headline, details, assessed_by)
           VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING *""",
        (owner_id, run_id, schedule_id, assessment.severity, assessment.headline, assessment.details,
         assessment.assessed_by),
    ).fetchone()


def get(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The owner's item of one run, or None."""
    return conn.execute(f"{_ITEM} WHERE i.owner_id = %s AND i.run_id = %s", (owner_id, run_id)).fetchone()


def list_for_owner(conn: Connection, owner_id: int, *, limit: int = 50, before: datetime | None = None,
                   unacknowledged_only: bool = False) -> list[dict[str, Any]]:
    """The owner's items: unacknowledged first, then newest first (``before``: created before it)."""
    return conn.execute(
        f"""{_ITEM} WHERE i.owner_id = %s AND (%s::timestamptz IS NULL OR i.created_at < %s)
                      AND (NOT %s OR i.acknowledged_at IS NULL)
            ORDER BY (i.acknowledged_at IS NULL) DESC, i.created_at DESC, i.id DESC LIMIT %s""",
        (owner_id, before, before, unacknowledged_only, limit),
    ).fetchall()


def acknowledge(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """Mark the owner's item of ``run_id`` acknowledged (the first time stays); the item, or None."""
    row = conn.execute(
        """UPDATE inbox_items SET acknowledged_at = COALESCE(acknowledged_at, now())
           WHERE owner_id = %s AND run_id = %s RETURNING run_id""",
        (owner_id, run_id),
    ).fetchone()
    return None if row is None else get(conn, owner_id, run_id)


def mark_opened(conn: Connection, owner_id: int, run_id: int) -> bool:
    """The owner opened the run's details: its item's ``opened_at`` (the first time stays). True
    when this call set it (False: no item of the owner's for the run, or opened before)."""
    row = conn.execute(
        "UPDATE inbox_items SET opened_at = now() WHERE owner_id = %s AND run_id = %s AND opened_at IS NULL RETURNING id",
        (owner_id, run_id),
    ).fetchone()
    return row is not None


def attention(conn: Connection, owner_id: int, schedule_id: int, since: datetime) -> dict[str, Any]:
    """How the owner attended to their schedule's results: ``last_seen`` (the latest time they
    acknowledged or opened any of its items, or None) and ``unseen`` (its items created after both
    ``since`` and ``last_seen`` that nobody acknowledged or opened)."""
    return conn.execute(
        """WITH seen AS (SELECT max(GREATEST(acknowledged_at, opened_at)) AS last_seen
                         FROM inbox_items WHERE owner_id = %s AND schedule_id = %s)
           SELECT seen.last_seen,
                  (SELECT count(*) FROM inbox_items i
                   WHERE i.owner_id = %s AND i.schedule_id = %s AND i.created_at > GREATEST(%s, seen.last_seen)
                     AND i.acknowledged_at IS NULL AND i.opened_at IS NULL) AS unseen
           FROM seen""",
        (owner_id, schedule_id, owner_id, schedule_id, since),
    ).fetchone()


def export_inbox_items(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's inbox, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM inbox_items WHERE owner_id = %s ORDER BY id", (owner_id,))


# --- the morning digest (zerg.alerts.digest) ----------------------------------------------------

def for_digest(conn: Connection, owner_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """What the owner's next digest lists: every item not yet in a digest (``new``), then older
    warning and critical ones still unacknowledged (an info result is told once: repeating it
    every morning would bury the ones that need the owner); most severe first within each, then
    newest. At most ``limit`` + 1 rows (one more than shown says there are more)."""
    return conn.execute(
        """SELECT run_id, schedule_id, severity, headline, details, created_at, acknowledged_at,
                  digested_at IS NULL AS new
           FROM inbox_items
           WHERE owner_id = %s
             AND (digested_at IS NULL OR (acknowledged_at IS NULL AND severity IN ('warning', 'critical')))
           ORDER BY digested_at IS NULL DESC,
                    CASE severity WHEN 'critical' THEN 3 WHEN 'warning' THEN 2 ELSE 1 END DESC,
                    created_at DESC, id DESC
           LIMIT %s""",
        (owner_id, limit + 1),
    ).fetchall()


def mark_digested(conn: Connection, owner_id: int, run_ids: list[int]) -> int:
    """Record that a sent digest included these items (the first digest only); how many changed."""
    return conn.execute(
        "UPDATE inbox_items SET digested_at = now() WHERE owner_id = %s AND run_id = ANY(%s) AND digested_at IS NULL",
        (owner_id, run_ids),
    ).rowcount
