"""What the person wrote in a reply: its text cleaned, an HTML part as text, and the quoted
history, attribution lines, forwarded blocks, signatures and "Sent from my iPhone" footers taken
out, the way Gmail, Apple Mail, Outlook and Thunderbird write them.

Invariants:
- Pure functions of their input: no I/O, never raise on any text (HTML that never closes, a
  million lines, control characters); every pass is linear in the text.
- :func:`clean_text` is the one cleaner of inbound text, email and SMS alike: what it returns has
  no control, invisible formatting or lone surrogate character, so neither a hidden instruction
  (bidirectional overrides, tag characters) nor a character PostgreSQL refuses gets through.
- Only what the person wrote is kept: inline answers between ``>`` lines stay, the quoted lines go;
  a block that quotes without ``>`` (Outlook's "From: / Sent:" header block, "-----Original
  Message-----", the ``____`` separator, "Begin forwarded message:", an attribution line followed by
  unmarked text) ends the reply there.
- Whatever the language, quoted history names Zerg: a line holding one of Zerg's addresses
  (``marks``) is an attribution when ``>`` lines follow it and the start of the history otherwise;
  a "Label: <the quoted subject>" line ends the reply with the header block above it, and so does
  a line that is part of that subject (the alert's headline, quoted without marks). The quoted
  alert is model-written text: it must never pass for the person's words.
- In HTML the quote is dropped by structure before it becomes text (Gmail's ``gmail_quote``,
  ``<blockquote>``, Thunderbird's and Yahoo's quote and signature blocks); Outlook's reply block
  ends the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser

# --- text as read -------------------------------------------------------------------------------

_BREAKS = str.maketrans({"\r": "\n", "\x85": "\n", "\u2028": "\n", "\u2029": "\n\n", "\t": " "})
# Every control (Cc), invisible format (Cf) and lone surrogate (Cs) code point but the line break
# and the zero-width joiner (U+200D: it holds emoji sequences together), as in Unicode 14 (a test
# checks this class against unicodedata): bidirectional overrides and isolates, zero-width spaces,
# the BOM, interlinear annotations, tag characters (invisible ASCII).
_INVISIBLE = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200c"
    r"\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    r"\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")


def clean_text(text: str) -> str:
    """Inbound text (an email reply's text, an SMS) as the model reads it and PostgreSQL stores it:
    line breaks as ``\\n`` (CRLF, CR, NEL, U+2028; U+2029 a blank line), tabs as spaces, every
    other control character, lone surrogate and invisible formatting character removed (the
    zero-width joiner of emoji kept), trimmed. Linear in the text."""
    return _INVISIBLE.sub("", text.replace("\r\n", "\n").translate(_BREAKS)).strip()


def clean_line(text: str) -> str:
    """:func:`clean_text` as one line (a number, an id, a reason): white space runs, line breaks
    included, as one space."""
    return " ".join(clean_text(text).split())


# --- HTML to text -------------------------------------------------------------------------------

_BLOCKS = frozenset({"address", "article", "aside", "br", "dd", "div", "dl", "dt", "fieldset", "figure", "footer",
                     "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p",
                     "pre", "section", "table", "tbody", "td", "th", "thead", "tr", "ul"})
_DROPPED_TAGS = frozenset({"script", "style", "head", "title", "template", "noscript", "blockquote", "svg", "object"})
# Quote and signature containers, by class: Gmail, Yahoo, Thunderbird, Proton, Zoho.
_DROPPED_CLASSES = frozenset({"gmail_quote", "gmail_quote_container", "gmail_attr", "gmail_signature", "yahoo_quoted",
                              "moz-cite-prefix", "moz-signature", "protonmail_quote", "zmail_extra"})
# Outlook puts the "From: / Sent:" block in #divRplyFwdMsg and the quoted mail after it, outside
# any container: everything from there on is history.
_ENDING_IDS = frozenset({"divrplyfwdmsg", "appendonsend", "mail-editor-reference-message-container"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class _TextOfHtml(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip_tag: str | None = None  # the tag whose subtree is being dropped
        self.skip_depth = 0  # open elements of that tag name inside the dropped subtree
        self.ended = False
        self.at_line_start = True

    def _break(self, always: bool = False) -> None:
        """A line break: ``<br>`` always makes one, a block's edge only ends a line that has text."""
        if always or not self.at_line_start:
            self.out.append("\n")
            self.at_line_start = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]], closed: bool = False) -> None:
        if self.ended:
            return
        if self.skip_tag == "head" and tag == "body":  # a <head> nobody closed ends where the body starts
            self.skip_tag = None
        elif self.skip_tag is not None:
            if tag == self.skip_tag and not closed:
                self.skip_depth += 1
            return
        attr = {k.lower(): (v or "") for k, v in attrs}
        if attr.get("id", "").lower() in _ENDING_IDS:
            self.ended = True
            return
        if tag in _DROPPED_TAGS or _DROPPED_CLASSES.intersection(attr.get("class", "").split()):
            if tag not in _VOID and not closed:
                self.skip_tag, self.skip_depth = tag, 1
            return
        if tag in _BLOCKS:
            self._break(always=tag == "br")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs, closed=True)  # <br/>, <div/>: nothing left open to skip

    def handle_endtag(self, tag: str) -> None:
        if self.ended:
            return
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth <= 0:
                    self.skip_tag = None
            return
        if tag in _BLOCKS and tag != "br":  # </br> is read as <br> by browsers; here as nothing
            self._break()

    def handle_data(self, data: str) -> None:
        if self.ended or self.skip_tag is not None:
            return
        text = re.sub(r"[ \t\r\n\f\v]+", " ", data)  # HTML collapses white space; blocks break lines
        if text.strip() or not self.at_line_start:
            self.out.append(text)
            self.at_line_start = False


