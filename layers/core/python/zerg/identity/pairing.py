"""One-time pairing codes: a short code the owner reads off one screen and types on a phone, which
the phone exchanges for a device secret of its own. Every SQL statement on ``pairing_codes`` lives here.

Invariants:
- A code is ``CODE_LENGTH`` characters from ``ALPHABET`` (no 0/O, 1/I/L: nothing to confuse when
  typing), about 49.5 bits: guessing one live code among an owner's at most ``MAX_LIVE`` ones at
  10,000 attempts a second for its whole life (≤ ``MAX_TTL``) succeeds with odds below 1 in 10^6.
- Only the SHA-256 of the normalised code is stored; the code itself is printed once.
- A code lives minutes (``DEFAULT_TTL``, at most ``MAX_TTL``) and is used at most once: redeeming
  is one conditional UPDATE, so two phones racing with one code get one device between them.
- A wrong, expired or already used code get the same answer (:func:`redeem` returns None); a name
  the new device cannot take leaves the code unused, so the phone can retry with another name.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from psycopg import Connection, errors

from zerg.identity import devices, names

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 10
DEFAULT_TTL = timedelta(minutes=10)
MAX_TTL = timedelta(minutes=60)
MAX_LIVE = 5  # unused, unexpired codes per owner
SHAPE = (f"a pairing code is {CODE_LENGTH} letters and digits (A-Z and 2-9, without I, L and O); "
         "dashes and spaces are ignored")


class TooManyCodes(RuntimeError):
    pass


@dataclass(frozen=True)
class PairingCode:
    code: str  # as printed: two groups of five, e.g. "KXM7P-3QHRT"
    expires_at: datetime


def normalise(typed: str) -> str | None:
    """The code as stored (upper case, no dashes or spaces), or None when it cannot be a code."""
    code = "".join(typed.split()).replace("-", "").upper()
    if len(code) != CODE_LENGTH or any(c not in ALPHABET for c in code):
        return None
    return code


def _hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def create_code(conn: Connection, owner_id: int, ttl: timedelta = DEFAULT_TTL) -> PairingCode:
    """A new code for the owner; :class:`TooManyCodes` while ``MAX_LIVE`` unused ones are alive
    (a soft cap: two operators issuing at the same instant may both pass it)."""
    if not timedelta(minutes=1) <= ttl <= MAX_TTL:
        raise ValueError(f"a pairing code lives 1-{int(MAX_TTL.total_seconds() // 60)} minutes")
    with conn.transaction():
        conn.execute("DELETE FROM pairing_codes WHERE owner_id = %s AND expires_at < now() - interval '1 day'",
                     (owner_id,))
        live = conn.execute(
            "SELECT count(*) AS n, max(expires_at) AS last FROM pairing_codes "
            "WHERE owner_id = %s AND used_at IS NULL AND expires_at > now()", (owner_id,),
        ).fetchone()
        if live["n"] >= MAX_LIVE:
            raise TooManyCodes(f"{live['n']} unused pairing codes are still alive (the last expires at "
                               f"{live['last']:%H:%M:%S} UTC); use one or wait")
        for _ in range(3):  # a collision with a stored hash is astronomically rare; retry anyway
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
            try:
                with conn.transaction():
                    row = conn.execute(
                        "INSERT INTO pairing_codes (owner_id, code_hash, expires_at) VALUES (%s, %s, now() + %s) "
                        "RETURNING expires_at", (owner_id, _hash(code), ttl),
                    ).fetchone()
                return PairingCode(f"{code[:5]}-{code[5:]}", row["expires_at"])
            except errors.UniqueViolation:
                continue
    raise RuntimeError("could not draw an unused pairing code")


def redeem(conn: Connection, code: str, device_name: str) -> devices.NewDevice | None:
    """Use the (normalised) code once: a new device of its owner named ``device_name``, or None for
    a wrong, expired or used code. :class:`names.InvalidName`/:class:`names.NameTaken` leave it unused."""
    name = names.device_name(device_name)
    with conn.transaction():
        row = conn.execute(
            """UPDATE pairing_codes SET used_at = now()
               WHERE code_hash = %s AND used_at IS NULL AND expires_at > now() RETURNING id, owner_id""",
            (_hash(code),),
        ).fetchone()
        if row is None:
            return None
        device = devices.create_device(conn, row["owner_id"], name)
        conn.execute("UPDATE pairing_codes SET device_id = %s WHERE id = %s", (device.device_id, row["id"]))
    return device
