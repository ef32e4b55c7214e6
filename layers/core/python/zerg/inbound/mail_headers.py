"""What an inbound email's headers say: who sent it, which reply addresses it reached, which
thread it continues, what the receiving server checked; read without trusting any of it.

Invariants:
- Every value is read from the raw header, cut to a bound, then (only if needed) decoded by a
  header class: Python's header classes take time growing with a value's length and recurse on
  nested comments, so nothing unbounded reaches them, and their errors are caught here.
- Every string handed on is one line (:func:`line`: no CR, LF or other control character), valid
  UTF-8 (8-bit bytes a header carried raw are read as UTF-8 with replacement, never surrogates).
- ``sender`` is the single From addr-spec as contacts are stored
  (:func:`zerg.notify.verification.normalise`); several, none or an unusable one is a problem.
- A reply token is ``reply+{32 hex}@{mail_domain}`` among the addresses the message was received
  at (envelope, To, Cc, Delivered-To), nothing else.
- Verdicts: SES's four must be PASS, DMARC must not FAIL; unless DMARC passed, the SPF-checked
  envelope sender's domain must be the From domain or a parent of it (never a subdomain of it:
  a provider handing out subdomains would let one customer pass SPF as another's address).
- An automatic message (Auto-Submitted other than ``no``, Precedence bulk/junk/list/auto_reply,
  X-Autoreply/X-Autorespond, a delivery report) is named as such: an out-of-office must not
  start a run, nor answer Zerg's answer in a loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from email import policy
from email.message import Message
from email.utils import getaddresses
from typing import Any

from zerg.notify.channels.notifier import MESSAGE_ID, header_text
from zerg.notify.verification import ContactError, normalise

HEADER_MAX_CHARS = 4096  # of one value a header class reads
FROM_MAX_CHARS = 2048
ADDRESSES_MAX_CHARS = 16384  # of To, Cc, Delivered-To
REFERENCES_MAX_CHARS = 16384
MAX_ADDRESSES = 200  # per header, looked at for the recipient and tokens
MAX_TOKENS = 10
MAX_REFERENCES = 20
VERDICTS = ("spf", "dkim", "spam", "virus")
LABELS = {"spf": "SPF", "dkim": "DKIM", "spam": "spam", "virus": "virus", "dmarc": "DMARC"}

_TOKEN = re.compile(r"^(?i:reply)\+([0-9a-f]{32})@([^@\s]+)$")
_MSGID = MESSAGE_ID  # one bound for the ids read here and the ones an answer's headers carry
_RESULT = re.compile(r"\b(spf|dkim|dmarc)\s*=\s*([A-Za-z_]+)", re.IGNORECASE)


# --- who, to which reply address, in which thread ---------------------------------------------

def raw_values(msg: Message, name: str) -> list[str]:
    """The values of header ``name`` as received, unfolded, uncut (no header class has parsed them)."""
    key = name.lower()
    return ["".join(str(v).splitlines()) for k, v in msg.raw_items() if k.lower() == key]


def decoded(name: str, value: str) -> str:
    """``value`` (cut at :data:`HEADER_MAX_CHARS`) with its encoded words decoded; as it is if the
    header class cannot take it."""
    value = value[:HEADER_MAX_CHARS]
    try:
        return str(policy.default.header_factory(name, value))
    except Exception:
        return value


def header(msg: Message, name: str) -> str | None:
    values = raw_values(msg, name)
    return line(decoded(name, values[0]), 2000) if values else None


def header_fields(msg: Message, domain: str, envelope_recipients: list[str]) -> tuple[dict[str, Any], str | None]:
    """sender, recipient, subject, ids and tokens of ``msg``; and what is wrong with its From, if anything."""
    sender, problem = sender_of(msg)
    received_at = [*envelope_recipients[:MAX_ADDRESSES], *addresses_in(msg, ("To", "Cc", "Delivered-To"))]
    ids = _ids(msg, "Message-ID", first=True)
    in_reply_to = _ids(msg, "In-Reply-To", first=True)
    references = _ids(msg, "References")[-MAX_REFERENCES:]
    subject = header(msg, "Subject")
    fields = {"sender": sender, "subject": line(subject, 998) if subject else None,
              "message_id": ids[0] if ids else None, "in_reply_to": in_reply_to[0] if in_reply_to else None,
              "references": tuple(references), **received_fields(received_at, domain)}
    return fields, problem


_REPLY_PREFIX = re.compile(r"^\s*(?:(?:re|aw|sv|vs|antw|antwort|odp|ynt|yanıt|r|rif|réf|ref|tr|wg|fw|fwd|rv|enc|res|"
                           r"vá|atb|отв|ответ|відп|回复|答复|回覆|答覆|返信|转发|転送)(?:\[\d+\])?\s?[:：]\s*)+",
                           re.IGNORECASE)


def quoted_subject(subject: str | None) -> str | None:
    """The subject a reply answers: its own with "Re: " (in any of the usual languages) removed;
    None when it has no such prefix (then it is no quote of anything)."""
    found = _REPLY_PREFIX.match(subject or "")
    rest = (subject or "")[found.end():].strip() if found else ""
    return rest or None


def _ids(msg: Message, name: str, *, first: bool = False) -> list[str]:
    """The ``<id>``s of header ``name`` (of its first occurrence only with ``first``); a value a
    sender wrote as RFC 2047 encoded words (Python does, for a long id) is decoded first."""
    values = raw_values(msg, name)[:1] if first else raw_values(msg, name)
    text = " ".join(values)[-REFERENCES_MAX_CHARS:]
    if "=?" in text:
        text = decoded(name, text[-HEADER_MAX_CHARS:])
    return _MSGID.findall(text)


def received_fields(addresses: Iterable[str], domain: str) -> dict[str, Any]:
    """``recipient``: the first of ``addresses`` at ``domain``; ``tokens``: those of its reply addresses."""
    ours = [a for a in addresses if domain_of(a) == domain]
    tokens = list(dict.fromkeys(t for t in (token_of(a, domain) for a in ours) if t))[:MAX_TOKENS]
    return {"recipient": line(ours[0].strip().strip("<>"), 400) if ours else None, "tokens": tuple(tokens)}


def sender_of(msg: Message) -> tuple[str, str | None]:
    """The From addr-spec, normalised; or "" and why there is none to use."""
    return sender_from(raw_values(msg, "From"))


def sender_from(values: list[str]) -> tuple[str, str | None]:
    """:func:`sender_of` for the raw values of the From headers (e.g. SES's ``commonHeaders.from``)."""
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
        return "", line(f"malformed From header: {type(exc).__name__}: {exc}", 300)
    if len(addresses) > 1:
        return "", f"{len(addresses)} From addresses"
    if not addresses or not addresses[0].addr_spec.strip("<> "):
        return "", line(f"malformed From header: {'; '.join(defects) or 'no address in it'}", 300)
    try:
        return normalise("email", addresses[0].addr_spec), None
    except ContactError as exc:
        return "", line(f"From address refused: {exc}", 300)


def addresses_in(msg: Message, names: tuple[str, ...]) -> Iterator[str]:
    for name in names:
        for value in raw_values(msg, name):
            try:
                found = getaddresses([value[:ADDRESSES_MAX_CHARS]])[:MAX_ADDRESSES]
            except Exception:  # RecursionError on nested comments: no address read from this header
                continue
            yield from (address.strip() for _, address in found if address)


def domain_of(address: str) -> str:
    return address.strip().strip("<>").rpartition("@")[2].lower().rstrip(".")


def token_of(address: str, domain: str) -> str | None:
    m = _TOKEN.match(address.strip().strip("<>"))
    return m.group(1) if m and m.group(2).lower().rstrip(".") == domain else None


# --- verdicts ---------------------------------------------------------------------------------

def verdict_refusal(verdicts: dict[str, str]) -> str | None:
    """Why SES's verdicts refuse the message: any of :data:`VERDICTS` not PASS (or missing), DMARC FAIL."""
    for name in VERDICTS:
        value = verdicts.get(name)
        if value is None:
            return f"{LABELS[name]} verdict missing"
        if value.strip().upper() != "PASS":
            return f"{LABELS[name]} verdict {line(value, 40).upper()}"
    if (verdicts.get("dmarc") or "").strip().upper() == "FAIL":
        return "DMARC verdict FAIL"
    return None


def alignment_refusal(sender: str, envelope_sender: str, verdicts: dict[str, str]) -> str | None:
    """SPF vouches for the envelope sender's domain only: unless DMARC passed, it must be the From domain's."""
    if not sender or (verdicts.get("dmarc") or "").strip().upper() == "PASS":
        return None
    ours, theirs = domain_of(sender), domain_of(envelope_sender)
    if theirs and (theirs == ours or ours.endswith("." + theirs)):  # the From domain or a parent of it
        return None
    return line(f"From domain {ours} is not the envelope sender's ({theirs or 'none'}) and DMARC did not pass", 300)


def header_verdicts(msg: Message) -> dict[str, str]:
    """The verdicts a receiving server wrote into ``msg``'s headers, as far as present: SES's
    ``X-SES-Spam-Verdict`` / ``X-SES-Virus-Verdict``, ``Received-SPF``, and the topmost
    ``Authentication-Results`` (spf=, dkim= (a pass of any signature counts), dmarc=)."""
    found: dict[str, str] = {}
    for name, field in (("spam", "X-SES-Spam-Verdict"), ("virus", "X-SES-Virus-Verdict")):
        value = header(msg, field)
        if value:
            found[name] = value.split()[0]
    results = header(msg, "Authentication-Results")
    for method, value in _RESULT.findall(results or ""):
        method = method.lower()
        if method not in found or (method == "dkim" and value.lower() == "pass"):
            found[method] = value
    spf = header(msg, "Received-SPF")
    if spf and spf.split():
        found["spf"] = spf.split()[0]
    return found


def header_verdict_refusal(msg: Message) -> str | None:
    """A local message's own verdict headers: a present one that is not pass refuses (dmarc: fail)."""
    for name, value in header_verdicts(msg).items():
        value = line(value, 40).upper()
        if (name == "dmarc" and value == "FAIL") or (name != "dmarc" and value != "PASS"):
            return f"{LABELS[name]} verdict {value}"
    return None


def line(text: str, limit: int) -> str:
    """``text`` as one header-safe line of at most ``limit`` characters; 8-bit bytes a header
    carried raw are read as UTF-8 (with replacement), never left as surrogates."""
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return header_text(text, limit)


_AUTOMATIC = (("Auto-Submitted", None), ("Precedence", ("bulk", "junk", "list", "auto_reply")),
              ("X-Autoreply", None), ("X-Autorespond", None), ("X-Auto-Response", None))


def automatic(msg: Message) -> str | None:
    """Why ``msg`` is an automatic message (RFC 3834 and its older conventions), or None."""
    for name, values in _AUTOMATIC:
        value = (header(msg, name) or "").strip()
        word = value.split(";")[0].strip().lower()
        if value and word != "no" and (values is None or word in values):
            return line(f"automatic reply ({name}: {value})", 200)
    if msg.get_content_type() == "multipart/report":
        return "automatic reply (a delivery report)"
    return None
