"""Owners. Every SQL statement on ``owners`` lives here; their devices, sessions and pairing codes
are in :mod:`zerg.identity`.

Invariants:
- Every other table hangs off an owner; "no owner, no data".
- An owner name is printable, trimmed and unique ignoring case (:mod:`zerg.identity.names` checks
  the text, the database's unique index decides uniqueness); lookups by name ignore case too.
- An owner is created with its first device (``primary``) in one transaction; the device secret
  is shown once and stored hashed (:mod:`zerg.identity.devices`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, errors

from zerg.identity import devices, names

LOCAL_OWNER = "local"  # the owner local commands act for unless told --owner


@dataclass(frozen=True)
class NewOwner:
    owner_id: int
    name: str
    device_secret: str  # the first device's, shown once
    device_id: int


def create_owner(conn: Connection, name: str) -> NewOwner:
    """A new owner and its first device; :class:`names.InvalidName` or :class:`names.NameTaken`."""
    name = names.owner_name(name)
    try:
        with conn.transaction():
            row = conn.execute("INSERT INTO owners (name) VALUES (%s) RETURNING id", (name,)).fetchone()
            device = devices.create_device(conn, row["id"], devices.FIRST_DEVICE)
    except errors.UniqueViolation:
        raise names.NameTaken(f"an owner named {name!r} already exists (names are unique ignoring case)") from None
    return NewOwner(row["id"], name, device.secret, device.device_id)


def owner_by_name(conn: Connection, name: str) -> int | None:
    """The owner with this name (ignoring case and surrounding whitespace), or None."""
    try:
        name = names.owner_name(name)
    except names.InvalidName:
        return None
    row = conn.execute("SELECT id FROM owners WHERE lower(name) = lower(%s)", (name,)).fetchone()
    return row["id"] if row else None


def owner_name(conn: Connection, owner_id: int) -> str | None:
    """The owner's name (as created), or None when there is no such owner."""
    row = conn.execute("SELECT name FROM owners WHERE id = %s", (owner_id,)).fetchone()
    return row["name"] if row else None


def local_owner(conn: Connection) -> int:
    """The owner that local commands act as (created on first use)."""
    owner_id = owner_by_name(conn, LOCAL_OWNER)
    if owner_id is not None:
        return owner_id
    try:
        return create_owner(conn, LOCAL_OWNER).owner_id
    except names.NameTaken:  # another command created it a moment ago
        return owner_by_name(conn, LOCAL_OWNER)


def export_owners(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's own row for ``zerg owners export`` (its devices' secrets are hashes kept in ``devices``)."""
    yield from conn.execute("SELECT id, name, created_at FROM owners WHERE id = %s", (owner_id,))


def lock_owner(conn: Connection, owner_id: int) -> dict[str, Any] | None:
    """Lock the owner's row for this transaction (id, name), or None if it is gone. A new run
    or job of this owner waits for the lock (its foreign key check), so a check made after this
    one stays true until the transaction ends."""
    return conn.execute("SELECT id, name FROM owners WHERE id = %s FOR UPDATE", (owner_id,)).fetchone()


def delete_owner(conn: Connection, owner_id: int) -> bool:
    """Delete the owner row; every table that hangs off it goes with it (ON DELETE CASCADE)."""
    return conn.execute("DELETE FROM owners WHERE id = %s RETURNING id", (owner_id,)).fetchone() is not None
