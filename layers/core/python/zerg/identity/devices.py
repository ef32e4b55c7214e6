"""Devices: each of an owner's devices holds its own device secret. Every SQL statement on
``devices`` lives here.

Invariants:
- A device secret is shown once, when its device is created; only its SHA-256 is stored. Secrets
  are 256-bit random tokens, so a fast unsalted hash is safe and lets authentication find the
  device by hash.
- A revoked device stays as a row (``revoked_at``) so the owner can see what was revoked; its
  secret never authenticates again and its sessions are revoked in the same transaction. (Token
  checks also look at the device, so a session issued in a race with the revocation is refused too.)
- Rotation (:func:`rotate`) revokes and replaces in one transaction: there is no moment with both
  the old and the new secret valid, and none with neither committed.
- Two live devices of one owner never share a name (ignoring case): the database's partial unique
  index is the rule, :class:`~zerg.identity.names.NameTaken` its message.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, errors

from zerg.identity import names, sessions

SECRET_PREFIX = "zd_"
FIRST_DEVICE = "primary"  # the device an owner is created with (and the one rotation re-creates)
BROWSER_DEVICE = "browser"  # the local owner's web sign-in, made at zerg serve's first start


class DeviceNotFound(LookupError):
    pass


@dataclass(frozen=True)
class NewDevice:
    device_id: int
    owner_id: int
    name: str
    secret: str  # shown once, never stored


@dataclass(frozen=True)
class Rotation:
    new: NewDevice
    revoked: list[str]  # the names of the devices whose secrets stopped working
    sessions_revoked: int


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_device(conn: Connection, owner_id: int, name: str) -> NewDevice:
    """A new live device with a fresh secret; :class:`names.InvalidName` / :class:`names.NameTaken`."""
    name = names.device_name(name)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    try:
        with conn.transaction():
            row = conn.execute(
                "INSERT INTO devices (owner_id, name, secret_hash) VALUES (%s, %s, %s) RETURNING id",
                (owner_id, name, hash_secret(secret)),
            ).fetchone()
    except errors.UniqueViolation:
        raise names.NameTaken(f"this owner already has a device named {name!r}; pick another name "
                              "or revoke that device first") from None
    return NewDevice(row["id"], owner_id, name, secret)


def device_by_secret(conn: Connection, secret: str) -> dict[str, Any] | None:
    """The live device holding this secret: ``{id, owner_id, name}``, or None."""
    return conn.execute(
        "SELECT id, owner_id, name FROM devices WHERE secret_hash = %s AND revoked_at IS NULL",
        (hash_secret(secret),),
    ).fetchone()


def list_devices(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's devices, oldest first, revoked ones included (never a hash)."""
    return conn.execute(
        """SELECT id AS device_id, name, created_at, last_seen_at, revoked_at, revoked_at IS NULL AS active
           FROM devices WHERE owner_id = %s ORDER BY id""",
        (owner_id,),
    ).fetchall()


def export_devices(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's devices for ``zerg owners export``: never the secret's hash."""
    yield from conn.execute(
        "SELECT id, owner_id, name, created_at, last_seen_at, revoked_at FROM devices WHERE owner_id = %s ORDER BY id",
        (owner_id,),
    )


def touch(conn: Connection, device_id: int) -> None:
    conn.execute("UPDATE devices SET last_seen_at = now() WHERE id = %s", (device_id,))


def revoke_device(conn: Connection, owner_id: int, device_id: int) -> dict[str, Any] | None:
    """Revoke the owner's device and its sessions (idempotent: an already revoked device keeps its
    first ``revoked_at``). None when the device is not the owner's."""
    with conn.transaction():
        row = conn.execute(
            """UPDATE devices SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s AND owner_id = %s
               RETURNING id AS device_id, name, revoked_at""",
            (device_id, owner_id),
        ).fetchone()
        if row is None:
            return None
        return {**row, "sessions_revoked": sessions.revoke_device_sessions(conn, [device_id])}


def rotate(conn: Connection, owner_id: int, device: str | None = None) -> Rotation:
    """Revoke the owner's live devices (or only the one named ``device``) with every session issued
    under them, and create one new device — named like the one rotated, or ``primary`` — whose
    secret is returned once. :class:`DeviceNotFound` when ``device`` names no live device."""
    with conn.transaction():
        if device is None:
            rows = conn.execute(
                "UPDATE devices SET revoked_at = now() WHERE owner_id = %s AND revoked_at IS NULL RETURNING id, name",
                (owner_id,),
            ).fetchall()
        else:
            rows = conn.execute(
                """UPDATE devices SET revoked_at = now()
                   WHERE owner_id = %s AND lower(name) = lower(%s) AND revoked_at IS NULL RETURNING id, name""",
                (owner_id, names.device_name(device)),
            ).fetchall()
            if not rows:
                raise DeviceNotFound(f"no live device named {device!r}")
        count = sessions.revoke_device_sessions(conn, [r["id"] for r in rows])
        new = create_device(conn, owner_id, rows[0]["name"] if device is not None else FIRST_DEVICE)
    return Rotation(new, sorted(r["name"] for r in rows), count)


def first_browser_device(conn: Connection, owner_id: int) -> NewDevice | None:
    """The owner's ``browser`` device, made now with its secret (returned once), or None when it
    already has one, live or revoked: the first start of ``zerg serve`` and no later one."""
    if conn.execute("SELECT 1 FROM devices WHERE owner_id = %s AND lower(name) = lower(%s)",
                    (owner_id, BROWSER_DEVICE)).fetchone():
        return None
    try:
        return create_device(conn, owner_id, BROWSER_DEVICE)
    except names.NameTaken:  # another zerg serve made it a moment ago
        return None
