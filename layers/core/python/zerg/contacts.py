"""Verified contacts (``owner_contacts``): the only addresses Zerg may email or text, and the only
senders it accepts. Every SQL statement on ``owner_contacts`` lives here.

Invariants:
- A contact belongs to one owner; every read is scoped by owner.
- An address is unique per kind across all owners (the schema's ``UNIQUE (kind, address)``), so a
  sender identifies at most one owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_owner_contacts(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's contacts, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM owner_contacts WHERE owner_id = %s ORDER BY id", (owner_id,))
