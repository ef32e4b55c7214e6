"""Organisational memory (``org_memory``): add-only facts, preferences, decisions about the owner.

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_org_memory(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``org_memory``, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM org_memory WHERE owner_id = %s ORDER BY id", (owner_id,))
