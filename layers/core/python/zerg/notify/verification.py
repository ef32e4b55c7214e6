"""Adding, verifying, listing and removing the owner's contacts: the one service behind the API
(``/api/jarvis/contacts``) and ``zerg contacts``. The SQL is in :mod:`zerg.notify.contacts`.

Invariants:
- An address is checked and normalised before anything else (:func:`normalise`): email is a
  plain addr-spec (no display name, no CR/LF, ASCII, the domain lower-cased); SMS is E.164. It is
  stored as the owner wrote it and compared in any case (:func:`zerg.notify.contacts.canonical_address`):
  ``ALICE@example.com`` is the contact ``alice@example.com``, for adding, verifying, another owner's
  claim and an inbound sender alike. A code is bound to the canonical form, so it verifies whichever
  way the owner types the address.
- Adding sends a 6-digit code (``secrets.randbelow``) through
  :func:`zerg.notify.deliver.deliver_verification`. Only a salted SHA-256 of it is stored; it
  expires after :data:`CODE_TTL`; at most :data:`MAX_ATTEMPTS` guesses are counted (each one before
  it is compared, in one statement), and a new code is sent at most every :data:`RESEND_AFTER`.
- Per contact, a window of :data:`CODE_WINDOW` starts with its first code: within it at most
  :data:`MAX_CODES` codes and :data:`MAX_ATTEMPTS` wrong guesses in all (a new code never gives
  guesses back). Per owner, at most :data:`MAX_CODES_PER_OWNER` codes reach anyone in 24 hours,
  counted from the ``notifications`` rows (they outlive a removed contact) under one lock. The
  policy's daily limits apply on top and cannot raise these.
- An address another owner verified is refused; one another owner added but did not verify is
  refused while its code lives, then freed. The refusal never names or hints at that owner.
- Every read and change is the owner's own: another owner's contact is "not found".
- An SMS contact's STOP and START (:func:`zerg.notify.contacts.opt_out`, ``opt_in``) come from the number
  itself (:mod:`zerg.inbound.replies`), never from this service: the owner sees ``opted_out_at``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from zerg.notify import contacts, notifications
from zerg.notify.policy import CHANNELS
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from zerg.runtime import Runtime

CODE_TTL = timedelta(minutes=10)
MAX_ATTEMPTS = 5  # wrong guesses per contact per CODE_WINDOW, whatever number of codes were sent
RESEND_AFTER = timedelta(seconds=60)
CODE_WINDOW = timedelta(hours=24)
MAX_CODES = 5  # codes per contact per CODE_WINDOW: an owner cannot keep texting a stranger
MAX_CODES_PER_OWNER = 20  # codes per owner per 24 hours, whatever the policy's daily limits say
KINDS = CHANNELS  # a contact is where one channel reaches the owner

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = re.compile(rf"^{_ATOM}(\.{_ATOM})*$")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_E164 = re.compile(r"^\+[1-9]\d{6,14}$")


class ContactError(ValueError):
    """A refusal with its HTTP status (the CLI prints the message)."""

    status = 422
    retry_after: int | None = None


class ContactNotFound(ContactError):
    status = 404


class AddressTaken(ContactError):
    status = 409


class TooSoon(ContactError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class CodeNotSent(ContactError):
    """The daily limit (429) or the provider (503) stopped the code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Added:
    contact: dict[str, Any]  # public fields, with "verified"
    code_sent: bool  # False: it was verified already
    notification_id: int | None


def normalise(kind: str, address: str) -> str:
    """The address as stored (the case of the local part as given), or :class:`ContactError` saying
    exactly what is wrong with it."""
    if kind not in KINDS:
        raise ContactError(f"kind must be email or sms, not {kind!r}")
    text = address.strip()
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ContactError(f"the {kind} address contains a control character (a line break?)")
    if kind == "sms":
        number = re.sub(r"[\s().-]", "", text)
        if not _E164.match(number):
            raise ContactError(f"{address!r} is not a phone number in E.164 form: '+', the country code and the "
                               "number, 8 to 16 characters, e.g. +15551234567")
        return number
    if len(text) > 254:
        raise ContactError("an email address has at most 254 characters")
    if "<" in text or ">" in text or " " in text:
        raise ContactError(f"{address!r} is not a plain email address: give only the address, e.g. owner@example.com "
                           "(no display name, no spaces)")
    if not text.isascii():
        raise ContactError(f"{address!r} has non-ASCII characters: give the domain in its xn-- (punycode) form; "
                           "the part before @ must be ASCII")
    local, at, domain = text.rpartition("@")
    domain = domain.lower().rstrip(".")
    labels = domain.split(".")
    if not at or not local or len(local) > 64 or not _LOCAL.match(local):
        raise ContactError(f"{address!r} is not an email address (name@domain, e.g. owner@example.com)")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels) or labels[-1].isdigit():
        raise ContactError(f"{address!r}: {domain!r} is not a mail domain (e.g. example.com)")
    return f"{local}@{domain}"


