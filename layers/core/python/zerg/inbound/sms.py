"""Inbound SMS: what two-way SMS delivers (through SNS) or the local CLI/watcher injects, as an
:class:`~zerg.inbound.messages.Inbound` for :func:`zerg.inbound.replies.receive`; and the carrier
keywords (STOP, START, HELP).

Invariants:
- The SNS envelope is AWS's and is checked as an event (:class:`zerg.handler_input.SnsRecord`: a
  bad one is :class:`~zerg.handler_input.InvalidEvent` naming the field). The message inside it is
  the sender's content: whatever it holds (not JSON, a field missing or of the wrong type, a number
  not in E.164, an empty or over-long body) the parser returns an ``Inbound`` whose ``rejection``
  says exactly what is wrong, so the message is recorded; it never raises for it.
- Every ``Inbound`` fits its row: ids, numbers and the body are bounded and cleaned as an email
  reply is (:func:`zerg.inbound.reply_text.clean_text`, :func:`~zerg.inbound.reply_text.clean_line`:
  control characters, lone surrogates, bidirectional overrides and NUL removed; line breaks kept
  in the body), so recording a refusal can never fail on its own content.
- ``provider_id`` makes a message idempotent: the SMS ``inboundMessageId``; when that is missing or
  unusable, ``sns-{MessageId}`` of the envelope (the same on every SNS retry); locally,
  ``local-{message_id}`` given by the caller (the watcher: the file's sha256, so a file seen twice is
  one message; the CLI: ``--id``, else a fresh id, so the same text sent twice on purpose is two).
- A body longer than :data:`MAX_BODY_CHARS` is refused: two-way SMS joins at most ~10 parts
  (1,530 GSM-7 or 670 UCS-2 characters), so a longer body is not a phone's reply. Its text is
  still kept in the row, up to :data:`RECORD_MAX_CHARS`.
- :func:`keyword` matches the whole message only ("stop the backup check" is a request, not STOP);
  "yes" is no keyword (it confirms a directive).
- :func:`approval_answer` matches the whole message only too: ``Y 4821`` / ``N 4821`` (also YES/NO,
  APPROVE/DENY) answers the owner's pending approval of that code (issue 27); "yes" alone stays a
  directive's confirmation. Zerg answers HELP only to a number that has not
  opted out: :func:`zerg.notify.deliver.deliver` sends nothing to an opted-out number (carriers
  answer HELP themselves).
"""

from __future__ import annotations

import json
import re
import uuid
from hashlib import sha256
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zerg.inbound.messages import Inbound
from zerg.inbound.reply_text import clean_line, clean_text

MAX_BODY_CHARS = 1600  # a reply longer than this is refused (recorded with its length)
RECORD_MAX_CHARS = 20000  # the inbound_messages.body bound: what a refused body keeps of its text
MAX_ID_CHARS = 200
REASON_MAX = 500
_ID = re.compile(r"^[A-Za-z0-9._:/+=-]{1,200}$")  # SNS, End User Messaging and outbox ids
_SHORT_CODE = re.compile(r"^\+?[0-9]{3,15}$")  # the number it was sent to: E.164 or a short code
_KEYWORDS: dict[str, Literal["stop", "start", "help"]] = {
    # the carriers' and the FCC's opt-out words (AWS's default list), whole message only
    **dict.fromkeys(("STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT", "OPT-OUT",
                     "OPT OUT"), "stop"),
    **dict.fromkeys(("START", "UNSTOP"), "start"),  # not YES: "yes" confirms a directive
    **dict.fromkeys(("HELP", "INFO"), "help"),
}
_TRAILING = " \t\n.!?,;:"
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}

HELP_TEXT = ("Zerg: alerts from your scheduled checks and answers to your replies. "
             "Reply ACK to acknowledge an alert, STOP to opt out, START to opt back in.")


