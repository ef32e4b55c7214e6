"""Notifications (``notifications``): every email or SMS Zerg sent, held or suppressed, and why.
Every SQL statement on the table lives here.

Invariants:
- A row is written before its provider is called (status ``failed``, reason :data:`IN_FLIGHT`) and
  finished after (:func:`finish`): a crash mid-send leaves a trace, and an email's reply token is
  known before anyone can answer it. Nothing is ever sent twice for one row.
- Reads for the owner are scoped by owner and never return the reply token (a bearer credential
  for replies); the held sweep (:func:`claim_due_held`) is the system's own read.
- A claimed held row is either finished or put back (:func:`unclaim_held`): a sweep that stops
  early never leaves one marked in flight, which would lose it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from psycopg import Connection

IN_FLIGHT = "interrupted while sending (the provider's answer was never recorded)"
# reply_token is a bearer credential for replies (issue 15): never exported, never listed.
_EXPORTED = ("id, owner_id, run_id, schedule_id, contact_id, channel, purpose, severity, status, reason, address, "
             "subject, body, provider_message_id, message_id, attempt, release_at, created_at, sent_at")
_FIELDS = ("run_id", "schedule_id", "contact_id", "channel", "purpose", "severity", "status", "reason", "address",
           "subject", "body", "message_id", "reply_token", "attempt", "release_at")


def record(conn: Connection, owner_id: int, **fields: Any) -> dict[str, Any]:
    """Insert one notification row (``fields`` from :data:`_FIELDS`); returns it without the reply token."""
    unknown = set(fields) - set(_FIELDS)
    if unknown:
        raise TypeError(f"not notification fields: {sorted(unknown)}")
    names = list(fields)
    return conn.execute(
        f"INSERT INTO notifications (owner_id, {', '.join(names)}) VALUES (%s, {', '.join(['%s'] * len(names))}) "
        f"RETURNING {_EXPORTED}", (owner_id, *fields.values())).fetchone()


def finish(conn: Connection, notification_id: int, *, status: str, reason: str | None = None,
           provider_message_id: str | None = None, message_id: str | None = None) -> dict[str, Any]:
    """The outcome of a send (``sent`` or ``failed``), or of a held row (``suppressed``)."""
    return conn.execute(
        f"""UPDATE notifications SET status = %s, reason = %s,
                   provider_message_id = COALESCE(%s, provider_message_id), message_id = COALESCE(%s, message_id),
                   sent_at = CASE WHEN %s = 'sent' THEN now() ELSE sent_at END
            WHERE id = %s RETURNING {_EXPORTED}""",
        (status, reason and reason[:1000], provider_message_id, message_id, status, notification_id)).fetchone()


def claim_due_held(conn: Connection, now: datetime, limit: int) -> list[dict[str, Any]]:
    """Held rows whose ``release_at`` has passed, oldest first, locked for this transaction (a
    concurrent sweep skips them) and marked in flight; with their reply token. System read."""
    rows = conn.execute(
        """SELECT id, owner_id, contact_id, channel, purpose, severity, subject, body, reply_token, message_id,
                  run_id, schedule_id, attempt, reason
           FROM notifications WHERE status = 'held' AND release_at <= %s
           ORDER BY release_at, id LIMIT %s FOR UPDATE SKIP LOCKED""", (now, limit)).fetchall()
    if rows:
        conn.execute("UPDATE notifications SET status = 'failed', reason = %s WHERE id = ANY(%s)",
                     (IN_FLIGHT, [r["id"] for r in rows]))
    return rows


def unclaim_held(conn: Connection, rows: list[dict[str, Any]]) -> int:
    """Put claimed rows that were never sent back to ``held``, with their reason, for the next
    sweep; how many. Only rows still marked in flight: one a send finished is left as it is."""
    if not rows:
        return 0
    return conn.execute(
        """UPDATE notifications n SET status = 'held', reason = c.reason
           FROM unnest(%s::bigint[], %s::text[]) AS c(id, reason)
           WHERE n.id = c.id AND n.status = 'failed' AND n.reason = %s""",
        ([r["id"] for r in rows], [r["reason"] for r in rows], IN_FLIGHT)).rowcount


def list_for_owner(conn: Connection, owner_id: int, limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """The owner's notifications, newest first (ids below ``before_id`` when given), without reply tokens."""
    return conn.execute(
        f"""SELECT {_EXPORTED} FROM notifications WHERE owner_id = %s AND (%s::bigint IS NULL OR id < %s)
            ORDER BY id DESC LIMIT %s""", (owner_id, before_id, before_id, limit)).fetchall()


def for_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The notifications of one of the owner's runs, oldest first, without reply tokens."""
    return conn.execute(f"SELECT {_EXPORTED} FROM notifications WHERE owner_id = %s AND run_id = %s ORDER BY id",
                        (owner_id, run_id)).fetchall()


# --- what an inbound reply answers (zerg.inbound.replies): every lookup scoped by the sender's owner ---

# A notification as a reply's context needs it, without its reply token; ``sent_on``: when it went out.
_ANSWERED = f"{_EXPORTED}, COALESCE(sent_at, created_at) AS sent_on"


def get(conn: Connection, owner_id: int, notification_id: int) -> dict[str, Any] | None:
    """One of the owner's notifications, without its reply token."""
    return conn.execute(f"SELECT {_ANSWERED} FROM notifications WHERE owner_id = %s AND id = %s",
                        (owner_id, notification_id)).fetchone()


