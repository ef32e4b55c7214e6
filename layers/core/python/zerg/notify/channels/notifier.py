"""Email and SMS as they are sent (the port: :class:`zerg.ports.Notifier`), through SES v2 and SNS
on AWS (:mod:`zerg.notify.channels.ses`, :mod:`~zerg.notify.channels.sns`) or the local outbox
(:mod:`zerg.notify.channels.outbox`).

Invariants:
- A notifier sends exactly what it is given to exactly the one address it is given; who may be
  addressed (the owner's verified contacts) and how often (daily limits) is decided before, once,
  by :func:`zerg.notify.deliver.deliver`.
- Every header value is made here, by :func:`header_text` inside :func:`mime_message`, the one
  builder both email implementations use: CR, LF and every other control character are flattened
  to a space and long values are cut, so a subject or a name can never add a header (no
  ``Bcc:`` smuggled in a subject). In-Reply-To and References hold only well-formed msg-ids
  (:data:`MESSAGE_ID`), folded between ids and never encoded, whatever an id's length (SES's are
  82+ characters), so every client threads an answer under the message it answers.
- An SMS longer than :data:`SMS_MAX_BYTES` is split at line, sentence or word boundaries into
  numbered parts (:func:`split_sms`), each within the limit, prefix included, and at most
  :data:`SMS_MAX_PARTS` of them (the last cut with "…"); a provider id per part comes back.
- A provider failure is :class:`NotifierError` with a short reason; nothing else escapes a send.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zerg.ports import Email, Notifier, SentEmail, Sms

if TYPE_CHECKING:
    from email.message import EmailMessage
    from email.policy import Policy


SUBJECT_MAX = 200  # characters of a Subject header, after flattening
MESSAGE_ID_MAX = 250  # characters of one Message-ID
REFERENCES_MAX = 900  # characters of a References header (RFC 5322's 998 per line, with its name)
NAME_MAX = 80  # characters of a display name
SMS_MAX_BYTES = 1600  # one SNS Publish to a phone number carries at most 1,600 bytes
SMS_MAX_PARTS = 10  # ~16,000 bytes is already more than anyone reads on a phone; it also bounds one send's cost
ELLIPSIS = "…"


@dataclass
class AwsNotifier:
    """SES v2 for email, SNS for SMS (each builds its client once, on first use)."""

    email: "Notifier"
    sms: "Notifier"

    def send_email(self, email: Email) -> SentEmail:
        return self.email.send_email(email)

    def send_sms(self, sms: Sms) -> list[str]:
        return self.sms.send_sms(sms)


# --- headers and bodies: the one place they are built ------------------------------------------

_SPACES = re.compile(r"\s+")


def header_text(value: str, limit: int = SUBJECT_MAX) -> str:
    """``value`` as one safe header line: every control or separator character (CR, LF, TAB, NUL,
    U+0085, U+2028, ...) becomes a space, runs of spaces become one, and a value longer than
    ``limit`` characters ends with an ellipsis."""
    flat = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in value)
    flat = _SPACES.sub(" ", flat).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def text_to_html(text: str) -> str:
    """The plain-text body as a minimal HTML alternative (escaped; line breaks kept)."""
    return ("<!DOCTYPE html><html><body><div style=\"font-family: sans-serif; white-space: pre-wrap\">"
            f"{html.escape(text)}</div></body></html>")


# A Message-ID as a reference: printable ASCII without spaces or angle brackets, within <...>
# (also what inbound email reads: zerg.inbound.mail_headers).
MESSAGE_ID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]{1,%d}>" % (MESSAGE_ID_MAX - 2))


def references_header(references: tuple[str, ...] | list[str], in_reply_to: str | None = None) -> str | None:
    """The References value threading an answer: ``references`` then ``in_reply_to`` (once each),
    only well-formed ``<id>`` values, within :data:`REFERENCES_MAX` characters (the first id and
    the newest ones are kept when it must be cut, as RFC 5322 suggests); None when there is none."""
    ids: list[str] = []
    for value in (*references, *([in_reply_to] if in_reply_to else [])):
        for found in MESSAGE_ID.findall(value or ""):
            if found in ids:
                ids.remove(found)  # it comes again later: the later place is its place in the thread
            ids.append(found)
    if not ids:
        return None
    kept = ids[-1:]
    for found in reversed(ids[1:-1]):  # the newest first, while the first id still fits too
        if len(" ".join([ids[0], found, *kept])) > REFERENCES_MAX:
            break
        kept.insert(0, found)
    return " ".join(ids[:1] + kept if len(ids) > 1 else kept)


def mime_message(email: Email) -> "EmailMessage":
    """The RFC 5322 message of ``email``: text plus an HTML alternative, every header through
    :func:`header_text`. Both implementations send (SES raw) or write (the outbox) exactly this."""
    from email.headerregistry import Address
    from email.message import EmailMessage
    from email.utils import formatdate

    msg = EmailMessage(policy=_policy())
    msg["Subject"] = header_text(email.subject) or "(no subject)"
    msg["From"] = Address(display_name=header_text(email.sender_name, NAME_MAX), addr_spec=header_text(email.sender))
    msg["To"] = Address(addr_spec=header_text(email.to))
    if email.reply_to:
        msg["Reply-To"] = Address(addr_spec=header_text(email.reply_to))
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    if email.message_id:
        msg["Message-ID"] = header_text(email.message_id, 250)
    in_reply_to = MESSAGE_ID.search(email.in_reply_to or "")
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to.group()
    references = references_header(email.references, email.in_reply_to)
    if references:
        msg["References"] = references
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: vacation responders stay quiet
    msg.set_content(email.text)
    msg.add_alternative(email.html if email.html is not None else text_to_html(email.text), subtype="html")
    return msg


@functools.cache
def _policy() -> "Policy":
    """Python's default policy, with In-Reply-To and References as lists of msg-ids (they are
    unstructured to it: an id longer than a folded line would be written as an RFC 2047 encoded
    word, which no client reads as a msg-id, so the answer would leave its thread)."""
    from email import policy
    from email.headerregistry import HeaderRegistry, UnstructuredHeader

    class MessageIdsHeader(UnstructuredHeader):
        """msg-id tokens (already checked against :data:`MESSAGE_ID`), folded only between ids and
        never encoded: an id too long for one line stays whole on its own (RFC 5322: at most 998)."""

        max_count = 1

        def fold(self, *, policy: "Policy") -> str:
            width = policy.max_line_length or 998
            done, line = [], f"{self.name}:"
            for n, token in enumerate(str(self).split()):
                if n and len(line) + 1 + len(token) > width:
                    done.append(line)
                    line = ""
                line += f" {token}"
            return policy.linesep.join([*done, line]) + policy.linesep

    registry = HeaderRegistry()
    for name in ("in-reply-to", "references"):
        registry.map_to_type(name, MessageIdsHeader)
    return policy.default.clone(header_factory=registry)


# --- SMS ------------------------------------------------------------------------------------------

_BREAKS = (re.compile(r"\n"), re.compile(r"(?<=[.!?])\s"), re.compile(r"\s"))


def split_sms(text: str, limit: int = SMS_MAX_BYTES, max_parts: int = SMS_MAX_PARTS) -> list[str]:
    """``text`` as one message, or as numbered parts ("(1/3) ...") of at most ``limit`` UTF-8 bytes
    each, cut at the last line break, else sentence end, else space that fits (a word longer than
    a part is cut where it must be). At most ``max_parts``: the last of a longer text is cut and
    ends with "…"."""
    text = text.strip()
    if len(text.encode()) <= limit:
        return [text]
    digits = 1
    while True:  # the prefix is sized for the real count: "(9/9) " until there are 10 parts or more
        widest = "9" * digits
        parts = _cut_sms(text, limit - len(f"({widest}/{widest}) ".encode()), max_parts)
        if len(str(len(parts))) <= digits:
            return [f"({i}/{len(parts)}) {p}" for i, p in enumerate(parts, 1)]
        digits += 1


def _cut_sms(text: str, room: int, max_parts: int) -> list[str]:
    parts: list[str] = []
    rest = text
    while rest:
        if len(rest.encode()) <= room:
            parts.append(rest)
            break
        if len(parts) == max_parts - 1:  # the last part allowed: as much as fits, then the ellipsis
            window = rest.encode()[:room - len(ELLIPSIS.encode())].decode(errors="ignore")
            parts.append(window[:_cut_at(window, _BREAKS[-1:])].rstrip() + ELLIPSIS)
            break
        window = rest.encode()[:room].decode(errors="ignore")
        cut = _cut_at(window, _BREAKS)
        parts.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return parts


def _cut_at(window: str, breaks: tuple[re.Pattern[str], ...]) -> int:
    """Where to end a part within ``window``: the last break of the first kind found past its first
    third (a part never shrinks to a sliver for a break), else the window's end."""
    return next((m.end() for pattern in breaks
                 for m in reversed(list(pattern.finditer(window))) if m.end() > len(window) // 3), len(window))
