"""Daily send limits (``notification_usage``): a send is reserved before it is made, by one
conditional upsert per (owner, UTC day, channel). Every SQL statement on the table lives here.

Invariants:
- :func:`reserve` is one statement: it creates the day's counter at 1 or raises it by one only
  while it is below the limit, so concurrent senders can never pass the limit together (the
  unique key serialises them; the losing upsert re-checks the condition on the committed row).
- A reservation whose send failed is given back with :func:`release` (never below zero).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

from psycopg import Connection


def reserve(conn: Connection, owner_id: int, channel: str, limit: int, day: date) -> bool:
    """Take one send of ``channel`` on ``day`` for the owner; False when ``limit`` are already taken."""
    if limit <= 0:
        return False
    row = conn.execute(
        """INSERT INTO notification_usage AS u (owner_id, day, channel, sent) VALUES (%s, %s, %s, 1)
           ON CONFLICT (owner_id, day, channel) DO UPDATE SET sent = u.sent + 1 WHERE u.sent < %s
           RETURNING sent""", (owner_id, day, channel, limit)).fetchone()
    return row is not None


def release(conn: Connection, owner_id: int, channel: str, day: date) -> None:
    """Give back one reservation (its send failed)."""
    conn.execute("UPDATE notification_usage SET sent = sent - 1 WHERE owner_id = %s AND day = %s AND channel = %s "
                 "AND sent > 0", (owner_id, day, channel))


def used(conn: Connection, owner_id: int, channel: str, day: date) -> int:
    """Sends reserved so far on ``day``."""
    row = conn.execute("SELECT sent FROM notification_usage WHERE owner_id = %s AND day = %s AND channel = %s",
                       (owner_id, day, channel)).fetchone()
    return row["sent"] if row else 0


def export_notification_usage(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's send counts per day and channel, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM notification_usage WHERE owner_id = %s ORDER BY id", (owner_id,))
