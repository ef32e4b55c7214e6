"""Inbound email: a raw RFC 5322 message (from SES's S3 action, or a local ``.eml``) as an
:class:`~zerg.inbound.messages.Inbound` for :func:`zerg.inbound.replies.receive`.

Invariants:
- :func:`parse_email` never raises on bad input: a refusal is ``Inbound.rejection``, a precise
  reason, with every field that could still be read filled in (for the record). The raw message
  is never changed or deleted here.
- Size comes first: a message over ``max_bytes`` is refused from its length alone (only its first
  64 KiB of headers are looked at, for the record); on AWS the object's size is asked of S3 before
  a byte of it is downloaded, and the download reads at most ``max_bytes + 1`` bytes.
- Shape next: Python's parser and header classes are slow on some shapes (~0.5 ms a MIME part,
  ~50 µs a byte of Content-Type parameters), so a linear scan refuses more than
  :data:`MAX_BOUNDARY_LINES` parts, overlong MIME headers or header sections before the parser
  runs, and every header value is cut before a header class reads it: a hostile 10 MB message
  costs at most a few seconds of the ingress function's 29.
- Verdicts: any of SPF, DKIM, spam and virus that is not PASS refuses the message (on AWS, always;
  locally per ZERG_LOCAL_INBOUND_VERDICTS). A failed DMARC refuses it too. And because SPF and
  DKIM can pass for a domain that is not the From's (anyone can pass them for their own domain and
  write the owner's address in From), a message is refused unless DMARC passed or the SPF-checked
  envelope sender's domain is the From domain's (:func:`zerg.inbound.mail_headers.alignment_refusal`).
- ``sender``, ``tokens``, ids and subject are read by :mod:`zerg.inbound.mail_headers`: one From
  address or a refusal; tokens only from the addresses Zerg received the message at.
- ``body`` is what the person wrote (:mod:`zerg.inbound.reply_text`), at most
  :data:`BODY_MAX_CHARS` characters (then a marker says how much more there was), cleaned as an
  SMS is (:func:`~zerg.inbound.reply_text.clean_text`, before quoted history is looked for: an
  invisible mark hides no history line). Every header value is one line, bounded.
- A raw message that cannot be read *now* (S3 unreachable, access denied) raises
  :class:`InboundUnavailable`: SES invoked the function asynchronously, so Lambda retries it, and
  the message waits in S3. One that is not there is a rejection, not a retry: SES runs the rule's
  S3 action before its Lambda action and S3 reads after writes are consistent, so a retry would
  find nothing either.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from email import policy
from email.message import Message
from email.parser import BytesHeaderParser, BytesParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerg.aws_clients import LazyClient
from zerg.files import atomic_private_file
from zerg.inbound import mail_headers
from zerg.inbound.messages import Inbound
from zerg.inbound.reply_text import clean_text, html_to_text, strip_quotes, unflow

if TYPE_CHECKING:
    from zerg.runtime import Runtime

# What extra["refused_for"] names: size and MIME shape, SES's (or the headers') verdicts, the From,
# a From no check vouched for, an automatic message, no text, nothing of the person's own.
REFUSALS = ("size", "mime", "verdict", "sender", "forged", "automatic", "empty")
S3_PREFIX = "inbound/email/"  # the receipt rule's S3 action: object key prefix (the key ends with SES's messageId)
BODY_MAX_CHARS = 8000
SCAN_MAX_CHARS = 400_000  # of a text part looked at for the reply (it comes first; the rest is history)
HTML_SCAN_MAX_CHARS = 300_000  # of an HTML part (html.parser: ~2.5 µs a character)
HEADER_PEEK_BYTES = 64 * 1024
MAX_PARTS = 200  # MIME parts looked at
MAX_DEPTH = 20  # multipart nesting followed
# Python's parser reads every part's Content-Type with header classes that are slow (minutes for
# 500 KB of parameters): MIME shapes past these sizes refuse the message before the parser runs.
MIME_HEADER_MAX_BYTES = 2048  # one Content-* header (the parser reads every part's: ~50 µs a byte)
MIME_HEADERS_MAX_BYTES = 16 * 1024  # all of them (16 KiB of parameters: ~1.5 s)
HEADERS_MAX_BYTES = 256 * 1024  # all header sections, the message's and its parts' (~5 µs a line)
MAX_BOUNDARY_LINES = 1000  # lines starting "--": each a MIME part the parser would build
S3_TIMEOUT_S = 5.0

_HEADER_SECTION = re.compile(rb"(?:\A|\n--[^\n]*\n)((?:[!-9;-~]+[ \t]*:[^\n]*\n|[ \t][^\n]*\n)*)")
_MIME_HEADER = re.compile(rb"(?im)^content-[a-z0-9-]{1,40}[ \t]*:[^\n]*(?:\n[ \t][^\n]*)*")

_s3 = LazyClient("s3", timeout_s=S3_TIMEOUT_S, attempts=3)


class InboundUnavailable(RuntimeError):
    """The raw message cannot be read now (S3 down, access denied): retry later; nothing recorded."""


# --- the parser ---------------------------------------------------------------------------------

def parse_email(raw: bytes, *, max_bytes: int, mail_domain: str, envelope_recipients: Iterable[str] = (),
                verdicts: dict[str, str] | None = None, provider_id: str, source: str, object_key: str | None,
                envelope_sender: str | None = None, zerg_addresses: Iterable[str] = ()) -> Inbound:
    """``raw`` as an :class:`Inbound` (``channel="email"``), refused (``rejection``) for its size,
    broken MIME, a verdict (``verdicts``: SES's ``{"spf", "dkim", "spam", "virus"[, "dmarc"]}``;
    None = not checked), its From, being automatic, or an empty reply. ``envelope_sender`` (SES:
    ``mail.source``) is checked against the From domain unless DMARC passed; None = not checked.
    ``zerg_addresses`` (ZERG_SENDER_EMAIL) and any address at ``mail_domain`` mark quoted history.
    ``extra["refused_for"]`` says which kind of refusal it is (:data:`REFUSALS`)."""
    return _read(raw, max_bytes=max_bytes, mail_domain=mail_domain, envelope_recipients=list(envelope_recipients),
                 verdicts=verdicts, envelope_sender=envelope_sender, header_verdicts=False,
                 zerg_addresses=tuple(zerg_addresses),
                 base={"channel": "email", "provider_id": provider_id, "source": source, "object_key": object_key})


def _read(raw: bytes, *, max_bytes: int, mail_domain: str, envelope_recipients: list[str],
          verdicts: dict[str, str] | None, envelope_sender: str | None, header_verdicts: bool,
          zerg_addresses: tuple[str, ...], base: dict[str, Any]) -> Inbound:
    domain = mail_domain.strip().lower().rstrip(".")
    extra: dict[str, Any] = {"bytes": len(raw)}
    unread = f"message of {len(raw)} bytes exceeds the {max_bytes}-byte limit" if len(raw) > max_bytes \
        else _shape_refusal(raw)
    if unread is not None:
        extra["refused_for"] = "size" if len(raw) > max_bytes else "mime"
        try:  # who sent it and what it was, for the record: from its first headers only
            head = BytesHeaderParser(policy=policy.default).parsebytes(_head_of(raw))
            fields, _ = mail_headers.header_fields(head, domain, envelope_recipients)
        except Exception:
            fields = {"sender": "", **mail_headers.received_fields(envelope_recipients, domain)}
        return Inbound(**base, **fields, body="", extra=extra, rejection=unread)
    try:
        msg = BytesParser(policy=policy.default).parsebytes(raw)
        fields, sender_problem = mail_headers.header_fields(msg, domain, envelope_recipients)
        text, found = _text_of(msg)
        marks = (f"@{domain}", *(a.strip().lower() for a in zerg_addresses))
        body = _bounded(strip_quotes(clean_text(text), quoted_subject=mail_headers.quoted_subject(fields["subject"]),
                                     marks=marks)) if text is not None else ""
        automatic = mail_headers.automatic(msg)
    except Exception as exc:  # the parser or a header class choking (deep nesting, a header it cannot take)
        return Inbound(**base, sender="", body="", extra=extra | {"refused_for": "mime"},
                       rejection=mail_headers.line(f"malformed MIME: {type(exc).__name__}: {exc}", 300))
    extra.update(found)
    defects = found.get("defects") or []
    checks = (
        ("verdict", lambda: (mail_headers.verdict_refusal(verdicts) if verdicts is not None else None)
            or (mail_headers.header_verdict_refusal(msg) if header_verdicts else None)),
        ("sender", lambda: sender_problem and (
            f"malformed MIME: {sender_problem} ({', '.join(defects)})" if defects else sender_problem)),
        ("forged", lambda: mail_headers.alignment_refusal(fields["sender"], envelope_sender, verdicts)
            if verdicts is not None and envelope_sender is not None else None),
        ("automatic", lambda: automatic),
        ("mime", lambda: None if text is not None else f"malformed MIME: no text part ({', '.join(defects)})"
            if defects else "no text or HTML part to read (only attachments?)"),
        ("empty", lambda: None if body else "empty reply after removing quoted text"),
    )
    for kind, check in checks:
        refusal = check()
        if refusal:
            return Inbound(**base, **fields, body=body, rejection=refusal, extra=extra | {"refused_for": kind})
    return Inbound(**base, **fields, body=body, extra=extra)


def _shape_refusal(raw: bytes) -> str | None:
    """A message whose MIME structure would take the parser minutes: too many parts, or MIME
    headers too long (found by a linear scan, before parsing)."""
    parts = raw.count(b"\n--") + raw.startswith(b"--")
    if parts > MAX_BOUNDARY_LINES:
        return f"malformed MIME: {parts} boundary lines (at most {MAX_BOUNDARY_LINES} MIME parts are read)"
    total = 0
    for match in _MIME_HEADER.finditer(raw):
        size = len(match.group(0))
        total += size
        if size > MIME_HEADER_MAX_BYTES:
            name = match.group(0).split(b":", 1)[0].decode("ascii", "replace").strip()
            return f"malformed MIME: a {name} header of {size} bytes (at most {MIME_HEADER_MAX_BYTES})"
        if total > MIME_HEADERS_MAX_BYTES:
            return f"malformed MIME: more than {MIME_HEADERS_MAX_BYTES} bytes of Content-* headers"
    total = sum(len(match.group(1)) for match in _HEADER_SECTION.finditer(raw))
    if total > HEADERS_MAX_BYTES:
        return f"malformed MIME: {total} bytes of headers (at most {HEADERS_MAX_BYTES})"
    return None


def _head_of(raw: bytes) -> bytes:
    """The header section within the first :data:`HEADER_PEEK_BYTES` (a huge message is not parsed)."""
    head = raw[:HEADER_PEEK_BYTES]
    for sep in (b"\r\n\r\n", b"\n\n"):
        at = head.find(sep)
        if at >= 0:
            return head[:at + len(sep)]
    return head


# --- the text ---------------------------------------------------------------------------------

def _leaves(part: Message, depth: int = 0) -> Iterator[Message]:
    """The leaf parts, in order; an attached message (message/rfc822) is one leaf, not entered."""
    if part.get_content_maintype() == "message" or not part.is_multipart():
        yield part
    elif depth < MAX_DEPTH:
        for sub in part.get_payload():
            if isinstance(sub, Message):
                yield from _leaves(sub, depth + 1)


def _text_of(msg: Message) -> tuple[str | None, dict[str, Any]]:
    """The first text/plain part that is not an attachment (else the first text/html one, as
    text); None when there is neither. With what was seen: attachments, defects, the charset."""
    plain = html = None
    attachments = 0
    defects: list[str] = []
    for n, part in enumerate(_leaves(msg)):
        if n >= MAX_PARTS:
            break
        defects.extend(type(d).__name__ for d in part.defects)
        ctype = part.get_content_type()
        if part.is_attachment() or part.get_filename() or ctype not in ("text/plain", "text/html"):
            attachments += 1
            continue
        if ctype == "text/plain" and plain is None:
            text = _decoded(part)
            plain = (text, part) if text.strip() else plain
        elif ctype == "text/html" and html is None:
            html = (_decoded(part), part)
    defects = list(dict.fromkeys([*(type(d).__name__ for d in msg.defects), *defects]))[:10]
    found: dict[str, Any] = {"attachments": attachments, "defects": defects}
    if plain is not None:
        text, part = plain
        text = text[:SCAN_MAX_CHARS].replace("\r\n", "\n").replace("\r", "\n")
        if (part.get_param("format") or "").lower() == "flowed":
            text = unflow(text, delsp=(part.get_param("delsp") or "").lower() == "yes")
        return text, {**found, "part": "text/plain", "charset": part.get_content_charset()}
    if html is not None:
        text, part = html
        return html_to_text(text[:HTML_SCAN_MAX_CHARS]), {**found, "part": "text/html", "charset": part.get_content_charset()}
    return None, found


def _decoded(part: Message) -> str:
    """A text part's content in its declared charset; undeclared: UTF-8, else Windows-1252; an
    unknown or broken charset is read with replacement characters, never an error."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(payload or "").encode("utf-8", "replace")
    charset = part.get_content_charset()
    if charset in ("us-ascii", "ascii"):  # 8-bit text labelled ASCII is UTF-8 in practice (a superset)
        charset = "utf-8"
    if charset:
        try:
            return payload.decode(charset, errors="replace")
        except Exception:  # an unknown name, or a codec that is not a text encoding (base64, zlib)
            pass
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload.decode("cp1252" if not charset else "utf-8", errors="replace")


