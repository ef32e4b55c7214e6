"""The owner's single, long-lived supervisor thread ("one brain").

Invariants:
- Exactly one supervisor thread per owner, enforced by ``UNIQUE (owner_id, kind)``;
  find-or-create is idempotent and safe under concurrent callers.
- The thread holds the user's messages and Zerg's answers only (a run's working conversation
  lives on the run).
"""

from __future__ import annotations

from psycopg import Connection


def find_or_create_thread(conn: Connection, owner_id: int) -> int:
    """Return the owner's supervisor thread id, creating it if missing."""
    row = conn.execute(
        """INSERT INTO threads (owner_id, kind) VALUES (%s, 'supervisor')
           ON CONFLICT (owner_id, kind) DO NOTHING RETURNING id""",
        (owner_id,),
    ).fetchone()
    if row:
        return row["id"]
    row = conn.execute(
        "SELECT id FROM threads WHERE owner_id = %s AND kind = 'supervisor'", (owner_id,)
    ).fetchone()
    return row["id"]