def _hash(kind: str, address: str, code: str, salt: str | None = None) -> str:
    salt = salt or secrets.token_hex(16)
    address = contacts.canonical_address(address)
    digest = hashlib.sha256(f"{salt}:{kind}:{address}:{code}".encode()).hexdigest()
    return f"{salt}${digest}"


def _code_matches(stored: str, kind: str, address: str, code: str) -> bool:
    salt, _, _ = stored.partition("$")
    return hmac.compare_digest(stored, _hash(kind, address, code, salt))


def public(row: dict[str, Any]) -> dict[str, Any]:
    """What the owner sees of a contact (never the code's hash, attempts or owner id); ``opted_out_at``:
    when the number replied STOP (nothing is texted to it until it replies START)."""
    out = {k: row.get(k) for k in ("id", "kind", "address", "verified_at", "created_at", "code_expires_at",
                                   "opted_out_at")}
    out["verified"] = row.get("verified_at") is not None
    if out["verified"]:
        out["code_expires_at"] = None
    return out


def add(rt: "Runtime", owner_id: int, kind: str, address: str, now: datetime | None = None) -> Added:
    """Add (or refresh) an unverified contact and send it a code; a contact the owner already
    verified, written in any case, is returned as it is (its address as first written), with no code."""
    from zerg.notify.deliver import deliver_verification

    address = normalise(kind, address)
    now = now or utcnow()
    code = f"{secrets.randbelow(10**6):06d}"
    code_hash, expires = _hash(kind, address, code), now + CODE_TTL
    shown = f"{'email address' if kind == 'email' else 'number'} {address}"
    # The gate's lock is held until this code's notification row is written (deliver_verification
    # commits it on its own connection), so a concurrent add of the same owner counts it. It locks
    # no row: the send's own statements never wait on it.
    with rt.pool.connection() as gate, gate.transaction():
        owner_sent, oldest = notifications.lock_and_count_sent(gate, owner_id, "verification", now - CODE_WINDOW)
        with rt.pool.connection() as conn:
            row = contacts.lock_address(conn, kind, address)
            if row is not None and row["owner_id"] != owner_id:
                if row["verified_at"] is not None:
                    raise AddressTaken(f"the {shown} is verified by another owner; it cannot be added here")
                if row["code_expires_at"] is not None and row["code_expires_at"] > now:
                    raise AddressTaken(f"the {shown} is being verified by another owner; "
                                       f"try again after {row['code_expires_at']:%H:%M} UTC")
                contacts.drop_unverified(conn, row["id"])  # nobody proved it: free for whoever can
                row = None
            if row is not None and row["verified_at"] is not None:
                return Added(public(row), code_sent=False, notification_id=None)
            _refuse_a_code_too_many(row, owner_sent, oldest, shown, now)
            if row is None:
                row = contacts.insert_pending(conn, owner_id, kind, address, code_hash, expires, now)
                if row is None:  # another request inserted it this instant
                    raise TooSoon(f"the {shown} is being added by another request; try again in a minute",
                                  retry_after=60)
            else:
                row = contacts.set_code(conn, owner_id, row["id"], code_hash, expires, now, CODE_WINDOW, MAX_CODES)
                if row is None:  # the row is locked above: only a clock jump lands here
                    raise TooSoon(f"no more codes for the {shown} today", retry_after=int(CODE_WINDOW.total_seconds()))
        subject = "Your Zerg verification code"
        minutes = int(CODE_TTL.total_seconds() // 60)
        body = (f"Your Zerg verification code is {code}. It expires in {minutes} minutes.\n\n"
                "If you did not ask for it, ignore this message: nothing is sent to this address until it is verified."
                if kind == "email" else f"Zerg verification code: {code} (expires in {minutes} min)")
        sent = deliver_verification(rt, owner_id, row, subject=subject, body=body, code=code, now=now)
        if sent["status"] != "sent":
            with rt.pool.connection() as conn:
                contacts.clear_code(conn, owner_id, row["id"])
            status = 429 if sent["status"] == "suppressed" else 503
            raise CodeNotSent(f"the code could not be sent to the {shown}: {sent['reason']}", status)
    return Added(public(row), code_sent=True, notification_id=sent["id"])


def _refuse_a_code_too_many(row: dict[str, Any] | None, owner_sent: int, oldest: datetime | None, shown: str,
                            now: datetime) -> None:
    """:class:`TooSoon` when no code may be sent now: within a minute of the last one, past the
    contact's codes or wrong guesses of its window, or past the owner's codes of the last 24 hours
    (none of which the owner's policy can raise: they protect whoever holds the address)."""
    if row is not None and row["code_sent_at"] is not None and now - row["code_sent_at"] < RESEND_AFTER:
        wait = _seconds_until(row["code_sent_at"] + RESEND_AFTER, now)
        raise TooSoon(f"a code was sent to the {shown} less than {int(RESEND_AFTER.total_seconds())} s ago; "
                      f"ask again in {wait} s", retry_after=wait)
    window_end = row and row["code_window_start"] and row["code_window_start"] + CODE_WINDOW
    if window_end and window_end > now:
        if row["code_attempts"] >= MAX_ATTEMPTS:
            raise TooSoon(f"{MAX_ATTEMPTS} wrong codes were tried for the {shown} within 24 hours; a new code can be "
                          f"sent after {window_end:%Y-%m-%d %H:%M} UTC (in {_wait_text(window_end, now)})",
                          retry_after=_seconds_until(window_end, now))
        if row["code_sends"] >= MAX_CODES:
            raise TooSoon(f"{MAX_CODES} codes were sent to the {shown} within 24 hours; the next can be sent after "
                          f"{window_end:%Y-%m-%d %H:%M} UTC (in {_wait_text(window_end, now)})",
                          retry_after=_seconds_until(window_end, now))
    if owner_sent >= MAX_CODES_PER_OWNER and oldest is not None:
        frees = max(oldest + CODE_WINDOW, now)
        raise TooSoon(f"{MAX_CODES_PER_OWNER} verification codes were sent for you within 24 hours, the most allowed; "
                      f"the next can be sent after {frees:%Y-%m-%d %H:%M} UTC (in {_wait_text(frees, now)})",
                      retry_after=_seconds_until(frees, now))


def _seconds_until(when: datetime, now: datetime) -> int:
    return max(int((when - now).total_seconds()) + 1, 1)


def _wait_text(when: datetime, now: datetime) -> str:
    seconds = _seconds_until(when, now)
    if seconds < 120:
        return f"{seconds} s"
    hours, minutes = divmod(-(-seconds // 60), 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def verify(rt: "Runtime", owner_id: int, kind: str, address: str, code: str,
           now: datetime | None = None) -> dict[str, Any]:
    """Check ``code`` for the owner's contact; the verified contact, or a :class:`ContactError`
    saying why not (wrong code and attempts left, expired, no attempts left, no code pending)."""
    address = normalise(kind, address)
    now = now or utcnow()
    shown = f"{'email address' if kind == 'email' else 'number'} {address}"
    again = f"add it again for a new code (zerg contacts add {kind} {address})"
    code = code.strip()
    if not re.fullmatch(r"\d{6}", code):
        raise ContactError("the code is the 6 digits the verification message gave")
    with rt.pool.connection() as conn:
        row = contacts.get_by_address(conn, owner_id, kind, address)
        if row is None:
            raise ContactNotFound(f"no {kind} contact {address}; {again.replace('add it again', 'add it')}")
        if row["verified_at"] is not None:
            return public(row)
        if row["code_hash"] is None:
            raise ContactError(f"no code is pending for the {shown}: {again}")
        if row["code_expires_at"] <= now:
            raise ContactError(f"the code for the {shown} expired at {row['code_expires_at']:%H:%M} UTC: {again}")
        counted = contacts.count_attempt(conn, owner_id, row["id"], MAX_ATTEMPTS)
        if counted is None:
            raise _no_guesses_left(row, shown, now)
        if _code_matches(counted["code_hash"], kind, address, code):
            return public(contacts.mark_verified(conn, owner_id, row["id"], now))
        left = MAX_ATTEMPTS - counted["code_attempts"]
        conn.commit()  # the attempt counts even though the answer is an error
    if not left:
        raise _no_guesses_left(counted, shown, now, wrong=True)
    raise ContactError(f"wrong code for the {shown}: {left} attempt{'s' if left != 1 else ''} left")


def _no_guesses_left(row: dict[str, Any], shown: str, now: datetime, wrong: bool = False) -> TooSoon:
    """The window's guesses are spent: a new code would not help until the window ends."""
    window_end = max((row["code_window_start"] or now) + CODE_WINDOW, now)
    return TooSoon(("wrong code: no attempts left; " if wrong else "") +
                   f"{MAX_ATTEMPTS} wrong codes were tried for the {shown} within 24 hours; a new code can be sent "
                   f"after {window_end:%Y-%m-%d %H:%M} UTC (in {_wait_text(window_end, now)})",
                   retry_after=_seconds_until(window_end, now))


def list_contacts(rt: "Runtime", owner_id: int) -> list[dict[str, Any]]:
    with rt.pool.connection() as conn:
        return [public(r) for r in contacts.list_contacts(conn, owner_id)]


def remove(rt: "Runtime", owner_id: int, contact_id: int) -> None:
    with rt.pool.connection() as conn:
        if not contacts.remove(conn, owner_id, contact_id):
            raise ContactNotFound(f"contact {contact_id} not found")
