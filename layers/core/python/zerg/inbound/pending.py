"""The ``pending_directives`` table: a destructive directive waiting for the owner's "yes"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_pending_directives(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    yield from conn.execute("SELECT * FROM pending_directives WHERE owner_id = %s ORDER BY id", (owner_id,))
