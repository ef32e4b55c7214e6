"""Verified contacts (``owner_contacts``): the only addresses Zerg may email or text, and the only
senders it accepts. Every SQL statement on ``owner_contacts`` lives here; the verification rules
live in :mod:`zerg.notify.verification`.

Invariants:
- A contact belongs to one owner; every read is scoped by owner, except :func:`lock_address`,
  the service's own check of who holds an address (its answer never leaves the service), and
  :func:`sender_contact`, which finds the owner of an inbound message's verified sender.
- An address is kept as the owner wrote it (``address``: where mail goes, what the owner sees) and
  compared only by its canonical form (:func:`canonical_address`, the whole address lower-cased:
  ``Alice@Example.com`` and ``alice@example.com`` are one mailbox, as at every mainstream provider).
  The canonical form is unique per kind across all owners (``UNIQUE (kind, canonical_address)``, a
  column the database derives from ``address``), so a sender identifies at most one owner and an
  owner never holds one mailbox twice. Every lookup by address here goes through it.
- The code's hash never leaves this module and the service: owner reads return :data:`_PUBLIC`.
- An SMS contact that replied STOP (:func:`opt_out`) is no recipient until it replies START
  (:func:`opt_in`): :func:`verified_contacts` leaves it out; :func:`sender_contact` still finds it
  (its START must be heard). Only ``sms`` contacts opt out; the first STOP's time and message stay.
- Codes and wrong guesses are counted per contact in a 24-hour window (``code_sends``,
  ``code_attempts`` from ``code_window_start``): a new code within the window never gives the
  guesses back, and a code beyond ``max_sends`` is never stored (:func:`insert_pending`,
  :func:`set_code` decide it in their one statement).
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection

# A–Z only, like PostgreSQL's lower() under the "C" collation that derives the column (0018): the two
# agree on every string, and an address Zerg keeps is ASCII anyway (zerg.notify.verification.normalise).
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_PUBLIC = "id, kind, address, verified_at, created_at, code_expires_at, code_sent_at, opted_out_at"
_PRIVATE = f"{_PUBLIC}, owner_id, code_hash, code_attempts, code_sends, code_window_start"


def canonical_address(address: str) -> str:
    """What an address is compared by: the whole address with A–Z lower-cased (the domain always is
    case-insensitive; the local part is at every mainstream provider, and Zerg treats it so). A phone
    number in E.164 has no letters: it is its own canonical form. The one definition: the table's
    ``canonical_address`` column is the same function in SQL (``lower(address COLLATE "C")``)."""
    return address.translate(_ASCII_LOWER)


def lock_address(conn: Connection, kind: str, address: str) -> dict[str, Any] | None:
    """Whoever holds ``address`` (any owner), locked for this transaction. Service use only."""
    return conn.execute(f"SELECT {_PRIVATE} FROM owner_contacts WHERE kind = %s AND canonical_address = %s FOR UPDATE",
                        (kind, canonical_address(address))).fetchone()


def insert_pending(conn: Connection, owner_id: int, kind: str, address: str, code_hash: str,
                   expires_at: datetime, now: datetime) -> dict[str, Any] | None:
    """A new unverified contact with its code; None when another transaction took the address first."""
    return conn.execute(
        f"""INSERT INTO owner_contacts (owner_id, kind, address, code_hash, code_expires_at, code_attempts, code_sent_at,
                                        code_sends, code_window_start)
            VALUES (%s, %s, %s, %s, %s, 0, %s, 1, %s) ON CONFLICT (kind, canonical_address) DO NOTHING RETURNING {_PRIVATE}""",
        (owner_id, kind, address, code_hash, expires_at, now, now)).fetchone()


def set_code(conn: Connection, owner_id: int, contact_id: int, code_hash: str, expires_at: datetime,
             now: datetime, window: timedelta, max_sends: int) -> dict[str, Any] | None:
    """A fresh code for the owner's unverified contact, counted in its window; None when the
    window's ``max_sends`` codes are spent. A window that has ended starts again at ``now`` (sends
    and attempts from zero); within one, the wrong guesses already made stay spent."""
    return conn.execute(
        f"""UPDATE owner_contacts SET code_hash = %(hash)s, code_expires_at = %(expires)s, code_sent_at = %(now)s,
                   code_sends = CASE WHEN ended THEN 1 ELSE code_sends + 1 END,
                   code_attempts = CASE WHEN ended THEN 0 ELSE code_attempts END,
                   code_window_start = CASE WHEN ended THEN %(now)s ELSE code_window_start END
            FROM (SELECT code_window_start IS NULL OR code_window_start <= %(now)s - %(window)s AS ended
                  FROM owner_contacts WHERE owner_id = %(owner)s AND id = %(id)s) AS w
            WHERE owner_id = %(owner)s AND id = %(id)s AND verified_at IS NULL AND (ended OR code_sends < %(max)s)
            RETURNING {_PRIVATE}""",
        {"hash": code_hash, "expires": expires_at, "now": now, "window": window, "owner": owner_id, "id": contact_id,
         "max": max_sends}).fetchone()


def drop_unverified(conn: Connection, contact_id: int) -> None:
    """Remove an unverified contact whose code has lapsed, whoever added it: an address nobody
    proved is free for the next owner who can. Service use only."""
    conn.execute("DELETE FROM owner_contacts WHERE id = %s AND verified_at IS NULL", (contact_id,))


def clear_code(conn: Connection, owner_id: int, contact_id: int) -> None:
    """Forget a code that could not be sent: no cooldown for the next request, and its send is given
    back (nobody received it). The window's wrong guesses stay spent."""
    conn.execute("""UPDATE owner_contacts SET code_hash = NULL, code_expires_at = NULL, code_sent_at = NULL,
                           code_sends = GREATEST(code_sends - 1, 0)
                    WHERE owner_id = %s AND id = %s AND verified_at IS NULL""", (owner_id, contact_id))


