"""What the inbound tests read back: an owner's inbound rows and their runs by trigger."""

from __future__ import annotations


def inbound_rows(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM inbound_messages WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def runs_with_trigger(pool, owner_id: int, trigger: str) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT id, status, task FROM runs WHERE owner_id = %s AND trigger = %s ORDER BY id",
                            (owner_id, trigger)).fetchall()