class TwoWaySms(BaseModel):
    """The JSON two-way SMS publishes for each message a phone sends to our number (AWS's field names)."""

    model_config = ConfigDict(extra="ignore")
    originationNumber: str = Field(max_length=40)
    destinationNumber: str = Field(max_length=40)
    messageBody: str  # bounded once cleaned: a refusal keeps its text
    inboundMessageId: str = Field(pattern=_ID.pattern)
    messageKeyword: str | None = None
    previousPublishedMessageId: str | None = Field(default=None, pattern=_ID.pattern)


_APPROVAL_ANSWER = re.compile(r"^(Y|YES|APPROVE|N|NO|DENY)\s*#?\s*([0-9]{4})$", re.IGNORECASE)


def approval_answer(body: str) -> tuple[Literal["approve", "deny"], str] | None:
    """``("approve"|"deny", code)`` when the whole message answers an approval by its short code
    (``Y 4821``, ``n 4821``, ``approve 4821.``), else None."""
    text = " ".join(body.strip().rstrip(_TRAILING).split())
    match = _APPROVAL_ANSWER.match(text) if text.isascii() and len(text) <= 20 else None
    if match is None:
        return None
    return ("approve" if match.group(1).upper() in ("Y", "YES", "APPROVE") else "deny"), match.group(2)


def keyword(body: str) -> Literal["stop", "start", "help"] | None:
    """The carrier keyword ``body`` is, as a whole message (case-insensitive, trailing punctuation
    and spaces tolerated: "Stop." is STOP), or None."""
    text = " ".join(body.strip().rstrip(_TRAILING).split())
    if not text.isascii() or len(text) > 20:
        return None
    return _KEYWORDS.get(text.upper())


def from_sns_record(record: dict[str, Any]) -> Inbound:
    """One SNS record of two-way SMS as an :class:`Inbound` (``rejection`` set when its message is
    unusable). A record that is not an SNS notification raises :class:`~zerg.handler_input.InvalidEvent`."""
    from zerg.handler_input import SnsRecord, parse_event

    envelope = parse_event(SnsRecord, record, "SNS").Sns
    extra = {"sns_message_id": envelope.MessageId, "topic_arn": envelope.TopicArn}
    fallback_id = f"sns-{envelope.MessageId}"
    try:
        data = json.loads(envelope.Message)
    except (ValueError, RecursionError):
        return _refused("sns", fallback_id, {}, "the SNS message is not JSON (two-way SMS publishes a JSON object)", extra)
    if not isinstance(data, dict):
        return _refused("sns", fallback_id, {}, f"the SNS message is a JSON {_JSON_TYPES.get(type(data), 'value')}, "
                                                "not the two-way SMS object", extra)
    data = {k: _no_surrogates(v) if isinstance(v, str) else v for k, v in data.items()}  # pydantic refuses them
    try:
        sms = TwoWaySms.model_validate(data)
    except ValidationError as exc:
        usable = data.get("inboundMessageId")
        provider_id = usable if isinstance(usable, str) and _ID.match(usable) else fallback_id
        return _refused("sns", provider_id, data, _problems(exc), extra)
    extra["keyword"] = clean_line(sms.messageKeyword or "")[:64] or None  # the registered keyword it matched
    return _checked("sns", sms.inboundMessageId, sms.originationNumber, sms.messageBody, sms.destinationNumber,
                    sms.previousPublishedMessageId, extra)


def from_local(sender: str, text: str, *, previous_provider_id: str | None = None,
               message_id: str | None = None) -> Inbound:
    """The :class:`Inbound` of an SMS injected locally (``zerg inbound sms``, the watched directory),
    checked like one from SNS. ``message_id`` makes it idempotent (the watcher passes the file's
    sha256, the CLI its ``--id``); None: a fresh id, every call a new message."""
    if message_id is None:
        provider_id = f"local-{uuid.uuid4().hex}"
    elif not isinstance(message_id, str):
        raise TypeError(f"message_id must be a string, not {type(message_id).__name__}")  # the caller's own bug
    elif _ID.match(message_id) and len(message_id) <= MAX_ID_CHARS - len("local-"):
        provider_id = f"local-{message_id}"
    else:  # any text the caller chose, still one id per text and within the row's bound
        provider_id = f"local-sha256-{sha256(message_id.encode('utf-8', 'surrogatepass')).hexdigest()}"
    raw = {"originationNumber": sender, "messageBody": text}
    wrong = [name for name, value in (("from", sender), ("text", text)) if not isinstance(value, str)]
    if wrong or not isinstance(previous_provider_id, str | None):  # a watched JSON file may hold anything
        return _refused("local", provider_id, raw, f"{', '.join(wrong) or 'reply_to'}: not a string", {})
    if previous_provider_id is not None and not _ID.match(previous_provider_id):
        return _refused("local", provider_id, raw, "the message it answers is not a message id (letters, digits and "
                                                   f"-_.:/+=, at most {MAX_ID_CHARS})", {})
    return _checked("local", provider_id, sender, text, None, previous_provider_id, {})