def get_by_address(conn: Connection, owner_id: int, kind: str, address: str) -> dict[str, Any] | None:
    """The owner's contact of that kind and address (in any case), with its code state. Service use only."""
    return conn.execute(
        f"SELECT {_PRIVATE} FROM owner_contacts WHERE owner_id = %s AND kind = %s AND canonical_address = %s",
        (owner_id, kind, canonical_address(address))).fetchone()


def count_attempt(conn: Connection, owner_id: int, contact_id: int, max_attempts: int) -> dict[str, Any] | None:
    """Spend one verification attempt; None when all ``max_attempts`` are spent. One statement, so
    concurrent guesses cannot spend more than there are."""
    return conn.execute(
        f"""UPDATE owner_contacts SET code_attempts = code_attempts + 1
            WHERE owner_id = %s AND id = %s AND verified_at IS NULL AND code_hash IS NOT NULL AND code_attempts < %s
            RETURNING {_PRIVATE}""", (owner_id, contact_id, max_attempts)).fetchone()


def mark_verified(conn: Connection, owner_id: int, contact_id: int, now: datetime) -> dict[str, Any] | None:
    return conn.execute(
        f"""UPDATE owner_contacts SET verified_at = %s, code_hash = NULL, code_expires_at = NULL
            WHERE owner_id = %s AND id = %s AND verified_at IS NULL RETURNING {_PUBLIC}""",
        (now, owner_id, contact_id)).fetchone()


def list_contacts(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's contacts, by kind then address."""
    return conn.execute(f"SELECT {_PUBLIC} FROM owner_contacts WHERE owner_id = %s ORDER BY kind, address, id",
                        (owner_id,)).fetchall()


def get_contact(conn: Connection, owner_id: int, contact_id: int) -> dict[str, Any] | None:
    return conn.execute(f"SELECT {_PUBLIC} FROM owner_contacts WHERE owner_id = %s AND id = %s",
                        (owner_id, contact_id)).fetchone()


def sender_contact(conn: Connection, kind: str, address: str) -> dict[str, Any] | None:
    """The verified contact (any owner, with its ``owner_id``) that ``address`` is, in any case, or
    None: who an inbound message is from. ``address`` is normalised by the caller
    (:func:`zerg.notify.verification.normalise`). Inbound use only: it decides the owner."""
    return conn.execute(
        f"""SELECT {_PUBLIC}, owner_id FROM owner_contacts
            WHERE kind = %s AND canonical_address = %s AND verified_at IS NOT NULL""",
        (kind, canonical_address(address))).fetchone()


def verified_contacts(conn: Connection, owner_id: int, kind: str) -> list[dict[str, Any]]:
    """The owner's verified contacts of ``kind`` (``email`` or ``sms``) that did not opt out: the
    only recipients of a notification."""
    return conn.execute(
        f"""SELECT {_PUBLIC} FROM owner_contacts
            WHERE owner_id = %s AND kind = %s AND verified_at IS NOT NULL AND opted_out_at IS NULL ORDER BY id""",
        (owner_id, kind)).fetchall()


def opted_out_contacts(conn: Connection, owner_id: int, kind: str) -> list[dict[str, Any]]:
    """The owner's verified contacts of ``kind`` that opted out (STOP): why a send found no recipient."""
    return conn.execute(
        f"""SELECT {_PUBLIC} FROM owner_contacts
            WHERE owner_id = %s AND kind = %s AND verified_at IS NOT NULL AND opted_out_at IS NOT NULL ORDER BY id""",
        (owner_id, kind)).fetchall()


def opt_out(conn: Connection, owner_id: int, contact_id: int, inbound_id: int | None) -> dict[str, Any] | None:
    """The owner's SMS contact replied STOP (``inbound_id``: that message): nothing is texted to it
    until :func:`opt_in`. A STOP when already opted out keeps the first one's time and message.
    None when the owner has no such SMS contact."""
    return conn.execute(
        f"""UPDATE owner_contacts SET opted_out_by = CASE WHEN opted_out_at IS NULL THEN %s ELSE opted_out_by END,
                   opted_out_at = COALESCE(opted_out_at, now())
            WHERE owner_id = %s AND id = %s AND kind = 'sms' RETURNING {_PUBLIC}, opted_out_by""",
        (inbound_id, owner_id, contact_id)).fetchone()


def opt_in(conn: Connection, owner_id: int, contact_id: int) -> dict[str, Any] | None:
    """The owner's SMS contact replied START: a recipient again. None when the owner has no such SMS contact."""
    return conn.execute(
        f"""UPDATE owner_contacts SET opted_out_at = NULL, opted_out_by = NULL
            WHERE owner_id = %s AND id = %s AND kind = 'sms' RETURNING {_PUBLIC}, opted_out_by""",
        (owner_id, contact_id)).fetchone()


def remove(conn: Connection, owner_id: int, contact_id: int) -> bool:
    row = conn.execute("DELETE FROM owner_contacts WHERE owner_id = %s AND id = %s RETURNING id",
                       (owner_id, contact_id)).fetchone()
    return row is not None


def export_owner_contacts(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's contacts, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream(  # never the verification code's hash
            """SELECT id, owner_id, kind, address, verified_at, created_at, code_expires_at, code_attempts, code_sent_at,
                      code_sends, code_window_start, opted_out_at, opted_out_by
               FROM owner_contacts WHERE owner_id = %s ORDER BY id""", (owner_id,))
