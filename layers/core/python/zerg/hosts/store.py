"""The ``ssh_hosts`` table: every SQL statement on it lives here.

Invariants:
- Every statement is scoped by ``owner_id``: an alias names a host only within its owner.
- Only :func:`connect_row` selects ``private_key_sealed`` (for ``ssh_exec``, which opens it for the
  same owner); every other read returns :data:`PUBLIC_COLUMNS`, which never include it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

PUBLIC_COLUMNS = ("alias, hostname, port, username, key_type, key_fingerprint, host_key_fingerprint, "
                  "created_at, updated_at")


def save(conn: Connection, owner_id: int, alias: str, *, hostname: str, port: int, username: str,
         private_key_sealed: bytes, key_type: str, key_fingerprint: str, host_key: str,
         host_key_fingerprint: str, replace: bool) -> tuple[dict[str, Any] | None, bool]:
    """Insert the owner's host, or replace it when ``replace``: (row, created). The row is None when
    the alias exists and ``replace`` is false."""
    values = (owner_id, alias, hostname, port, username, private_key_sealed, key_type, key_fingerprint,
              host_key, host_key_fingerprint)
    insert = """INSERT INTO ssh_hosts (owner_id, alias, hostname, port, username, private_key_sealed, key_type,
                                       key_fingerprint, host_key, host_key_fingerprint)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"""
    if replace:
        row = conn.execute(
            insert + """ ON CONFLICT (owner_id, alias) DO UPDATE SET
                 hostname = EXCLUDED.hostname, port = EXCLUDED.port, username = EXCLUDED.username,
                 private_key_sealed = EXCLUDED.private_key_sealed, key_type = EXCLUDED.key_type,
                 key_fingerprint = EXCLUDED.key_fingerprint, host_key = EXCLUDED.host_key,
                 host_key_fingerprint = EXCLUDED.host_key_fingerprint, updated_at = now()
               RETURNING """ + PUBLIC_COLUMNS + ", (xmax = 0) AS created",
            values,
        ).fetchone()
    else:
        row = conn.execute(
            insert + " ON CONFLICT (owner_id, alias) DO NOTHING RETURNING " + PUBLIC_COLUMNS + ", true AS created",
            values,
        ).fetchone()
    if row is None:
        return None, False
    created = row.pop("created")
    return row, created


def list_public(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT " + PUBLIC_COLUMNS + " FROM ssh_hosts WHERE owner_id = %s ORDER BY alias", (owner_id,)
    ).fetchall()


def get_public(conn: Connection, owner_id: int, alias: str) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT " + PUBLIC_COLUMNS + " FROM ssh_hosts WHERE owner_id = %s AND alias = %s", (owner_id, alias)
    ).fetchone()


def connect_row(conn: Connection, owner_id: int, alias: str) -> dict[str, Any] | None:
    """What ``ssh_exec`` needs to connect, sealed key included."""
    return conn.execute(
        """SELECT alias, hostname, port, username, private_key_sealed, host_key
           FROM ssh_hosts WHERE owner_id = %s AND alias = %s""",
        (owner_id, alias),
    ).fetchone()


def aliases(conn: Connection, owner_id: int) -> list[str]:
    return [r["alias"] for r in conn.execute(
        "SELECT alias FROM ssh_hosts WHERE owner_id = %s ORDER BY alias", (owner_id,)).fetchall()]


def delete(conn: Connection, owner_id: int, alias: str) -> bool:
    return conn.execute(
        "DELETE FROM ssh_hosts WHERE owner_id = %s AND alias = %s RETURNING id", (owner_id, alias)
    ).fetchone() is not None


def export_ssh_hosts(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's hosts for ``zerg owners export``: the pinned host key, never the private key."""
    yield from conn.execute(
        "SELECT id, owner_id, " + PUBLIC_COLUMNS + ", host_key FROM ssh_hosts WHERE owner_id = %s ORDER BY alias",
        (owner_id,),
    )
