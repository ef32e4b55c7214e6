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
  envelope sender's domain is the From domain (or a subdomain of it, or it of that).
- ``sender`` is the single From addr-spec as contacts are stored
  (:func:`zerg.alerts.contacts_service.normalise`); several, none or an unusable one refuses.
- ``tokens`` come only from addresses Zerg received the message at (the envelope, To, Cc,
  Delivered-To): ``reply+{32 hex}@ZERG_MAIL_DOMAIN``; a token-like string anywhere else is not one.
- ``body`` is what the person wrote (:mod:`zerg.inbound.reply_text`), at most
  :data:`BODY_MAX_CHARS` characters (then a marker says how much more there was), with no control
  characters but line breaks and tabs. Every header value is one line, bounded.
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
from email.utils import getaddresses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerg.alerts.contacts_service import ContactError, normalise
from zerg.alerts.notifier import header_text
from zerg.aws_clients import LazyClient
from zerg.inbound.messages import Inbound
from zerg.inbound.reply_text import html_to_text, strip_quotes, unflow

if TYPE_CHECKING:
    from zerg.runtime import Runtime

S3_PREFIX = "inbound/email/"  # the receipt rule's S3 action: object key prefix (the key ends with SES's messageId)
BODY_MAX_CHARS = 8000
SCAN_MAX_CHARS = 400_000  # of a text part looked at for the reply (it comes first; the rest is history)
HTML_SCAN_MAX_CHARS = 300_000  # of an HTML part (html.parser: ~2.5 µs a character)
HEADER_PEEK_BYTES = 64 * 1024
MAX_PARTS = 200  # MIME parts looked at
MAX_DEPTH = 20  # multipart nesting followed
MAX_ADDRESSES = 200  # addresses per header looked at for the recipient and tokens
MAX_TOKENS = 10
MAX_REFERENCES = 20
# Python's header classes take time growing faster than a header's length (minutes for 500 KB of
# Content-Type parameters): every value is cut before one parses it, and MIME headers past these
# sizes refuse the message before the parser runs.
HEADER_MAX_CHARS = 4096
FROM_MAX_CHARS = 2048
ADDRESSES_MAX_CHARS = 16384  # To, Cc, Delivered-To
REFERENCES_MAX_CHARS = 16384
MIME_HEADER_MAX_BYTES = 2048  # one Content-* header (the parser reads every part's: ~50 µs a byte)
MIME_HEADERS_MAX_BYTES = 16 * 1024  # all of them (16 KiB of parameters: ~1.5 s)
HEADERS_MAX_BYTES = 256 * 1024  # all header sections, the message's and its parts' (~5 µs a line)
MAX_BOUNDARY_LINES = 1000  # lines starting "--": each a MIME part the parser would build
VERDICTS = ("spf", "dkim", "spam", "virus")
LABELS = {"spf": "SPF", "dkim": "DKIM", "spam": "spam", "virus": "virus", "dmarc": "DMARC"}
S3_TIMEOUT_S = 5.0

_TOKEN = re.compile(r"^(?i:reply)\+([0-9a-f]{32})@([^@\s]+)$")
_MSGID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]{1,250}>")  # printable ASCII but < and >
# \t and \n stay (\r is gone by then); lone surrogates (UTF-7 can make them) cannot be stored either
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_HEADER_SECTION = re.compile(rb"(?:\A|\n--[^\n]*\n)((?:[!-9;-~]+[ \t]*:[^\n]*\n|[ \t][^\n]*\n)*)")
_MIME_HEADER = re.compile(rb"(?im)^content-[a-z0-9-]{1,40}[ \t]*:[^\n]*(?:\n[ \t][^\n]*)*")
_RESULT = re.compile(r"\b(spf|dkim|dmarc)\s*=\s*([A-Za-z_]+)", re.IGNORECASE)

_s3 = LazyClient("s3", timeout_s=S3_TIMEOUT_S, attempts=3)


class InboundUnavailable(RuntimeError):
    """The raw message cannot be read now (S3 down, access denied): retry later; nothing recorded."""


# --- the parser ---------------------------------------------------------------------------------

def parse_email(raw: bytes, *, max_bytes: int, mail_domain: str, envelope_recipients: Iterable[str] = (),
                verdicts: dict[str, str] | None = None, provider_id: str, source: str, object_key: str | None,
                envelope_sender: str | None = None) -> Inbound:
    """``raw`` as an :class:`Inbound` (``channel="email"``), refused (``rejection``) for its size,
    broken MIME, a verdict (``verdicts``: SES's ``{"spf", "dkim", "spam", "virus"[, "dmarc"]}``;
    None = not checked), its From, or an empty reply. ``envelope_sender`` (SES: ``mail.source``)
    is checked against the From domain unless DMARC passed; None = not checked."""
    return _read(raw, max_bytes=max_bytes, mail_domain=mail_domain, envelope_recipients=list(envelope_recipients),
                 verdicts=verdicts, envelope_sender=envelope_sender, header_verdicts=False,
                 base={"channel": "email", "provider_id": provider_id, "source": source, "object_key": object_key})