def html_to_text(html: str) -> str:
    """``html`` as the text a reader sees: scripts, styles and quoted blocks dropped, block
    elements as line breaks, entities decoded, at most one blank line in a row."""
    parser = _TextOfHtml()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; whatever it could not take ends the text there
        pass
    lines = [line.replace("\xa0", " ").strip() for line in "".join(parser.out).split("\n")]
    return _tidy(lines)


# --- format=flowed (RFC 3676) -------------------------------------------------------------------

def unflow(text: str, *, delsp: bool = False) -> str:
    """A ``format=flowed`` body with its soft line breaks joined (a line ending in a space goes on in
    the next line of the same quote depth); space-stuffing removed; the ``-- `` line kept as it is."""
    out: list[str] = []
    carry: tuple[int, str] | None = None
    for line in text.split("\n"):
        depth = len(line) - len(line.lstrip(">"))
        content = line[depth:]
        if content.startswith(" "):
            content = content[1:]
        if carry is not None and carry[0] == depth and content != "-- ":  # the signature line is never flowed into
            content = carry[1] + content
        elif carry is not None:
            out.append(">" * carry[0] + carry[1])
        carry = None
        if content.endswith(" ") and content != "-- ":
            carry = (depth, content[:-1] if delsp else content)
        else:
            out.append(">" * depth + (" " if depth else "") + content)
    if carry is not None:
        out.append(">" * carry[0] + carry[1])
    return "\n".join(out)


# --- quoted history and signatures ------------------------------------------------------------

_VERBS = (r"wrote|schrieb|a\s+écrit|escribió|ha\s+scritto|schreef|escreveu|pisze|skrev|napsal(?:\(a\))?|kirjoitti|"
          r"írta|yazdı|написал(?:\(а\)|а)?|napisał(?:\(a\)|a)?")
_ATTRIBUTION = re.compile(
    rf"^(?:on|am|le|el|il|op|em|w\s+dniu|den|på|dne)\b.{{0,400}}?\b(?:{_VERBS})\b[^\n]{{0,200}}:\s*$",
    re.IGNORECASE)
# Clients whose attribution has none of those words (Japanese, Chinese, ...): a date, an address in
# angle brackets, a final colon.
_ATTRIBUTION_ANY = re.compile(r"^(?=.*\d).{0,300}<[^<>\s@]+@[^<>\s@]+>.{0,100}[:：]\s*$")
_ORIGINAL = re.compile(r"^-{2,}\s*(?:original message|ursprüngliche nachricht|message d'origine|mensaje original|"
                       r"messaggio originale|oorspronkelijk bericht|originalmeddelande|forwarded message|"
                       r"weitergeleitete nachricht|message transféré|mensaje reenviado)\s*-{2,}\s*$", re.IGNORECASE)
_FORWARDED = re.compile(r"^(?:begin forwarded message|anfang der weitergeleiteten nachricht|début du message réexpédié)\s*:\s*$",
                        re.IGNORECASE)
