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
  a block that quotes without ``>`` (a header block in any language and a rule above it,
  "-----Original Message-----", "Begin forwarded message:", an attribution followed by unmarked
  text, a client's footer such as "Sent from my iPhone" on its own line) ends the reply there.
  Quoted history is found by its shapes (:mod:`zerg.inbound.reply_shapes`), never by a phrase of
  the message.
- When unsure, keep: a shape only half there is the person's text ("From: now on, weekly please",
  "Sent from my desk, is much easier …", a framed "---- Enter Feedback Below ----", an arrow
  ``>>> link <<<``, a reply on its attribution's line). Losing the owner's words is worse than
  keeping a quote, and the only words of a reply are never taken for a wrapped quote line or a
  sign-off. A reading that keeps nothing is read again, leniently (:meth:`_Reader.read`): history
  always comes after the person's words, so a ``>`` block or an address-less attribution at the very
  top, with history or nothing quoted below, is theirs; a reply that holds only history stays empty.
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

from zerg.inbound import reply_shapes as shapes

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
#
# Read line by line, top to bottom, by the shapes of :mod:`zerg.inbound.reply_shapes`: a quote block
# (``>`` lines; a line framed as ``>>> … <<<`` is an arrow, and a short ``>`` block typed between the
# person's own lines above any history is theirs), an attribution, a header block, a separator, a
# client's footer, a sign-off block at the end. When a shape is only half there, the line is kept.

def strip_quotes(text: str, *, quoted_subject: str | None = None, marks: Iterable[str] = ()) -> str:
    """The person's own text of a reply's plain text: quoted (``>``) lines, attributions, quoted
    header blocks, signatures, client footers and a trailing sign-off block removed; at a header
    block, an "Original Message" or forwarded-message line, an attribution followed by unmarked
    text or a client footer, the rest is cut. ``quoted_subject``: the subject the reply answers (its
    "Re: " removed); ``marks``: Zerg's addresses (lower case) as they appear in an attribution or a
    quoted header block. Linear in the text."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    reader = _Reader(lines, (quoted_subject or "").strip().lower(), tuple(m for m in marks if m))
    kept = reader.read(unwrap=True)
    if reader.unwrapped and not _tidy(kept):
        kept = reader.read(unwrap=False)  # the only words were taken for a wrapped quote line: keep them
    if not _tidy(kept):  # nothing of theirs: unless the text holds only history, a shape was read too eagerly
        kept = reader.read(unwrap=False, lenient=True)
    return _tidy(shapes.without_signoff(kept))


TYPED_LINES = 5  # a block of "> …" lines the person typed (a command, a prompt) is at most this long


class _Reader:
    """One pass over the lines of a reply (:func:`strip_quotes`)."""

    def __init__(self, lines: list[str], subject: str, marks: tuple[str, ...]) -> None:
        self.lines = [line.rstrip() for line in lines]
        self.bare = [line.strip() for line in self.lines]
        self.subject = subject
        self.marks = marks
        # A quote line: ">" first, unless the line is framed by arrows (">>> link <<<").
        self.quoted = [b.startswith(">") and not (b.endswith("<") and len(b) < 300 and shapes.is_arrow(b))
                       for b in self.bare]
        self.unwrapped = False
        self._seen_at: dict[str, int] | None = None

    def read(self, *, unwrap: bool, lenient: bool = False) -> list[str]:
        """The person's lines. ``lenient`` (a second reading, when the first kept nothing): a
        ``>`` block at the very top right above an attribution or a header block is theirs ("> 200
        signed up, book the big room"), and so is an attribution that names no address at the very
        top of a text that holds no quote line and nothing of Zerg's ("On March 1, the bank
        wrote: …"): history always comes after the person's words, so with none above it there
        is none."""
        lines, bare, quoted = self.lines, self.bare, self.quoted
        kept: list[str] = []  # the person's lines; a blank one only after words (so "any words" is ``bool(kept)``)
        seen_quote = False
        typed = -1
        i = 0
        while i < len(lines):
            line, b = lines[i], bare[i]
            if not b:
                if kept:
                    kept.append("")
                i += 1
                continue
            if quoted[i]:
                end = 0 if seen_quote else (self._typed_quote_block(i, kept)
                                            or (lenient and not kept and self._leading_quote_block(i)))
                if end:
                    kept.extend(lines[i:end])  # "> …" lines typed among the person's own, above any quoted history
                    typed = end - 1
                    i = end
                    continue
                seen_quote = True
                i += 1
                continue
            if unwrap and i and quoted[i - 1] and typed != i - 1:
                end = self._wrapped_continuation(i, kept)
                if end:
                    self.unwrapped = True
                    i = end
                    continue
            if self._history_starts(i):
                _drop_trailing_rules(kept)
                break
            found = self._attribution_at(i)
            if found:
                prefix, span, strength = found
                following = self._next_nonblank(i + span)
                if following is None or quoted[following]:
                    if prefix:
                        kept.append(prefix)
                    seen_quote = True
                    i += span
                    continue
                if strength == shapes.STRONG and not (lenient and not kept and not prefix
                                                      and self._bare_attribution(i, span)):
                    if prefix:
                        kept.append(prefix)
                    break  # an attribution, then history without quote marks
            lower = b.lower()
            if self.marks and any(mark in lower for mark in self.marks):
                following = self._next_nonblank(i + 1)
                if following is not None and quoted[following]:
                    i += 1  # an attribution of a shape not known above
                    continue
                break
            if len(self.subject) >= 8 and self.subject in lower and shapes.FIELD.match(b):
                _drop_header_block(kept)  # "Subject: <it>" in a quoted header block: the block goes too
                break
            if len(self.subject) >= 8 and len(b) >= 16 and lower in self.subject:
                break  # the alert's headline: its text quoted without marks
            footer = shapes.footer(b)
            if footer == shapes.STRONG and kept:
                break  # what a phone puts below the person's words: the rest is history, marked or not
            if footer == shapes.STRONG or (footer and self._nothing_of_theirs_after(i)):
                i += 1
                continue
            kept.append(line)
            i += 1
        return kept

    def _next_nonblank(self, start: int) -> int | None:
        for j in range(start, len(self.bare)):
            if self.bare[j]:
                return j
        return None

    def _nothing_of_theirs_after(self, i: int) -> bool:
        """After line ``i`` comes nothing, or quoted history (a quote line, an attribution, a block)."""
        j = self._next_nonblank(i + 1)
        return j is None or self.quoted[j] or self._history_starts(j) or self._attribution_at(j) is not None

    def _history_starts(self, i: int) -> bool:
        """Line ``i`` starts quoted history that carries no quote marks: a signature line, an
        "Original Message" or forwarded-message line, a header block, a rule above a sender's
        label, a mailing list's footer."""
        b = self.bare[i]
        if shapes.SIGNATURE.match(b) or (len(b) <= 120 and (shapes.ORIGINAL.match(b) or shapes.FORWARDED.match(b))):
            return True
        label = shapes.LABEL.match(b)
        if label:
            inside = None
            if label.lastgroup == "sender" and len(b) <= 600:  # "From: X Sent: Y To: Z" run into one line
                inside = shapes.DATE_LABEL_INSIDE.search(b, label.end())
            if inside and shapes.names_a_sender(b[label.end():inside.start()]) and shapes.DATE.search(b, inside.end()):
                return True
            return self._header_block_at(i)
        if len(b) > 120:
            return False
        if shapes.RULE.match(b):  # "____…" above "From: …" (a framed line of other words is text)
            following = self._next_nonblank(i + 1)
            if following is not None and following <= i + 2 and self._sender_label_at(following):
                return True
        if shapes.UNDERSCORES.match(b):  # a list's footer: a few lines, a link or an address, to a quote or the end
            rest: list[str] = []
            for j in range(i + 1, len(self.bare)):
                if self.quoted[j] or len(rest) > 8:
                    break
                if self.bare[j]:
                    rest.append(self.bare[j])
            return len(rest) <= 8 and any(shapes.REACHABLE.search(x[:300]) for x in rest)
        return False

    def _sender_label_at(self, i: int) -> bool:
        """Line ``i`` is "From: <a sender>" (an address, or a few words that are no sentence) or "Date: …"."""
        m = shapes.LABEL.match(self.bare[i])
        if not m or m.lastgroup not in ("sender", "date", "subject"):
            return False
        return m.lastgroup != "sender" or shapes.names_a_sender(self.bare[i][m.end():])

    def _header_block_at(self, i: int) -> bool:
        """Line ``i`` starts 2+ "Label: value" lines (values may wrap) that name a sender and a date,
        or a sender with an address and 2 of recipients, copies and subject. Each label comes once in
        a block, a sender's value names one and a date's holds a digit: a line above that breaks
        those ("From: now on, weekly please", "Date: weekly") is the person's."""
        kinds: set[str] = set()
        sender_value: str | None = None
        first = ""
        loose = blank = 0
        for j in range(i, min(len(self.bare), i + 14)):
            b = self.bare[j]
            if not b:
                blank += 1
                if blank > 1:
                    break
                continue
            blank = 0
            m = shapes.LABEL.match(b)
            if m:
                kind, value = m.lastgroup or "", b[m.end():]
                if kind == first or (kind == "sender" and not shapes.names_a_sender(value)) or (
                        kind == "date" and not any(ch.isdigit() for ch in value)):
                    if j == i or kind == first:
                        return False  # line i is no part of the block below it
                    break
                if kind in kinds:
                    break
                first = first or kind
                kinds.add(kind)
                if kind == "sender":
                    sender_value = value
                loose = 0
            elif not kinds or (loose := loose + 1) > 2:
                break
        if sender_value is None:
            return False
        return "date" in kinds or (len(kinds & {"to", "cc", "subject"}) >= 2 and "@" in sender_value)

    def _attribution_at(self, i: int) -> tuple[str, int, int] | None:
        """``(the person's words before it on its first line, lines, strength)`` when an attribution
        starts at line ``i``; the shortest reading wins, and a span whose later lines hold an
        attribution of their own is none (line ``i`` is the person's:
        :func:`~zerg.inbound.reply_shapes.later_lines_attribute`)."""
        parts: list[str] = []
        weak: tuple[str, int, int] | None = None
        for j in range(i, min(i + shapes.SPAN, len(self.bare))):
            b = self.bare[j]
            if not b or self.quoted[j] or len(b) > shapes.SPAN_LINE or (parts and not shapes.wraps_on(parts[-1], b)):
                break
            parts.append(b)
            if not shapes.may_end_attribution(b):
                continue
            prefix, strength = shapes.attribution(parts)
            if not strength or shapes.later_lines_attribute(parts):
                continue
            if strength == shapes.STRONG:
                return prefix, len(parts), strength
            weak = weak or (prefix, len(parts), strength)
        return weak

    def _typed_quote_block(self, i: int, kept: list[str]) -> int:
        """Where a block of "> …" lines typed among the person's own lines ends, or 0 when it is
        quoted: at most :data:`TYPED_LINES` lines under a line of theirs and above another (a blank
        line between, at most), no quote line below it before the history, and no line of it that
        names Zerg, is part of the alert's subject or comes again further down (a snippet of the
        history above it). With no history below to tell it from, a block with a blank line on both
        sides is an inline answer's quote ("Hi,", "> question", "answer"): only one that touches
        the person's lines is theirs (a command and its output, "Run:" then "> ls")."""
        bare, quoted = self.bare, self.quoted
        above = i - 1 if i and bare[i - 1] else i - 2
        if not kept or above < 0 or not bare[above] or quoted[above]:
            return 0
        end = self._quote_block_end(i)
        below = end if end < len(bare) and bare[end] else end + 1
        if not end or below >= len(bare) or not bare[below] or quoted[below] or shapes.footer(bare[below]) \
                or self._history_starts(below) or self._attribution_at(below):
            return 0
        history = False
        for j in range(below + 1, len(bare)):
            if quoted[j]:
                return 0
            if bare[j] and (self._attribution_at(j) or self._history_starts(j)):
                history = True
                break
        if not history and above < i - 1 and below > end:
            return 0
        return end if self._own_block(i, end) else 0

    def _leading_quote_block(self, i: int) -> int:
        """Where a block of "> …" lines at the very top ends when an attribution or a header block
        comes right under it (a blank line between, at most) and no line of it is Zerg's or a line
        of the history below; else 0 (:meth:`read`, ``lenient``)."""
        end = self._quote_block_end(i)
        below = self._next_nonblank(end) if end else None
        if below is None or below > end + 1 or not (self._attribution_at(below) or self._history_starts(below)):
            return 0
        return end if self._own_block(i, end) else 0

    def _quote_block_end(self, i: int) -> int:
        """The end of the quote lines from ``i`` (no blank line inside), or 0 past :data:`TYPED_LINES`."""
        end = i
        while end < len(self.bare) and self.quoted[end]:
            end += 1
            if end - i > TYPED_LINES:
                return 0
        return end

    def _own_block(self, i: int, end: int) -> bool:
        """No line of ``i:end`` names Zerg, is part of the alert's subject or comes again further
        down, quoted or not (a snippet of the history below)."""
        for j in range(i, end):
            content = self.bare[j].lstrip("> ").lower()
            if any(mark in content for mark in self.marks) or (len(self.subject) >= 8 and content
                                                              and content in self.subject):
                return False
            if content and self._last_at().get(content, -1) >= end:
                return False
        return True

    def _last_at(self) -> dict[str, int]:
        """The last line at which each line's words (quote marks off) appear (computed once)."""
        if self._seen_at is None:
            self._seen_at = {b.lstrip("> ").lower(): j for j, b in enumerate(self.bare)}
        return self._seen_at

    def _bare_attribution(self, i: int, span: int) -> bool:
        """The attribution at ``i`` names no address, and nothing in the text is quoted, names Zerg
        or holds the alert's subject (:meth:`read`, ``lenient``)."""
        if any(self.quoted) or shapes.has_address(shapes.joined(self.bare[i:i + span])):
            return False
        text = "\n".join(self.bare).lower()
        return not any(mark in text for mark in self.marks) and not (len(self.subject) >= 8 and self.subject in text)

    def _wrapped_continuation(self, i: int, kept: list[str]) -> int:
        """Where the lines from ``i`` end when they are a quoted line's hard-wrapped rest that lost
        its ``>``: right under a long quote line cut mid-sentence, at most 3 lines, and either
        between two quote lines or the last lines of a reply whose words are above; else 0."""
        above = self.bare[i - 1].lstrip("> ")
        if len(self.bare[i - 1]) < 50 or above.endswith((".", "?", "!", ":", ";")):
            return 0
        end = i
        while end < len(self.bare) and end < i + 3 and self.bare[end] and not self.quoted[end]:
            end += 1
        if end < len(self.bare) and self.quoted[end]:
            return end
        if self._next_nonblank(end) is None and kept:
            return end
        return 0


def _drop_trailing_rules(kept: list[str]) -> None:
    """A rule line (and blank lines) that ended ``kept`` belonged to the history below it."""
    while kept and (not kept[-1].strip() or (len(kept[-1].strip()) <= 120 and shapes.RULE.match(kept[-1].strip()))):
        kept.pop()


def _drop_header_block(kept: list[str]) -> None:
    """Remove the "Label: value" lines (and a rule above them) that end ``kept``: a quoted header block."""
    for pattern in (shapes.FIELD, shapes.RULE):
        dropped = 0
        while kept and dropped < 8 and kept[-1].strip() and pattern.match(kept[-1].strip()):
            kept.pop()
            dropped += 1
        while kept and not kept[-1].strip():
            kept.pop()


def _tidy(lines: list[str]) -> str:
    """Trailing spaces off, at most one blank line in a row, none at either end."""
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip("\n")
