"""The deployment's VAPID key pair (``push_vapid_keys``, one row). Every SQL statement on the table
lives here.

Invariants:
- Made once per deployment: :func:`create_once` inserts with ``ON CONFLICT DO NOTHING`` and reads
  the row back, so two cold starts racing both end with the row that won.
- The private key is stored only sealed (:meth:`zerg.sealing.Sealer.seal_deployment`); this module
  never sees it in clear.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection


def get(conn: Connection) -> dict[str, Any] | None:
    """The key pair row (``public_key``, ``private_key_sealed``), or None before the first use."""
    return conn.execute("SELECT public_key, private_key_sealed, created_at FROM push_vapid_keys WHERE id = 1").fetchone()


def create_once(conn: Connection, public_key: str, private_key_sealed: bytes) -> dict[str, Any]:
    """Store this key pair unless one is stored already; the stored one either way."""
    conn.execute("INSERT INTO push_vapid_keys (id, public_key, private_key_sealed) VALUES (1, %s, %s) "
                 "ON CONFLICT (id) DO NOTHING", (public_key, private_key_sealed))
    return get(conn)