def _checked(source: str, provider_id: str, sender: str, text: str, recipient: str | None, previous: str | None,
             extra: dict[str, Any]) -> Inbound:
    """The Inbound, or its refusal: the sender in E.164, the body neither empty nor over the limit."""
    from zerg.notify.verification import ContactError, normalise

    body, raw = clean_text(text), {"originationNumber": sender, "messageBody": text, "destinationNumber": recipient}
    try:
        number = normalise("sms", sender)
    except ContactError as exc:  # named as the sender gave it: the SMS field, or the CLI's and watcher's "from"
        return _refused(source, provider_id, raw, f"{'from' if source == 'local' else 'originationNumber'}: {exc}",
                        extra, previous)
    if recipient is not None and not _SHORT_CODE.match(clean_line(recipient)):
        return _refused(source, provider_id, raw, "destinationNumber: not a phone number (E.164) or short code",
                        extra, previous)
    if not body:
        return _refused(source, provider_id, raw, "the SMS has no text", extra, previous)
    if len(body) > MAX_BODY_CHARS:
        return _refused(source, provider_id, raw, f"the SMS has {len(body):,} characters; a reply has at most "
                                                  f"{MAX_BODY_CHARS:,}", extra, previous)
    return Inbound(channel="sms", provider_id=provider_id, source=source, sender=number, body=body,
                   recipient=clean_line(recipient) if recipient is not None else None, previous_provider_id=previous,
                   extra=extra)


def _refused(source: str, provider_id: str, data: dict[str, Any], reason: str, extra: dict[str, Any],
             previous: str | None = None) -> Inbound:
    """A refusal that still fits its row: what could be read of the sender, recipient and body, bounded."""
    def text(key: str, limit: int) -> str | None:
        value = data.get(key)
        return clean_line(value)[:limit] if isinstance(value, str) else None

    body = data.get("messageBody")
    return Inbound(channel="sms", provider_id=provider_id, source=source, sender=text("originationNumber", 64) or "",
                   body=clean_text(body)[:RECORD_MAX_CHARS] if isinstance(body, str) else "",
                   recipient=text("destinationNumber", 64), previous_provider_id=previous,
                   rejection=_bounded(reason), extra=extra)


def _problems(exc: ValidationError) -> str:
    """Each field of the two-way SMS object that is wrong, said plainly."""
    said = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "message"
        kind = err["type"]
        if kind == "missing":
            said.append(f"{field} is missing")
        elif kind == "string_type":
            said.append(f"{field} is not a string")
        elif kind == "string_too_long":
            said.append(f"{field} is longer than {err['ctx']['max_length']} characters")
        elif kind == "string_pattern_mismatch":
            said.append(f"{field} is not a message id (letters, digits and -_.:/+=, at most {MAX_ID_CHARS})")
        else:
            said.append(f"{field}: {err['msg']}")
    return "two-way SMS message: " + "; ".join(said)


def _no_surrogates(text: str) -> str:
    """``text`` without lone surrogates (a JSON escape can make one; no phone sends one), and
    nothing else changed: the checks still see every other character as the phone sent it."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "ignore") if not text.isascii() else text


def _bounded(reason: str) -> str:
    reason = clean_line(reason)
    return reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 1] + "…"
