"""The ``agent_configs`` table: per owner and agent (``supervisor``, ``worker``), the model,
temperature, max tokens, instructions addendum and allowed tools that owner chose. A NULL column
means "the deployment's default". Every SQL statement on ``agent_configs`` lives here.

Invariants:
- Every read and write is scoped by owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

AGENTS = ("supervisor", "worker")


def get_config(conn: Connection, owner_id: int, agent: str) -> dict[str, Any] | None:
    """The owner's row for ``agent``, or None when the owner never configured it."""
    return conn.execute(
        """SELECT id, agent, model, temperature, max_tokens, instructions, allowed_tools, updated_at
           FROM agent_configs WHERE owner_id = %s AND agent = %s""",
        (owner_id, agent),
    ).fetchone()


def export_agent_configs(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's agent configuration rows (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM agent_configs WHERE owner_id = %s ORDER BY agent", (owner_id,))