def by_reply_token(conn: Connection, owner_id: int, tokens: list[str]) -> dict[str, Any] | None:
    """The owner's email notification whose reply token is one of ``tokens`` (another owner's token
    is simply not found), without the token."""
    return conn.execute(
        f"""SELECT {_ANSWERED} FROM notifications
            WHERE owner_id = %s AND channel = 'email' AND reply_token = ANY(%s) ORDER BY id DESC LIMIT 1""",
        (owner_id, tokens)).fetchone()


def by_message_id(conn: Connection, owner_id: int, message_ids: list[str]) -> dict[str, Any] | None:
    """The owner's email notification whose Message-ID is the first of ``message_ids`` that matches
    one (In-Reply-To first, then References newest first), without its reply token."""
    return conn.execute(
        f"""SELECT {_ANSWERED} FROM notifications
            WHERE owner_id = %s AND channel = 'email' AND message_id = ANY(%s)
            ORDER BY array_position(%s::text[], message_id), id DESC LIMIT 1""",
        (owner_id, message_ids, message_ids)).fetchone()


def by_provider_message_id(conn: Connection, owner_id: int, provider_message_id: str, address: str,
                           since: datetime) -> dict[str, Any] | None:
    """The owner's SMS notification to ``address`` sent since ``since`` whose provider message id
    (an SMS's last part) is ``provider_message_id``: what a two-way SMS reply names as its previous message."""
    return conn.execute(
        f"""SELECT {_ANSWERED} FROM notifications
            WHERE owner_id = %s AND channel = 'sms' AND provider_message_id = %s AND address = %s
              AND COALESCE(sent_at, created_at) >= %s
            ORDER BY id DESC LIMIT 1""",
        (owner_id, provider_message_id, address, since)).fetchone()


def latest_sms_to(conn: Connection, owner_id: int, address: str, since: datetime) -> dict[str, Any] | None:
    """The owner's latest SMS notification sent to ``address`` since ``since``."""
    return conn.execute(
        f"""SELECT {_ANSWERED} FROM notifications
            WHERE owner_id = %s AND channel = 'sms' AND address = %s AND status = 'sent' AND sent_at >= %s
            ORDER BY sent_at DESC, id DESC LIMIT 1""",
        (owner_id, address, since)).fetchone()


def lock_and_find_answer(conn: Connection, owner_id: int, run_id: int) -> bool:
    """Whether the owner's run has an ``answer`` notification already, under a transaction-scoped
    lock on the run's answer: call it inside a transaction and send before it ends, so a concurrent
    closer of the same run sees the row this one writes (one answer per run)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('notifications:answer:' || %s, 0))", (run_id,))
    return conn.execute(
        "SELECT 1 FROM notifications WHERE owner_id = %s AND run_id = %s AND purpose = 'answer' LIMIT 1",
        (owner_id, run_id)).fetchone() is not None


def runs_answered(conn: Connection, run_ids: list[int]) -> set[int]:
    """Those of ``run_ids`` that have an ``answer`` notification (sent or not). System read (the
    inbound sweep, for reply runs whose answer a crash lost)."""
    rows = conn.execute("SELECT DISTINCT run_id FROM notifications WHERE run_id = ANY(%s) AND purpose = 'answer'",
                        (run_ids,)).fetchall()
    return {r["run_id"] for r in rows}


def export_notifications(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's notifications (without reply tokens), for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream(f"SELECT {_EXPORTED} FROM notifications WHERE owner_id = %s ORDER BY id", (owner_id,))


def lock_and_count_since(conn: Connection, owner_id: int, purpose: str, since: datetime) -> int:
    """How many notifications of ``purpose`` the owner got since ``since``, counted under a
    transaction-scoped lock on (owner, purpose): call it inside a transaction and send before it
    ends, so a concurrent caller counts the row this one writes ("once a day" notices)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('notifications:' || %s || ':' || %s, 0))",
                 (purpose, owner_id))
    return conn.execute("SELECT count(*) AS n FROM notifications WHERE owner_id = %s AND purpose = %s AND created_at >= %s",
                        (owner_id, purpose, since)).fetchone()["n"]


def lock_and_count_sent(conn: Connection, owner_id: int, purpose: str, since: datetime) -> tuple[int, datetime | None]:
    """How many notifications of ``purpose`` reached (or may have reached: a send interrupted in
    flight) the owner's addresses since ``since``, and when the oldest of them was made, under the
    same lock as :func:`lock_and_count_since`. Suppressed and failed ones reached nobody, so they do
    not count: a cap on what strangers may receive, not on tries."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('notifications:' || %s || ':' || %s, 0))",
                 (purpose, owner_id))
    row = conn.execute(
        """SELECT count(*) AS n, min(created_at) AS oldest FROM notifications
           WHERE owner_id = %s AND purpose = %s AND created_at >= %s AND (status = 'sent' OR reason = %s)""",
        (owner_id, purpose, since, IN_FLIGHT)).fetchone()
    return row["n"], row["oldest"]


def last_sent_at(conn: Connection, owner_id: int, purpose: str) -> datetime | None:
    """When the owner was last actually sent a notification of ``purpose`` (e.g. the last digest)."""
    return conn.execute("SELECT max(sent_at) AS at FROM notifications WHERE owner_id = %s AND purpose = %s AND status = 'sent'",
                        (owner_id, purpose)).fetchone()["at"]
