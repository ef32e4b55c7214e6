"""Sessions: what a signed token stands for. Every SQL statement on ``sessions`` lives here.

Invariants:
- A session's id is the token's ``sid`` (and ``jti``) claim: checking a token is one primary-key
  lookup (joined to its device by primary key), never a scan.
- A token is good only while its session is not revoked, not expired, and its device is not
  revoked; :func:`session_state` reports all three at once, read on every request.
- Revocation is a conditional UPDATE, idempotent: the first ``revoked_at`` stays.
- Every read and every revocation by an API caller is owner-scoped; another owner's session id
  behaves like one that does not exist.
- Rows that ended (expired or revoked) more than ``KEEP_ENDED`` ago are pruned when the owner next
  logs in, so the table does not grow with every ``zerg ask``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg import Connection

KEEP_ENDED = timedelta(days=30)
TOUCH_EVERY = timedelta(seconds=60)  # last_used_at is a hint, not an audit log: one write a minute
LIST_LIMIT = 100


@dataclass(frozen=True)
class Session:
    session_id: UUID
    owner_id: int
    device_id: int
    issued_at: datetime
    expires_at: datetime


def create_session(conn: Connection, owner_id: int, device_id: int, ttl: timedelta) -> Session:
    conn.execute(
        "DELETE FROM sessions WHERE owner_id = %s AND least(expires_at, coalesce(revoked_at, 'infinity')) < now() - %s",
        (owner_id, KEEP_ENDED),
    )
    row = conn.execute(
        """INSERT INTO sessions (owner_id, device_id, expires_at) VALUES (%s, %s, now() + %s)
           RETURNING id, issued_at, expires_at""",
        (owner_id, device_id, ttl),
    ).fetchone()
    return Session(row["id"], owner_id, device_id, row["issued_at"], row["expires_at"])


def session_state(conn: Connection, session_id: UUID) -> dict[str, Any] | None:
    """``{owner_id, device_id, revoked, expired, device_revoked, stale}`` of one session, or None.
    ``stale``: last_used_at is older than ``TOUCH_EVERY`` (time to call :func:`touch`)."""
    return conn.execute(
        """SELECT s.owner_id, s.device_id, s.revoked_at IS NOT NULL AS revoked, s.expires_at <= now() AS expired,
                  d.revoked_at IS NOT NULL AS device_revoked,
                  s.last_used_at IS NULL OR s.last_used_at < now() - %s AS stale
           FROM sessions s JOIN devices d ON d.id = s.device_id WHERE s.id = %s""",
        (TOUCH_EVERY, session_id),
    ).fetchone()


def touch(conn: Connection, session_id: UUID) -> None:
    conn.execute("UPDATE sessions SET last_used_at = now() WHERE id = %s", (session_id,))


def revoke_session(conn: Connection, owner_id: int, session_id: UUID) -> dict[str, Any] | None:
    """Revoke the owner's session; ``{session_id, revoked_at}``, or None when it is not the owner's."""
    return conn.execute(
        """UPDATE sessions SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s AND owner_id = %s
           RETURNING id::text AS session_id, revoked_at""",
        (session_id, owner_id),
    ).fetchone()


def revoke_device_sessions(conn: Connection, device_ids: list[int]) -> int:
    """Revoke every live session issued under these devices; how many were live."""
    if not device_ids:
        return 0
    return conn.execute(
        "UPDATE sessions SET revoked_at = now() WHERE device_id = ANY(%s) AND revoked_at IS NULL", (device_ids,)
    ).rowcount


def list_sessions(conn: Connection, owner_id: int, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
    """The owner's sessions, newest first, ended ones included until pruned (never a token)."""
    return conn.execute(
        """SELECT s.id::text AS session_id, s.device_id, d.name AS device_name, s.issued_at, s.expires_at,
                  s.last_used_at, s.revoked_at,
                  s.revoked_at IS NULL AND d.revoked_at IS NULL AND s.expires_at > now() AS active
           FROM sessions s JOIN devices d ON d.id = s.device_id
           WHERE s.owner_id = %s ORDER BY s.issued_at DESC, s.id LIMIT %s""",
        (owner_id, limit),
    ).fetchall()