def _bounded(text: str) -> str:
    if len(text) <= BODY_MAX_CHARS:
        return text
    return f"{text[:BODY_MAX_CHARS].rstrip()}\n[… {len(text) - BODY_MAX_CHARS} more characters not read]"


# --- where the raw message comes from ---------------------------------------------------------

def from_ses_record(rt: "Runtime", record: dict[str, Any], *, s3: Any = None) -> Inbound:
    """One record of SES's Lambda event as an :class:`Inbound`: the raw message is read from
    ``s3://{ZERG_ARTIFACT_BUCKET}/inbound/email/{messageId}`` (its size asked first), checked
    against the receipt's verdicts. A bad record raises :class:`~zerg.handler_input.InvalidEvent`;
    S3 failing raises :class:`InboundUnavailable`. ``s3``: a client (tests); else one built once."""
    from botocore.exceptions import BotoCoreError, ClientError

    from zerg.handler_input import SesRecord, parse_event

    ses = parse_event(SesRecord, record, "SES").ses
    settings = rt.settings
    if not settings.artifact_bucket:
        raise InboundUnavailable("ZERG_ARTIFACT_BUCKET is not set: the raw message cannot be read")
    bucket, key = settings.artifact_bucket, S3_PREFIX + ses.mail.message_id
    client = s3 if s3 is not None else _s3.get()
    base = {"channel": "email", "provider_id": ses.mail.message_id, "source": "ses", "object_key": key}

    def unread(reason: str) -> Inbound:  # what SES's event itself says, for the record
        common, domain = ses.mail.common_headers, settings.mail_domain.strip().lower().rstrip(".")
        sender = mail_headers.sender_from(common.from_)[0]
        verdicts = ses.receipt.verdicts()  # an unauthenticated From must not show its subject to that owner
        reason = (mail_headers.verdict_refusal(verdicts) or mail_headers.alignment_refusal(sender, ses.mail.source, verdicts)
                  or reason)
        return Inbound(**base, sender=sender, body="", rejection=reason,
                       subject=mail_headers.line(common.subject, 998) if common.subject else None,
                       **mail_headers.received_fields(ses.receipt.recipients, domain))

    try:
        size = int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        if size > settings.inbound_max_bytes:
            return unread(f"message of {size} bytes exceeds the {settings.inbound_max_bytes}-byte limit")
        raw = client.get_object(Bucket=bucket, Key=key)["Body"].read(settings.inbound_max_bytes + 1)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchKey", "NotFound"):
            return unread(f"raw message not found at s3://{bucket}/{key}")
        raise InboundUnavailable(f"S3 refused reading s3://{bucket}/{key}: {code}") from exc
    except BotoCoreError as exc:
        raise InboundUnavailable(f"S3 unreachable reading s3://{bucket}/{key}: {exc}") from exc
    return parse_email(raw, max_bytes=settings.inbound_max_bytes, mail_domain=settings.mail_domain,
                       envelope_recipients=ses.receipt.recipients, verdicts=ses.receipt.verdicts(),
                       envelope_sender=ses.mail.source, provider_id=ses.mail.message_id, source="ses", object_key=key,
                       zerg_addresses=(settings.sender_email,))


