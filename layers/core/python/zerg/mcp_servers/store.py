"""The ``mcp_servers`` table: every SQL statement on it lives here.

Invariants:
- Every statement is scoped by ``owner_id``: a server's name means something only within its owner.
- Only :func:`connect_row` selects ``secret_sealed`` (for a call, which opens it for the same owner);
  every other read returns :data:`PUBLIC_COLUMNS`, which never include it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

PUBLIC_COLUMNS = ("name, transport, url, command, auth, oauth, allow_private, tools, listing_note, listed_at, "
                  "created_at, updated_at")


def save(conn: Connection, owner_id: int, name: str, *, transport: str, url: str | None, command: str | None,
         auth: str, oauth: dict[str, Any] | None, secret_sealed: bytes | None, allow_private: bool) -> dict[str, Any]:
    """Insert or replace the owner's server ``name`` (a replaced server's cached listing is dropped)."""
    return conn.execute(
        """INSERT INTO mcp_servers (owner_id, name, transport, url, command, auth, oauth, secret_sealed, allow_private)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (owner_id, name) DO UPDATE SET
             transport = EXCLUDED.transport, url = EXCLUDED.url, command = EXCLUDED.command, auth = EXCLUDED.auth,
             oauth = EXCLUDED.oauth, secret_sealed = EXCLUDED.secret_sealed, allow_private = EXCLUDED.allow_private,
             tools = NULL, listing_note = NULL, listed_at = NULL, updated_at = now()
           RETURNING """ + PUBLIC_COLUMNS,
        (owner_id, name, transport, url, command, auth, Jsonb(oauth) if oauth is not None else None, secret_sealed,
         allow_private),
    ).fetchone()


def save_listing(conn: Connection, owner_id: int, name: str, tools: list[dict[str, Any]] | None,
                 note: str | None) -> dict[str, Any] | None:
    """Cache a listing (``tools`` None: the listing failed, ``note`` says why; the last good one stays)."""
    if tools is None:
        return conn.execute(
            "UPDATE mcp_servers SET listing_note = %s WHERE owner_id = %s AND name = %s RETURNING " + PUBLIC_COLUMNS,
            (note, owner_id, name)).fetchone()
    return conn.execute(
        """UPDATE mcp_servers SET tools = %s, listing_note = %s, listed_at = now()
           WHERE owner_id = %s AND name = %s RETURNING """ + PUBLIC_COLUMNS,
        (Jsonb(tools), note, owner_id, name)).fetchone()


def list_public(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    return conn.execute("SELECT " + PUBLIC_COLUMNS + " FROM mcp_servers WHERE owner_id = %s ORDER BY name",
                        (owner_id,)).fetchall()


def get_public(conn: Connection, owner_id: int, name: str) -> dict[str, Any] | None:
    return conn.execute("SELECT " + PUBLIC_COLUMNS + " FROM mcp_servers WHERE owner_id = %s AND name = %s",
                        (owner_id, name)).fetchone()


def connect_row(conn: Connection, owner_id: int, name: str) -> dict[str, Any] | None:
    """What a call needs to connect, the sealed secret included."""
    return conn.execute("SELECT " + PUBLIC_COLUMNS + ", secret_sealed FROM mcp_servers WHERE owner_id = %s AND name = %s",
                        (owner_id, name)).fetchone()


def delete(conn: Connection, owner_id: int, name: str) -> bool:
    return conn.execute("DELETE FROM mcp_servers WHERE owner_id = %s AND name = %s RETURNING id",
                        (owner_id, name)).fetchone() is not None


def export_mcp_servers(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's servers for ``zerg owners export``: never the sealed secret (``allow_private``, a yes/no
    the owner set, is named for what it is: ``internal_host_allowed``)."""
    columns = PUBLIC_COLUMNS.replace("allow_private", "allow_private AS internal_host_allowed")
    yield from conn.execute("SELECT id, owner_id, " + columns + " FROM mcp_servers WHERE owner_id = %s ORDER BY name",
                            (owner_id,))
