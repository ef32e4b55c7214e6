"""Schedule fires (``schedule_fires``): one row per (schedule, scheduled time), so a duplicate
delivery starts nothing. Every SQL statement on the table lives here.

Invariants:
- :func:`claim` is the only way a fire begins: one ``INSERT ... ON CONFLICT DO NOTHING``, so of
  any number of deliveries of one (schedule, scheduled time) - Scheduler's retries, two tickers, a
  ticker and a late Scheduler event - exactly one gets the row.
- A fire is ``pending`` until :func:`finish` gives it its outcome, once: finishing is conditional
  on ``pending``, so a racing resume and the original never both record one.
- Reads for an owner are owner-scoped; :func:`get`, :func:`lock` and :func:`stale_pending` are the
  system's own (a fire carries only ids).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from psycopg import Connection

DETAIL_MAX = 1000  # the column's CHECK


def claim(conn: Connection, schedule_id: int, owner_id: int, scheduled_time: datetime, source: str) -> int | None:
    """The new fire's id, ``pending``; None when this (schedule, scheduled time) was claimed before."""
    row = conn.execute(
        """INSERT INTO schedule_fires (schedule_id, owner_id, scheduled_time, source) VALUES (%s, %s, %s, %s)
           ON CONFLICT (schedule_id, scheduled_time) DO NOTHING RETURNING id""",
        (schedule_id, owner_id, scheduled_time, source),
    ).fetchone()
    return None if row is None else row["id"]


def attach_run(conn: Connection, fire_id: int, run_id: int) -> None:
    """The run a ``pending`` fire started (written with the run row, before its execution starts)."""
    conn.execute("UPDATE schedule_fires SET run_id = %s WHERE id = %s", (run_id, fire_id))


def set_detail(conn: Connection, fire_id: int, detail: str) -> None:
    """A note on a ``pending`` fire (e.g. the fires the ticker passed over), kept by :func:`finish`'s caller."""
    conn.execute("UPDATE schedule_fires SET detail = %s WHERE id = %s", (detail[:DETAIL_MAX], fire_id))


def finish(conn: Connection, fire_id: int, outcome: str, detail: str | None = None, run_id: int | None = None) -> bool:
    """Give a ``pending`` fire its outcome; False (nothing written) when it already has one."""
    row = conn.execute(
        """UPDATE schedule_fires SET outcome = %s, detail = %s, run_id = COALESCE(%s, run_id)
           WHERE id = %s AND outcome = 'pending' RETURNING id""",
        (outcome, None if detail is None else detail[:DETAIL_MAX], run_id, fire_id),
    ).fetchone()
    return row is not None


def get(conn: Connection, fire_id: int) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM schedule_fires WHERE id = %s", (fire_id,)).fetchone()


def get_by_time(conn: Connection, schedule_id: int, scheduled_time: datetime) -> dict[str, Any] | None:
    """The fire of (schedule, scheduled time), for a duplicate delivery."""
    return conn.execute(
        "SELECT * FROM schedule_fires WHERE schedule_id = %s AND scheduled_time = %s", (schedule_id, scheduled_time),
    ).fetchone()


def lock(conn: Connection, fire_id: int, *, wait: bool = True) -> dict[str, Any] | None:
    """The fire, row-locked until the transaction ends: whoever holds it completes a ``pending``
    fire. ``wait=False``: None when another transaction holds it (or it is gone)."""
    return conn.execute(
        "SELECT * FROM schedule_fires WHERE id = %s FOR UPDATE" + ("" if wait else " SKIP LOCKED"), (fire_id,),
    ).fetchone()


def stale_pending(conn: Connection, older_than_s: float, limit: int = 100) -> list[dict[str, Any]]:
    """Every owner's fires still ``pending`` ``older_than_s`` after they were claimed: their firing
    process stopped between the claim and the outcome (the ticker's recovery sweep)."""
    return conn.execute(
        """SELECT * FROM schedule_fires
           WHERE outcome = 'pending' AND fired_at < now() - make_interval(secs => %s) ORDER BY id LIMIT %s""",
        (older_than_s, limit),
    ).fetchall()


def list_for_schedule(conn: Connection, owner_id: int, schedule_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """The schedule's latest fires, newest first (``zerg schedules history``)."""
    return conn.execute(
        """SELECT id, schedule_id, scheduled_time, fired_at, source, outcome, detail, run_id FROM schedule_fires
           WHERE owner_id = %s AND schedule_id = %s ORDER BY scheduled_time DESC, id DESC LIMIT %s""",
        (owner_id, schedule_id, limit),
    ).fetchall()


def schedule_id_of_run(conn: Connection, owner_id: int, run_id: int) -> int | None:
    row = conn.execute(
        "SELECT schedule_id FROM schedule_fires WHERE owner_id = %s AND run_id = %s ORDER BY id LIMIT 1",
        (owner_id, run_id),
    ).fetchone()
    return None if row is None else row["schedule_id"]


def schedule_of_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The schedule a background run came from (its channel overrides), None for any other run,
    another owner's run, or a schedule since deleted."""
    from zerg.schedules import store

    schedule_id = schedule_id_of_run(conn, owner_id, run_id)
    return None if schedule_id is None else store.get(conn, owner_id, schedule_id)


def export_schedule_fires(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's schedule fires, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM schedule_fires WHERE owner_id = %s ORDER BY id", (owner_id,))