def _read(raw: bytes, *, max_bytes: int, mail_domain: str, envelope_recipients: list[str],
          verdicts: dict[str, str] | None, envelope_sender: str | None, header_verdicts: bool,
          base: dict[str, Any]) -> Inbound:
    domain = mail_domain.strip().lower().rstrip(".")
    extra: dict[str, Any] = {"bytes": len(raw)}
    unread = f"message of {len(raw)} bytes exceeds the {max_bytes}-byte limit" if len(raw) > max_bytes \
        else _shape_refusal(raw)
    if unread is not None:
        try:  # who sent it and what it was, for the record: from its first headers only
            fields, _ = _header_fields(BytesHeaderParser(policy=policy.default).parsebytes(_head_of(raw)), domain,
                                       envelope_recipients)
        except Exception:
            fields = {"sender": "", **_received_fields(envelope_recipients, domain)}
        return Inbound(**base, **fields, body="", extra=extra, rejection=unread)
    try:
        msg = BytesParser(policy=policy.default).parsebytes(raw)
        fields, sender_problem = _header_fields(msg, domain, envelope_recipients)
        text, found = _text_of(msg)
        body = _bounded(strip_quotes(text)) if text is not None else ""
    except Exception as exc:  # the parser or a header class choking (deep nesting, a header it cannot take)
        return Inbound(**base, sender="", body="", extra=extra,
                       rejection=_line(f"malformed MIME: {type(exc).__name__}: {exc}", 300))
    extra.update(found)
    defects = found.get("defects") or []
    refusal = (_verdict_refusal(verdicts) if verdicts is not None else None) \
        or (_header_verdict_refusal(msg) if header_verdicts else None)
    if refusal is None and sender_problem is not None:
        refusal = f"malformed MIME: {sender_problem} ({', '.join(defects)})" if defects else sender_problem
    if refusal is None and verdicts is not None and envelope_sender is not None:
        refusal = _alignment_refusal(fields["sender"], envelope_sender, verdicts)
    if refusal is None and text is None:
        refusal = f"malformed MIME: no text part ({', '.join(defects)})" if defects else \
            "no text or HTML part to read (only attachments?)"
    if refusal is None and not body:
        refusal = "empty reply after removing quoted text"
    return Inbound(**base, **fields, body=body, rejection=refusal, extra=extra)


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


# --- headers ----------------------------------------------------------------------------------

def _raw(msg: Message, name: str) -> list[str]:
    """The values of header ``name`` as received, unfolded, uncut (no header class has parsed them)."""
    key = name.lower()
    return ["".join(str(v).splitlines()) for k, v in msg.raw_items() if k.lower() == key]


def _decoded_header(name: str, value: str) -> str:
    """``value`` (cut at :data:`HEADER_MAX_CHARS`) with its encoded words decoded; as it is if the
    header class cannot take it."""
    value = value[:HEADER_MAX_CHARS]
    try:
        return str(policy.default.header_factory(name, value))
    except Exception:
        return value


def _header(msg: Message, name: str) -> str | None:
    values = _raw(msg, name)
    return _line(_decoded_header(name, values[0]), 2000) if values else None


def _header_fields(msg: Message, domain: str, envelope_recipients: list[str]) -> tuple[dict[str, Any], str | None]:
    """sender, recipient, subject, ids and tokens of ``msg``; and what is wrong with its From, if anything."""
    sender, problem = _sender(msg)
    received_at = [*envelope_recipients[:MAX_ADDRESSES], *_addresses(msg, ("To", "Cc", "Delivered-To"))]
    ids = _MSGID.findall(" ".join(_raw(msg, "Message-ID")[:1])[:HEADER_MAX_CHARS])
    in_reply_to = _MSGID.findall(" ".join(_raw(msg, "In-Reply-To")[:1])[:HEADER_MAX_CHARS])
    references = _MSGID.findall(" ".join(_raw(msg, "References"))[-REFERENCES_MAX_CHARS:])[-MAX_REFERENCES:]
    subject = _header(msg, "Subject")
    fields = {"sender": sender, "subject": _line(subject, 998) if subject else None,
              "message_id": ids[0] if ids else None, "in_reply_to": in_reply_to[0] if in_reply_to else None,
              "references": tuple(references), **_received_fields(received_at, domain)}
    return fields, problem


def _received_fields(addresses: Iterable[str], domain: str) -> dict[str, Any]:
    """``recipient``: the first of ``addresses`` at ``domain``; ``tokens``: those of its reply addresses."""
    ours = [a for a in addresses if _domain_of(a) == domain]
    tokens = list(dict.fromkeys(t for t in (_token(a, domain) for a in ours) if t))[:MAX_TOKENS]
    return {"recipient": _line(ours[0].strip().strip("<>"), 400) if ours else None, "tokens": tuple(tokens)}


