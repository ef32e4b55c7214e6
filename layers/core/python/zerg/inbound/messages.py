"""The ``inbound_messages`` table: every inbound email or SMS, a row before anything acts on it.

Invariants:
- Idempotent by ``(channel, provider_id)``: the same message delivered twice is one row, and only
  the delivery that inserted it acts on it.
- A row's ``owner_id`` is set only once the sender is known to be a verified contact of that owner;
  an unknown sender's row has none (kept for the operators, never shown to an owner).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection

STATUSES = ("received", "rejected", "acknowledged", "run", "keyword", "failed")


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
    extra: dict[str, Any] = field(default_factory=dict)


def export_inbound_messages(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    yield from conn.execute("SELECT * FROM inbound_messages WHERE owner_id = %s ORDER BY id", (owner_id,))


PREVIEW_CHARS = 200  # how much of a message's body a listing shows

_LISTED = ("id, channel, source, status, reason, received_at, sender, subject, "
           f"left(body, {PREVIEW_CHARS}) AS body_preview, run_id, answers_run_id")


def list_for_owner(conn: Connection, owner_id: int, limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """The owner's inbound messages, newest first (ids below ``before_id`` when given), each body cut
    to :data:`PREVIEW_CHARS`. Rows without an owner (unknown senders) are never listed."""
    return conn.execute(
        f"""SELECT {_LISTED} FROM inbound_messages WHERE owner_id = %s AND (%s::bigint IS NULL OR id < %s)
            ORDER BY id DESC LIMIT %s""", (owner_id, before_id, before_id, limit)).fetchall()
