"""Owners and their device credentials.

Invariants:
- A device secret is shown once, at creation; only its SHA-256 is stored. Secrets are 256-bit
  random tokens, so a fast unsalted hash is safe and lets authentication find the owner by hash.
- Every other table hangs off an owner; "no owner, no data".
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

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