_SEPARATOR = re.compile(r"^_{10,}\s*$")
_FRAMED = re.compile(r"^-{3,}\s*[^-\s].{0,60}?\s*-{3,}$")  # "-------- Original message --------" in any language
_FIELD = re.compile(r"^\*?[^\s:：*]{1,30}(?:\s[^\s:：*]{1,30})?\*?\s*[:：]")  # "Label:" of one or two words
_RULE = re.compile(r"^[-_=—–*~·]{3,}$")
_FROM_FIELD = re.compile(r"^\*?(?:from|von|de|da|van|od|från|fra|lähettäjä)\s*\*?\s*:", re.IGNORECASE)
_SENT_FIELD = re.compile(r"^\*?(?:sent|date|gesendet|datum|envoyé|enviado|fecha|inviato|data|verzonden|skickat|sendt|"
                         r"lähetetty|wysłane)\s*\*?\s*:", re.IGNORECASE)
_SIGNATURE = re.compile(r"^--\s?$")
_FOOTER = re.compile(r"^(?:sent from (?:my |mail for |outlook for |yahoo mail|aol )|sent with |get outlook for |"
                     r"envoyé de mon |enviado desde mi |enviado do meu |inviato da |verzonden met |von meinem .{0,40}gesendet|"
                     r"gesendet von meinem |skickat från min ).{0,80}$", re.IGNORECASE)


def strip_quotes(text: str, *, quoted_subject: str | None = None, marks: Iterable[str] = ()) -> str:
    """The person's own text of a reply's plain text: quoted (``>``) lines, attribution lines,
    signatures and mobile footers removed; at Outlook's reply header, an "Original Message" or
    forwarded-message line, or an attribution followed by unmarked quoted text, the rest is cut.
    ``quoted_subject``: the subject the reply answers (its "Re: " removed); ``marks``: Zerg's
    addresses (lower case) as they appear in an attribution or a quoted header block."""
    marks = tuple(m for m in marks if m)
    subject = (quoted_subject or "").strip().lower()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        bare = line.strip()
        if bare.startswith(">"):
            i += 1
            continue
        if (_SIGNATURE.match(line) or _ORIGINAL.match(bare) or _FORWARDED.match(bare) or _SEPARATOR.match(bare)
                or _FRAMED.match(bare)):
            break
        if _FROM_FIELD.match(bare) and _header_block_follows(lines, i):
            break
        span = _attribution_span(lines, i)
        if span:
            following = _next_nonblank(lines, i + span)
            if following is not None and not following.startswith(">"):
                break  # an attribution, then history without quote marks
            i += span
            continue
        lower = bare.lower()
        if marks and any(mark in lower for mark in marks):
            following = _next_nonblank(lines, i + 1)
            if following is not None and following.startswith(">"):
                i += 1  # an attribution in a language not listed above
                continue
            break
        if len(subject) >= 8 and subject in lower and _FIELD.match(bare):
            _drop_header_block(kept)  # "Subject: <it>" in a quoted header block: the block goes too
            break
        if len(subject) >= 8 and len(bare) >= 16 and lower in subject:
            break  # the alert's headline: its text quoted without marks
        if _FOOTER.match(bare):
            i += 1
            continue
        kept.append(line)
        i += 1
    return _tidy(kept)


def _attribution_span(lines: list[str], i: int) -> int:
    """1 or 2 when line ``i`` (or ``i`` and ``i + 1``, a wrapped one) is an attribution line, else 0."""
    one = lines[i].strip()
    if not one or len(one) > 600:
        return 0
    if _ATTRIBUTION.match(one) or _ATTRIBUTION_ANY.match(one):
        return 1
    if i + 1 < len(lines) and not one.endswith(":"):
        two = f"{one} {lines[i + 1].strip()}"
        if lines[i + 1].strip() and (_ATTRIBUTION.match(two) or _ATTRIBUTION_ANY.match(two)):
            return 2
    return 0


def _drop_header_block(kept: list[str]) -> None:
    """Remove the "Label: value" lines (and a rule above them) that end ``kept``: a quoted header block."""
    for pattern in (_FIELD, _RULE):
        dropped = 0
        while kept and dropped < 8 and kept[-1].strip() and pattern.match(kept[-1].strip()):
            kept.pop()
            dropped += 1
        while kept and not kept[-1].strip():
            kept.pop()


def _header_block_follows(lines: list[str], i: int) -> bool:
    """Line ``i`` is "From: ..." and one of the next three non-blank lines is "Sent:" / "Date:"."""
    seen = 0
    for line in lines[i + 1:i + 8]:
        bare = line.strip()
        if not bare:
            continue
        if _SENT_FIELD.match(bare):
            return True
        seen += 1
        if seen >= 3:
            break
    return False


def _next_nonblank(lines: list[str], start: int) -> str | None:
    for line in lines[start:]:
        if line.strip():
            return line.strip()
    return None


def _tidy(lines: list[str]) -> str:
    """Trailing spaces off, at most one blank line in a row, none at either end."""
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip("\n")
