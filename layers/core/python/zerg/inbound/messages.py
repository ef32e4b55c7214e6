"""The ``inbound_messages`` table: every inbound email or SMS, a row before anything acts on it.
Every SQL statement on the table lives here; what the rows mean is :mod:`zerg.inbound.replies`.

Invariants:
- Idempotent by ``(channel, provider_id)``: the same message delivered twice is one row, and only
  the delivery that inserted it acts on it (or, once it is stale, whoever locks it: :func:`lock`).
  The same email under another provider id (a replay, a resend) is a second row, which its owner's
  Message-ID refuses (:func:`lock_and_find_message_id`).
- A row's ``owner_id`` is set only once the sender is known to be a verified contact of that owner
  (and for a parser's refusal, only one about the message itself, never a verdict or forgery
  refusal: :data:`zerg.inbound.replies.OWNER_SEES`); an unknown sender's or a forgery's row has
  none: kept for the operators, never shown to an owner, deleted after 30 days
  (:func:`delete_ownerless`, from the inbound sweep).
- What a parser hands over is stored bounded and as text PostgreSQL accepts (:func:`clean`: no NUL,
  no lone surrogate, within every column's limit): hostile input can make a row say less, never
  fail its insert.
- The row keeps everything :mod:`zerg.inbound.replies` decides on (:func:`inbound_of`), so a row
  left ``received`` by a crash is processed again from the row alone. Its reply tokens (bearer
  credentials for replies) are read by the system only: owner reads and exports leave them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection

STATUSES = ("received", "rejected", "acknowledged", "run", "keyword", "approval", "failed")
HANDLED = ("run", "acknowledged", "keyword", "approval")  # outcomes that took the message (a file goes to processed/, exit 0)

# What an owner may read of a row (never its reply tokens).
_PUBLIC = ("id, channel, provider_id, source, owner_id, sender, recipient, subject, body, message_id, "
           "references_ids, in_reply_to, previous_provider_id, object_key, notification_id, answers_run_id, run_id, "
           "status, reason, received_at, updated_at")
# The system's own reads: all of it, and how long since the row last changed (the database's clock).
_ROW = f"{_PUBLIC}, reply_tokens, extract(epoch FROM now() - updated_at) AS idle_s"

_LIMITS = {"sender": 400, "recipient": 400, "subject": 1000, "body": 20000, "message_id": 1000,
           "in_reply_to": 1000, "previous_provider_id": 300, "reason": 1000}
REFERENCES_MAX = 8000
TOKENS_MAX = 20
TOKEN_MAX = 100
TRUNCATED = " [...]"


@dataclass(frozen=True)
class Inbound:
    """What a parser (:mod:`zerg.inbound.email`, :mod:`zerg.inbound.sms`) hands to
    :mod:`zerg.inbound.replies`: already bounded and decoded, not yet trusted."""

    channel: str  # email | sms
    provider_id: str  # SES messageId, SMS inboundMessageId, or sha256 of a local file
    source: str  # ses | sns | local
    sender: str  # the From address (lower-cased) or the originating number (E.164)
    body: str  # the reply as read: text part, quotes and signature stripped
    recipient: str | None = None  # the address or number it was sent to
    subject: str | None = None
    message_id: str | None = None  # email: Message-ID
    in_reply_to: str | None = None  # email: In-Reply-To
    references: tuple[str, ...] = ()  # email: References (Message-IDs)
    tokens: tuple[str, ...] = ()  # email: reply tokens of the plus-addresses it was sent to
    previous_provider_id: str | None = None  # SMS: previousPublishedMessageId
    object_key: str | None = None  # where the raw message is kept
    rejection: str | None = None  # the parser's reason to refuse it (size, MIME, verdicts), if any
    # What the parser saw (bytes, part, charset, attachments, defects, keyword, ...): not stored;
    # the outcome's log line carries it (zerg.inbound.replies), so an operator sees why a refusal.
    extra: dict[str, Any] = field(default_factory=dict)


def clean(value: str | None, limit: int | None = None) -> str | None:
    """``value`` as PostgreSQL text within ``limit`` characters (cut with a marker): NUL and lone
    surrogates (a utf-7 or unicode_escape part decodes to one; UTF-8 cannot carry it) removed."""
    if value is None:
        return None
    value = str(value).replace("\x00", "")
    if not value.isascii():
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "ignore")
    if limit is not None and len(value) > limit:
        value = value[: limit - len(TRUNCATED)] + TRUNCATED
    return value


def _references(ids: tuple[str, ...]) -> str | None:
    """The References as stored: space-separated, the newest kept when they do not all fit."""
    kept: list[str] = []
    size = 0
    for value in reversed([clean(i) or "" for i in ids]):
        value = value.strip()
        if not value or " " in value or len(value) > _LIMITS["message_id"]:
            continue
        if size + len(value) + 1 > REFERENCES_MAX:
            break
        kept.insert(0, value)
        size += len(value) + 1
    return " ".join(kept) or None


def insert(conn: Connection, inbound: Inbound, provider_id: str, *, status: str = "received",
           reason: str | None = None, owner_id: int | None = None) -> dict[str, Any] | None:
    """The new row of ``inbound`` (its ``provider_id`` as the caller made it fit), or None when
    that message has a row already (a duplicate delivery: nothing is written). ``owner_id``: only
    for a row final at its insert whose sender is that owner's verified contact."""
    values = {name: clean(getattr(inbound, name), limit) for name, limit in _LIMITS.items() if name != "reason"}
    tokens = [t for t in (clean(t) for t in inbound.tokens) if t and len(t) <= TOKEN_MAX][:TOKENS_MAX]
    return conn.execute(
        f"""INSERT INTO inbound_messages (channel, provider_id, source, sender, recipient, subject, body, message_id,
                                          in_reply_to, references_ids, reply_tokens, previous_provider_id, object_key,
                                          status, reason, owner_id)
            VALUES (%(channel)s, %(provider_id)s, %(source)s, %(sender)s, %(recipient)s, %(subject)s, %(body)s,
                    %(message_id)s, %(in_reply_to)s, %(references)s, %(tokens)s, %(previous_provider_id)s,
                    %(object_key)s, %(status)s, %(reason)s, %(owner_id)s)
            ON CONFLICT (channel, provider_id) DO NOTHING RETURNING {_ROW}""",
        {**values, "channel": inbound.channel, "provider_id": provider_id, "source": inbound.source,
         "body": values["body"] or "", "references": _references(inbound.references), "tokens": tokens,
         "object_key": clean(inbound.object_key), "status": status, "reason": clean(reason, _LIMITS["reason"]),
         "owner_id": owner_id},
    ).fetchone()