def _sender(msg: Message) -> tuple[str, str | None]:
    """The From addr-spec, normalised; or "" and why there is none to use."""
    values = _raw(msg, "From")
    if not values:
        return "", "no From address"
    if len(values) > 1:
        return "", f"{len(values)} From headers"
    if len(values[0]) > FROM_MAX_CHARS:
        return "", f"malformed From header: {len(values[0])} characters long"
    try:
        header = policy.default.header_factory("From", values[0])
        addresses, defects = list(getattr(header, "addresses", ())), [str(d) for d in header.defects]
    except Exception as exc:  # RecursionError on nested comments, a parser bug
        return "", _line(f"malformed From header: {type(exc).__name__}: {exc}", 300)
    if len(addresses) > 1:
        return "", f"{len(addresses)} From addresses"
    if not addresses or not addresses[0].addr_spec.strip("<> "):
        return "", _line(f"malformed From header: {'; '.join(defects) or 'no address in it'}", 300)
    try:
        return normalise("email", addresses[0].addr_spec), None
    except ContactError as exc:
        return "", _line(f"From address refused: {exc}", 300)


def _addresses(msg: Message, names: tuple[str, ...]) -> Iterator[str]:
    for name in names:
        for value in _raw(msg, name):
            try:
                found = getaddresses([value[:ADDRESSES_MAX_CHARS]])[:MAX_ADDRESSES]
            except Exception:  # RecursionError on nested comments: no address read from this header
                continue
            yield from (address.strip() for _, address in found if address)


def _domain_of(address: str) -> str:
    return address.strip().strip("<>").rpartition("@")[2].lower().rstrip(".")


def _token(address: str, domain: str) -> str | None:
    m = _TOKEN.match(address.strip().strip("<>"))
    return m.group(1) if m and m.group(2).lower().rstrip(".") == domain else None


# --- verdicts ---------------------------------------------------------------------------------

def _verdict_refusal(verdicts: dict[str, str]) -> str | None:
    """Why SES's verdicts refuse the message: any of :data:`VERDICTS` not PASS (or missing), DMARC FAIL."""
    for name in VERDICTS:
        value = verdicts.get(name)
        if value is None:
            return f"{LABELS[name]} verdict missing"
        if value.strip().upper() != "PASS":
            return f"{LABELS[name]} verdict {_line(value, 40).upper()}"
    if (verdicts.get("dmarc") or "").strip().upper() == "FAIL":
        return "DMARC verdict FAIL"
    return None


def _alignment_refusal(sender: str, envelope_sender: str, verdicts: dict[str, str]) -> str | None:
    """SPF vouches for the envelope sender's domain only: unless DMARC passed, it must be the From domain's."""
    if not sender or (verdicts.get("dmarc") or "").strip().upper() == "PASS":
        return None
    ours, theirs = _domain_of(sender), _domain_of(envelope_sender)
    if theirs and (theirs == ours or theirs.endswith("." + ours) or ours.endswith("." + theirs)):
        return None
    return _line(f"From domain {ours} is not the envelope sender's ({theirs or 'none'}) and DMARC did not pass", 300)


def header_verdicts(msg: Message) -> dict[str, str]:
    """The verdicts a receiving server wrote into ``msg``'s headers, as far as present: SES's
    ``X-SES-Spam-Verdict`` / ``X-SES-Virus-Verdict``, ``Received-SPF``, and the topmost
    ``Authentication-Results`` (spf=, dkim= (a pass of any signature counts), dmarc=)."""
    found: dict[str, str] = {}
    for name, header in (("spam", "X-SES-Spam-Verdict"), ("virus", "X-SES-Virus-Verdict")):
        value = _header(msg, header)
        if value:
            found[name] = value.split()[0]
    results = _header(msg, "Authentication-Results")
    for method, value in _RESULT.findall(results or ""):
        method = method.lower()
        if method not in found or (method == "dkim" and value.lower() == "pass"):
            found[method] = value
    spf = _header(msg, "Received-SPF")
    if spf and spf.split():
        found["spf"] = spf.split()[0]
    return found


def _header_verdict_refusal(msg: Message) -> str | None:
    """A local message's own verdict headers: a present one that is not pass refuses (dmarc: fail)."""
    for name, value in header_verdicts(msg).items():
        value = _line(value, 40).upper()
        if (name == "dmarc" and value == "FAIL") or (name != "dmarc" and value != "PASS"):
            return f"{LABELS[name]} verdict {value}"
    return None


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


def _line(text: str, limit: int) -> str:
    """``text`` as one header-safe line of at most ``limit`` characters; 8-bit bytes a header
    carried raw are read as UTF-8 (with replacement), never left as surrogates."""
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return header_text(text, limit)


def _bounded(text: str) -> str:
    text = _CONTROLS.sub("", text)
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
        common = ses.mail.common_headers
        sender = ""
        if len(common.from_) == 1:
            try:
                sender = normalise("email", getaddresses(common.from_)[0][1])
            except (ContactError, IndexError):
                pass
        return Inbound(**base, sender=sender, subject=_line(common.subject, 998) if common.subject else None,
                       body="", rejection=reason,
                       **_received_fields(ses.receipt.recipients, settings.mail_domain.strip().lower().rstrip(".")))

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
                       envelope_sender=ses.mail.source, provider_id=ses.mail.message_id, source="ses", object_key=key)


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
    tmp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

