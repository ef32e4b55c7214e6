"""Owners and their device credentials.

Invariants:
- A device secret is shown once, at creation; only its SHA-256 is stored. Secrets are 256-bit
  random tokens, so a fast unsalted hash is safe and lets authentication find the owner by hash.
- Every other table hangs off an owner; "no owner, no data".
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

LOCAL_OWNER = "local"  # the owner local commands act for unless told --owner


@dataclass(frozen=True)
class NewOwner:
    owner_id: int
    name: str
    device_secret: str  # shown once


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_owner(conn: Connection, name: str) -> NewOwner:
    secret = "zd_" + secrets.token_urlsafe(32)
    row = conn.execute(
        "INSERT INTO owners (name, device_secret_hash) VALUES (%s, %s) RETURNING id",
        (name, hash_secret(secret)),
    ).fetchone()
    return NewOwner(row["id"], name, secret)


def owner_by_secret(conn: Connection, secret: str) -> int | None:
    row = conn.execute(
        "SELECT id FROM owners WHERE device_secret_hash = %s", (hash_secret(secret),)
    ).fetchone()
    return row["id"] if row else None


def owner_by_name(conn: Connection, name: str) -> int | None:
    """The oldest owner with this name."""
    row = conn.execute("SELECT id FROM owners WHERE name = %s ORDER BY id LIMIT 1", (name,)).fetchone()
    return row["id"] if row else None


def local_owner(conn: Connection) -> int:
    """The owner that local commands act as (created on first use)."""
    owner_id = owner_by_name(conn, LOCAL_OWNER)
    return owner_id if owner_id is not None else create_owner(conn, LOCAL_OWNER).owner_id


def export_owners(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's own row for ``zerg owners export``: never the device secret's hash."""
    yield from conn.execute("SELECT id, name, created_at FROM owners WHERE id = %s", (owner_id,))


def lock_owner(conn: Connection, owner_id: int) -> dict[str, Any] | None:
    """Lock the owner's row for this transaction (id, name), or None if it is gone. A new run
    or job of this owner waits for the lock (its foreign key check), so a check made after this
    one stays true until the transaction ends."""
    return conn.execute("SELECT id, name FROM owners WHERE id = %s FOR UPDATE", (owner_id,)).fetchone()


def delete_owner(conn: Connection, owner_id: int) -> bool:
    """Delete the owner row; every table that hangs off it goes with it (ON DELETE CASCADE)."""
    return conn.execute("DELETE FROM owners WHERE id = %s RETURNING id", (owner_id,)).fetchone() is not None