def inbound_of(row: dict[str, Any]) -> Inbound:
    """The :class:`Inbound` a row was made from, as far as deciding on it needs (no parser rejection:
    a rejected message's row is final at its insert)."""
    return Inbound(
        channel=row["channel"], provider_id=row["provider_id"], source=row["source"], sender=row["sender"] or "",
        body=row["body"], recipient=row["recipient"], subject=row["subject"], message_id=row["message_id"],
        in_reply_to=row["in_reply_to"], references=tuple((row["references_ids"] or "").split()),
        tokens=tuple(row["reply_tokens"] or ()), previous_provider_id=row["previous_provider_id"],
        object_key=row["object_key"])


def get_by_provider(conn: Connection, channel: str, provider_id: str) -> dict[str, Any] | None:
    """The row of a delivered message, for its deliverer (a duplicate delivery). System read."""
    return conn.execute(f"SELECT {_ROW} FROM inbound_messages WHERE channel = %s AND provider_id = %s",
                        (channel, provider_id)).fetchone()


def lock(conn: Connection, inbound_id: int, *, wait: bool = True) -> dict[str, Any] | None:
    """The row, locked for this transaction: whoever holds it is the one acting on it. ``wait=False``:
    None at once when another transaction holds it. System read."""
    skip = "" if wait else " SKIP LOCKED"
    return conn.execute(f"SELECT {_ROW} FROM inbound_messages WHERE id = %s FOR UPDATE{skip}", (inbound_id,)).fetchone()


def finish(conn: Connection, inbound_id: int, status: str, reason: str | None = None, *, owner_id: int | None = None,
           notification_id: int | None = None, answers_run_id: int | None = None,
           run_id: int | None = None) -> dict[str, Any]:
    """Record what became of a ``received`` row (its owner, what it answers, the run it started)."""
    if status not in STATUSES or status == "received":
        raise ValueError(f"not a final inbound status: {status!r}")
    return conn.execute(
        f"""UPDATE inbound_messages SET status = %s, reason = %s, owner_id = COALESCE(%s, owner_id),
                   notification_id = %s, answers_run_id = %s, run_id = %s, updated_at = now()
            WHERE id = %s RETURNING {_ROW}""",
        (status, clean(reason, _LIMITS["reason"]), owner_id, notification_id, answers_run_id, run_id, inbound_id),
    ).fetchone()


