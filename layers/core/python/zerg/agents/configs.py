"""The ``agent_configs`` table: per owner and agent (``supervisor``, ``worker``), the model,
temperature, max tokens, instructions addendum and allowed tools that owner chose. A NULL column
means "the deployment's default". Every SQL statement on ``agent_configs`` lives here.

Invariants:
- Every read and write is scoped by owner.
- A write names the columns it changes; the others keep their value (a new row starts from the
  defaults: NULLs, no instructions). Validation is the caller's (:mod:`zerg.agents.settings`);
  the table's CHECKs are the last line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import Connection

AGENTS = ("supervisor", "worker")
COLUMNS = ("model", "temperature", "max_tokens", "instructions", "allowed_tools")
_RETURNING = "id, agent, model, temperature, max_tokens, instructions, allowed_tools, updated_at"


def get_config(conn: Connection, owner_id: int, agent: str) -> dict[str, Any] | None:
    """The owner's row for ``agent``, or None when the owner never configured it."""
    return conn.execute(
        f"SELECT {_RETURNING} FROM agent_configs WHERE owner_id = %s AND agent = %s",
        (owner_id, agent),
    ).fetchone()


def list_configs(conn: Connection, owner_id: int) -> dict[str, dict[str, Any]]:
    """The owner's rows by agent (an agent never configured is absent)."""
    rows = conn.execute(f"SELECT {_RETURNING} FROM agent_configs WHERE owner_id = %s", (owner_id,)).fetchall()
    return {r["agent"]: r for r in rows}


def put_config(conn: Connection, owner_id: int, agent: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """Set ``values`` (columns of :data:`COLUMNS`; None is NULL, "the default") on the owner's row
    for ``agent``, created when missing, in one statement; the whole row after it (with no values:
    the row as it is, None if there is none)."""
    unknown = set(values) - set(COLUMNS)
    if unknown or agent not in AGENTS:
        raise ValueError(f"not an agent_configs column or agent: {sorted(unknown) or agent}")
    if not values:
        return get_config(conn, owner_id, agent)
    names = list(values)
    return conn.execute(
        f"""INSERT INTO agent_configs (owner_id, agent, {", ".join(names)})
            VALUES (%s, %s, {", ".join(["%s"] * len(names))})
            ON CONFLICT (owner_id, agent) DO UPDATE
            SET {", ".join(f"{n} = EXCLUDED.{n}" for n in names)}, updated_at = now()
            RETURNING {_RETURNING}""",
        (owner_id, agent, *values.values()),
    ).fetchone()


def delete_config(conn: Connection, owner_id: int, agent: str) -> bool:
    """Forget the owner's configuration of ``agent`` (back to the defaults); False if there was none."""
    return conn.execute("DELETE FROM agent_configs WHERE owner_id = %s AND agent = %s",
                        (owner_id, agent)).rowcount > 0


def export_agent_configs(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's agent configuration rows (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM agent_configs WHERE owner_id = %s ORDER BY agent", (owner_id,))
