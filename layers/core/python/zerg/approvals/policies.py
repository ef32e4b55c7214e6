"""The ``approval_policies`` table: one row per owner who set an approval policy (none: the
defaults). Every SQL statement on ``approval_policies`` lives here.

Invariants:
- Every read and write is scoped by owner.
- The stored document is what :class:`zerg.approvals.policy.Policy` accepted (the caller
  validates); a write replaces the whole document.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb


def get_policy(conn: Connection, owner_id: int) -> dict[str, Any] | None:
    """The owner's stored policy document and when it changed, or None when the owner set none."""
    return conn.execute("SELECT policy, updated_at FROM approval_policies WHERE owner_id = %s",
                        (owner_id,)).fetchone()


def put_policy(conn: Connection, owner_id: int, policy: dict[str, Any]) -> dict[str, Any]:
    """Store ``policy`` as the owner's whole policy; the row after it."""
    return conn.execute(
        """INSERT INTO approval_policies (owner_id, policy) VALUES (%s, %s)
           ON CONFLICT (owner_id) DO UPDATE SET policy = EXCLUDED.policy, updated_at = now()
           RETURNING policy, updated_at""",
        (owner_id, Jsonb(policy)),
    ).fetchone()


def delete_policy(conn: Connection, owner_id: int) -> bool:
    """Forget the owner's policy (back to the defaults); False if there was none."""
    return conn.execute("DELETE FROM approval_policies WHERE owner_id = %s", (owner_id,)).rowcount > 0


def export_approval_policies(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's policy row (none until set), for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM approval_policies WHERE owner_id = %s ORDER BY id", (owner_id,))