def from_local_file(rt: "Runtime", raw: bytes) -> Inbound:
    """A local ``.eml`` (``zerg inbound email FILE``, or a file dropped in the inbound directory) as
    an :class:`Inbound`: a copy kept at ``{inbound_root}/email/{sha256}.eml`` (0600 in a 0700
    directory; written once), ``provider_id`` ``local-{sha256}``; with ZERG_LOCAL_INBOUND_VERDICTS
    ``headers``, a failing verdict header in the message refuses it (an absent one is not checked)."""
    settings = rt.settings
    digest = hashlib.sha256(raw).hexdigest()
    path = keep_copy(settings.inbound_root / "email", f"{digest}.eml", raw)
    return _read(raw, max_bytes=settings.inbound_max_bytes, mail_domain=settings.mail_domain, envelope_recipients=[],
                 verdicts=None, envelope_sender=None, header_verdicts=settings.local_inbound_verdicts == "headers",
                 zerg_addresses=(settings.sender_email,),
                 base={"channel": "email", "provider_id": f"local-{digest}", "source": "local", "object_key": str(path)})


def keep_copy(directory: Path, name: str, raw: bytes) -> Path:
    """``raw`` at ``directory/name`` unless a file is already there: written to a temporary name,
    then renamed, so a crash never leaves a partial copy under the final name."""
    for folder in (directory.parent, directory):
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    path = directory / name
    if path.exists():
        return path
    with atomic_private_file(path, directory / f".{name}.{secrets.token_hex(4)}.tmp") as f:
        f.write(raw)
    return path
