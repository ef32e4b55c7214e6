"""The owner's Web Push subscriptions (``push_subscriptions``). Every SQL statement on the table
lives here.

Invariants:
- Every read and write is scoped by owner; another owner's id is simply not found.
- The browser's keys (``p256dh_secret``, ``auth_secret``) leave this module only through
  :func:`for_sending` (the sender encrypts with them); listings and the export never carry them.
- :func:`subscribe` is idempotent per (owner, endpoint): the same endpoint again updates its keys
  and keeps its id; a new endpoint beyond ``limit`` subscriptions is refused (None), checked under
  a per-owner lock so two concurrent subscribes cannot pass the limit together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

_PUBLIC = "id, owner_id, device_id, endpoint, created_at, last_sent_at, failures"


class TooMany(Exception):
    """The owner has ``limit`` subscriptions already."""


def subscribe(conn: Connection, owner_id: int, endpoint: str, p256dh: str, auth: str, *, limit: int,
              device_id: int | None = None) -> tuple[dict[str, Any], bool]:
    """Store (or refresh) one subscription: (the row without keys, created?). :class:`TooMany` when a
    new endpoint would exceed ``limit``."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('push_subscriptions:' || %s, 0))", (owner_id,))
        row = conn.execute(
            f"""UPDATE push_subscriptions SET p256dh_secret = %s, auth_secret = %s, failures = 0,
                       device_id = COALESCE(%s, device_id)
                WHERE owner_id = %s AND endpoint = %s RETURNING {_PUBLIC}""",
            (p256dh, auth, device_id, owner_id, endpoint)).fetchone()
        if row is not None:
            return row, False
        count = conn.execute("SELECT count(*) AS n FROM push_subscriptions WHERE owner_id = %s",
                             (owner_id,)).fetchone()["n"]
        if count >= limit:
            raise TooMany(f"{count} push subscriptions already (at most {limit}): delete one first")
        row = conn.execute(
            f"""INSERT INTO push_subscriptions (owner_id, device_id, endpoint, p256dh_secret, auth_secret)
                VALUES (%s, %s, %s, %s, %s) RETURNING {_PUBLIC}""",
            (owner_id, device_id, endpoint, p256dh, auth)).fetchone()
        return row, True


def list_for_owner(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's subscriptions, oldest first, without keys."""
    return conn.execute(f"SELECT {_PUBLIC} FROM push_subscriptions WHERE owner_id = %s ORDER BY id",
                        (owner_id,)).fetchall()


def for_sending(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's subscriptions with their keys, oldest first: for the sender only."""
    return conn.execute(f"SELECT {_PUBLIC}, p256dh_secret, auth_secret FROM push_subscriptions "
                        "WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def has_any(conn: Connection, owner_id: int) -> bool:
    return conn.execute("SELECT 1 FROM push_subscriptions WHERE owner_id = %s LIMIT 1", (owner_id,)).fetchone() is not None


def delete(conn: Connection, owner_id: int, subscription_id: int) -> bool:
    """Remove one of the owner's subscriptions; False when it is not theirs (or gone)."""
    return conn.execute("DELETE FROM push_subscriptions WHERE owner_id = %s AND id = %s",
                        (owner_id, subscription_id)).rowcount == 1


def sent(conn: Connection, owner_id: int, subscription_id: int) -> None:
    """A push the service accepted: stamp it, and forget earlier failures."""
    conn.execute("UPDATE push_subscriptions SET last_sent_at = now(), failures = 0 WHERE owner_id = %s AND id = %s",
                 (owner_id, subscription_id))


def failed(conn: Connection, owner_id: int, subscription_id: int) -> None:
    """A push that failed for a reason other than "gone": counted."""
    conn.execute("UPDATE push_subscriptions SET failures = failures + 1 WHERE owner_id = %s AND id = %s",
                 (owner_id, subscription_id))


def export_push_subscriptions(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's subscriptions without the browser's keys, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream(f"SELECT {_PUBLIC} FROM push_subscriptions WHERE owner_id = %s ORDER BY id", (owner_id,))