def lock_and_find_message_id(conn: Connection, owner_id: int, message_id: str, inbound_id: int) -> dict[str, Any] | None:
    """The owner's earliest email row other than ``inbound_id`` with this Message-ID that was not
    rejected (the same mail delivered again under another provider id: a replay or an MTA's
    resend), under a transaction-scoped lock on (owner, Message-ID): call it inside the transaction
    that decides on ``inbound_id``, so of two such rows decided at once the second sees the first.
    Id and status only. System read."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('inbound_messages:message_id:' || %s || ':' || %s, 0))",
                 (owner_id, message_id))
    return conn.execute(
        """SELECT id, status FROM inbound_messages
           WHERE owner_id = %s AND channel = 'email' AND message_id = %s AND status <> 'rejected' AND id <> %s
           ORDER BY id LIMIT 1""", (owner_id, message_id, inbound_id)).fetchone()


def stale(conn: Connection, older_than_s: float, unstarted_run_ids: list[int], limit: int = 100) -> list[dict[str, Any]]:
    """Rows whose processing a crash cut short, unchanged for ``older_than_s``: still ``received``,
    or ``run`` with one of ``unstarted_run_ids`` (runs never started:
    :func:`zerg.runs.store.never_started`). Oldest first; id and status only. System read (the
    recovery sweep)."""
    return conn.execute(
        """(SELECT id, status, received_at FROM inbound_messages
            WHERE status = 'received' AND updated_at < now() - make_interval(secs => %(age)s)
            ORDER BY received_at LIMIT %(limit)s)
           UNION ALL
           (SELECT id, status, received_at FROM inbound_messages
            WHERE status = 'run' AND run_id = ANY(%(runs)s) AND updated_at < now() - make_interval(secs => %(age)s)
            ORDER BY received_at LIMIT %(limit)s)
           ORDER BY received_at""",
        {"age": older_than_s, "runs": unstarted_run_ids, "limit": limit},
    ).fetchall()


def delete_ownerless(conn: Connection, older_than_days: int, limit: int = 1000) -> int:
    """Delete rows without an owner (unknown senders, forgeries) received more than
    ``older_than_days`` ago, at most ``limit`` of them, oldest first; how many. The raw messages
    they name are not touched (S3 expires ``inbound/`` by its own lifecycle rule)."""
    return conn.execute(
        """DELETE FROM inbound_messages WHERE id IN (
               SELECT id FROM inbound_messages WHERE owner_id IS NULL AND received_at < now() - make_interval(days => %s)
               ORDER BY received_at LIMIT %s)""", (older_than_days, limit)).rowcount


def for_run(conn: Connection, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The owner's inbound message that started ``run_id`` (a reply's run), without reply tokens."""
    return conn.execute(f"SELECT {_PUBLIC} FROM inbound_messages WHERE owner_id = %s AND run_id = %s",
                        (owner_id, run_id)).fetchone()


def export_inbound_messages(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's inbound messages, for ``zerg owners export`` (without reply tokens)."""
    with conn.cursor() as cur:
        yield from cur.stream(f"SELECT {_PUBLIC} FROM inbound_messages WHERE owner_id = %s ORDER BY id", (owner_id,))


PREVIEW_CHARS = 200  # how much of a message's body a listing shows

_LISTED = ("id, channel, source, status, reason, received_at, sender, subject, "
           f"left(body, {PREVIEW_CHARS}) AS body_preview, run_id, answers_run_id")


def list_for_owner(conn: Connection, owner_id: int, limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """The owner's inbound messages, newest first (ids below ``before_id`` when given), each body cut
    to :data:`PREVIEW_CHARS`. Rows without an owner (unknown senders) are never listed."""
    return conn.execute(
        f"""SELECT {_LISTED} FROM inbound_messages WHERE owner_id = %s AND (%s::bigint IS NULL OR id < %s)
            ORDER BY id DESC LIMIT %s""", (owner_id, before_id, before_id, limit)).fetchall()
