"""Thread compaction summaries (``conversation_summaries``): a range of thread messages replaced in the prompt by one summary.

Every read is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection


def export_conversation_summaries(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's rows of ``conversation_summaries``, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM conversation_summaries WHERE owner_id = %s ORDER BY id", (owner_id,))
