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
#
# Read by structure, line by line, top to bottom. What counts:
# - a quote block: ``>`` lines (a line framed as ``>>> … <<<`` is an arrow, not a quote);
# - an attribution: on 1 to 3 lines, a date, a sender (an address in <>, () or [mailto:], or a name
#   before the clients' verb) and an end (a colon, the verb, or the address before a quote block);
# - a header block: "Label: value" lines naming the sender and a date, or the sender and the
#   recipients or subject, in the clients' languages;
# - a separator followed by such a block ("-----Original Message-----", a rule, a framed line);
# - a client's footer ("Sent from my iPhone") on a line of its own.
# The word lists are the closed sets those shapes are made of (the verb of "X wrote:", the labels
# of a header block, the lead of a footer), not phrases of messages. A shape only half there is
# the person's text: losing their words is worse than keeping a quote.

_SPAN = 3  # an attribution is wrapped over at most this many lines ...
_SPAN_LINE = 300  # ... of at most this many characters each
_LATIN_VERBS = (r"wrote|writes|schrieb|a\s+écrit|escribió|escreveu|ha\s+scritto|schreef|skrev|skriver|kirjoitti|"
                r"pisze|napisał(?:\(a\)|a)?|napsal(?:\(a\)|a)?|írta|yazdı|написал(?:\(а\)|а)?|пишет|έγραψε|"
                r"a\s+scris|napisao|napisala|rašė|rakstīja|kirjutas|đã\s+viết|(?:het\s+volgende\s+)?geschreven|pise|пише")
_CJK_VERBS = r"写道|寫道|のメール|님이\s*작성"
_VERB = re.compile(rf"(?<![^\W_])(?:{_LATIN_VERBS})(?![^\W_])|{_CJK_VERBS}", re.IGNORECASE)
_VERB_END = re.compile(rf"(?:(?<![^\W_])(?:{_LATIN_VERBS})|{_CJK_VERBS})$", re.IGNORECASE)
_ADDRESS = r"<(?:mailto:)?[^<>\s@]+@[^<>\s@]+>|\(<?[^()<>\s@]+@[^()<>\s@]+>?\)|\[mailto:[^\[\]\s@]+@[^\[\]\s]+\]"
_SENDER = re.compile(_ADDRESS, re.IGNORECASE)
_SENDER_END = re.compile(rf"(?:{_ADDRESS})$", re.IGNORECASE)
# A date or a time as clients write them: 06:01, 6.01, 2026, 23/11/26, 2026年11月23日.
_DATE = re.compile(r"(?<!\d)(?:\d{1,2}[:.h]\d{2}(?!\d)|(?:19|20)\d{2}(?!\d)|\d{1,4}[./-]\d{1,2}[./-]\d{1,4}(?!\d)|"
                   r"\d{1,4}\s?[年月日])")
_OPENER = re.compile(r"^(?:on|am|le|el|il(?:\s+giorno)?|op|em|den|på|dne|w\s+dniu|dnia|la|στις)(?![^\W_])",
                     re.IGNORECASE)
# The same openers as the clients capitalise them, after the person's words on the same line.
_OPENER_INSIDE = re.compile(r"(?<=\s)(?:On|Am|Le|El|Il|Op|Em|Den|På|Dne|W dniu|La|Στις)\s")
_DATE_FIRST = re.compile(r"^(?:\(?\d|(?:[^\W\d_]{1,5}\.?,?\s+){1,2}\d)")  # "2026/11/23", "пн, 23 нояб.", "ma 23.11."

_LABELS = {
    "sender": r"from|von|de|de\s+la|da|van|od|från|fra|frá|lähettäjä|от|від|kimden|feladó|remetente|mittente|afzender|"
              r"avsändare|nadawca|šalje|từ|dari|από|发件人|寄件者|寄件人|差出人|送信者|보낸\s*사람|מאת|من",
    "date": r"sent|date|gesendet|datum|envoyé(?:\s+le)?|enviado(?:\s+el)?|enviada|fecha|inviato|data|verzonden|skickat|"
            r"sendt|lähetetty|päivämäärä|wysłano|wysłane|отправлено|дата|gönderildi|tarih|elküldve|dátum|odesláno|"
            r"надіслано|trimis|odoslané|poslano|đã\s+gửi|dikirim|发送时间|发送日期|日期|寄件日期|送信日時|日付|보낸\s*날짜|날짜|"
            r"ημερομηνία|στάλθηκε|נשלח|تاريخ\s+الإرسال",
    "to": r"to|an|à|a|para|aan|till|til|do|komu|кому|kime|címzett|vastaanottaja|destinatario|destinatário|către|prima|"
          r"đến|kepada|收件人|收件者|宛先|받는\s*사람|προς|אל|إلى",
    "cc": r"cc|bcc|kopie|copie|cópia|copia|kopia|копия|抄送|副本|kopio",
    "subject": r"subject|betreff|objet|asunto|oggetto|assunto|onderwerp|ämne|emne|aihe|temat|тема|konu|tárgy|předmět|"
               r"predmet|subiect|chủ\s+đề|subjek|主题|主旨|件名|제목|θέμα|נושא|الموضوع",
}
# "From:", "*From:*", "De :", "Envoyé le :", "发件人：": a header label of a quoted message.
_LABEL = re.compile(r"^[*_]{0,2}(?:" + "|".join(f"(?P<{kind}>{words})" for kind, words in _LABELS.items())
                    + r")[*_]{0,2}\s*[:：]", re.IGNORECASE)
# Outlook's block run into one line by a conversion: "From: X Sent: Y To: Z".
_DATE_LABEL_INSIDE = re.compile(r"\s[*_]{0,2}(?:" + _LABELS["date"] + r")[*_]{0,2}\s*[:：]", re.IGNORECASE)
_FIELD = re.compile(r"^\*?[^\s:：*]{1,30}(?:\s[^\s:：*]{1,30})?\*?\s*[:：]")  # "Label:" of one or two words, any language
_ORIGINAL = re.compile(
    r"^(?=.*[-=_*]{2})[-=_*\s]*(?:original message|ursprüngliche nachricht|message d'origine|mensaje original|messaggio originale|"
    r"mensagem original|oorspronkelijk bericht|originalmeddelande|opprinnelig melding|oprindelig meddelelse|"
    r"alkuperäinen viesti|oryginalna wiadomość|исходное сообщение|původní zpráva|původní e-mail|原始邮件|原始郵件|"
    r"forwarded message|weitergeleitete nachricht|message transféré|mensaje reenviado|messaggio inoltrato|"
    r"mensagem encaminhada|doorgestuurd bericht|vidarebefordrat meddelande|videresendt melding|"
    r"videresendt meddelelse|przekazana wiadomość|пересылаемое сообщение|転送されたメッセージ|转发的邮件)"
    r"[-=_*\s]*$", re.IGNORECASE)
_FORWARDED = re.compile(
    r"^(?:begin forwarded message|anfang der weitergeleiteten nachricht|début du message réexpédié|"
    r"inicio del mensaje reenviado|inizio messaggio inoltrato|início da mensagem reencaminhada|"
    r"begin doorgestuurd bericht|vidarebefordrat mejl|videresendt melding|начало переадресованного сообщения|"
    r"początek przekazywanej wiadomości|転送されたメッセージ)\s*[:：]\s*$", re.IGNORECASE)
_RULE = re.compile(r"^[-_=—–*~·]{3,}$")
_UNDERSCORES = re.compile(r"^_{2,}$")
_ARROW = re.compile(r"^(>+)\s.*\s(<+)$")  # ">>> http://… <<<": framed by arrows, not quoted
_SIGNATURE = re.compile(r"^--\s?$")
_LINK_TAIL = re.compile(r"\s*<https?://[^<>\s]+>$")
_REACHABLE = re.compile(r"https?://|www\.|[^\s@<>]+@[^\s@<>]+\.\w")  # a link or an address
# A client's footer: "Sent from my iPhone", "Gesendet von Outlook für Android", "Get TypeApp for
# Android", "Von meinem iPhone gesendet", "iPhoneから送信".
_FOOTER_SENT = re.compile(
    r"^(?:sent|envoyé|enviado|enviada|inviato|verzonden|verstuurd|skickat|sendt|lähetetty|wysłane|wysłano|"
    r"отправлено|gesendet|odesláno)\s+(?:from|with|via|using|de|depuis|à\s+partir\s+de|avec|desde|con|do|da|dal|"
    r"dalla|del|vanaf|vanuit|met|från|med|fra|z|ze|с|со|из|через|von|vom|mit|mé|mého|z\s+mého)(?![^\W_])",
    re.IGNORECASE)
_POSSESSIVE = re.compile(r"^(?:my|mon|ma|mi|meu|minha|mijn|min|mitt|mein|meinem|meiner|il\s+mio|mio|mój|mojego|"
                         r"mého|мой|моего|моём)\s", re.IGNORECASE)
_FOOTER_GET = re.compile(r"^(?:get|download|obtenez|obtenir|télécharger|hol\s+dir|descarga|obtener|scarica|ottieni|"
                         r"baixe|obter|hämta|hent|pobierz)\s+(?:\S+\s+){1,3}(?:for|pour|für|para|per|voor|för|til|dla)"
                         r"\s+(?:ios|android|iphone|ipad|windows|mac)\b", re.IGNORECASE)
_FOOTER_WHOLE = re.compile(r"^(?:von\s+meinem\s.{1,40}\sgesendet|(?:发自|從|从|來自)我的.{1,30}|.{1,30}から送信|"
                           r".{1,30}(?:dan|den|ten|tan)\s+gönderildi|lähetetty\s+\S{1,30}(?:sta|stä)|.{1,30}에서\s*보냄)"
                           r"\.?$", re.IGNORECASE)
_AFTER_COMMA = re.compile(r",\s+(\S+)")
_ARTICLES = frozenset({"a", "an", "un", "une", "ein", "eine", "el", "la", "il"})  # "…, an AT&T smartphone"
_SIGNOFF = re.compile(
    r"^(?:(?:best|kind|warm|warmest|many|with\s+kind|with\s+best)\s+)?(?:regards|wishes|thanks|cheers|best|sincerely|"
    r"yours(?:\s+(?:truly|sincerely))?|cordially|thank\s+you|thx|br|rgds|"
    r"cordialement|bien\s+cordialement|bien\s+à\s+vous|salutations|amicalement|merci|"
    r"(?:mit\s+)?(?:freundlichen|besten|herzlichen|lieben|viele|beste|liebe)\s+grü(?:ß|ss)en?|grü(?:ß|ss)e|gruß|lg|mfg|vg|"
    r"danke|saludos|un\s+saludo|atentamente|gracias|saluti|cordiali\s+saluti|distinti\s+saluti|un\s+saluto|grazie|"
    r"atenciosamente|abraços|obrigad[oa]|cumprimentos|met\s+vriendelijke\s+groet(?:en)?|groet(?:en|jes)?|"
    r"med\s+vänlig\s+hälsning|vänliga\s+hälsningar|hälsningar|mvh|med\s+venlig\s+hilsen|vennlig\s+hilsen|hilsen|"
    r"с\s+уважением|спасибо|pozdrawiam|z\s+poważaniem|dziękuję|よろしくお願いします|此致)\s*[,.!]?$",
    re.IGNORECASE)
_STRONG, _WEAK = 2, 1  # an attribution whatever follows it / only when a quote block follows


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
    return _tidy(_without_signoff(kept))


class _Reader:
    """One pass over the lines of a reply (:func:`strip_quotes`)."""

    def __init__(self, lines: list[str], subject: str, marks: tuple[str, ...]) -> None:
        self.lines = [line.rstrip() for line in lines]
        self.bare = [line.strip() for line in self.lines]
        self.subject = subject
        self.marks = marks
        # A quote line: ">" first, unless the line is framed by arrows (">>> link <<<").
        self.quoted = [b.startswith(">") and not (len(b) < 300 and _arrow(b)) for b in self.bare]
        self.unwrapped = False

    def read(self, *, unwrap: bool) -> list[str]:
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
                if not seen_quote and self._typed_quote_line(i):
                    kept.append(line)  # a lone "> …" line among the person's own, above any quoted history
                    typed = i
                else:
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
                if strength == _STRONG:
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
            if len(self.subject) >= 8 and self.subject in lower and _FIELD.match(b):
                _drop_header_block(kept)  # "Subject: <it>" in a quoted header block: the block goes too
                break
            if len(self.subject) >= 8 and len(b) >= 16 and lower in self.subject:
                break  # the alert's headline: its text quoted without marks
            footer = _footer(b)
            if footer == _STRONG and kept:
                break  # what a phone puts below the person's words: the rest is history, marked or not
            if footer == _STRONG or (footer and self._nothing_of_theirs_after(i)):
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
        if _SIGNATURE.match(b) or (len(b) <= 120 and (_ORIGINAL.match(b) or _FORWARDED.match(b))):
            return True
        label = _LABEL.match(b)
        if label:
            inside = _DATE_LABEL_INSIDE.search(b, label.end()) if label.lastgroup == "sender" and len(b) <= 600 else None
            if inside and _names_a_sender(b[label.end():inside.start()]) and _DATE.search(b, inside.end()):
                return True
            return self._header_block_at(i)
        if len(b) > 120:
            return False
        if _RULE.match(b):  # "________________________________" above "From: …"; a framed line of other words is text
            following = self._next_nonblank(i + 1)
            if following is not None and following <= i + 2 and self._sender_label_at(following):
                return True
        if _UNDERSCORES.match(b):  # a list's footer: a few lines with a link or an address, then nothing or a quote
            rest: list[str] = []
            for j in range(i + 1, len(self.bare)):
                if self.quoted[j] or len(rest) > 8:
                    break
                if self.bare[j]:
                    rest.append(self.bare[j])
            return len(rest) <= 8 and any(_REACHABLE.search(x[:300]) for x in rest)
        return False

    def _sender_label_at(self, i: int) -> bool:
        """Line ``i`` is "From: <a sender>" (an address, or a few words that are no sentence) or "Date: …"."""
        m = _LABEL.match(self.bare[i])
        if not m or m.lastgroup not in ("sender", "date", "subject"):
            return False
        return m.lastgroup != "sender" or _names_a_sender(self.bare[i][m.end():])

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
            m = _LABEL.match(b)
            if m:
                kind, value = m.lastgroup or "", b[m.end():]
                if kind == first or (kind == "sender" and not _names_a_sender(value)) or (
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
        attribution of their own is none (line ``i`` is the person's: :func:`_later_lines_attribute`)."""
        parts: list[str] = []
        weak: tuple[str, int, int] | None = None
        for j in range(i, min(i + _SPAN, len(self.bare))):
            b = self.bare[j]
            if not b or self.quoted[j] or len(b) > _SPAN_LINE or (parts and not _wraps_on(parts[-1], b)):
                break
            parts.append(b)
            if not _may_end_attribution(b):
                continue
            prefix, strength = _attribution(parts)
            if not strength or _later_lines_attribute(parts):
                continue
            if strength == _STRONG:
                return prefix, len(parts), strength
            weak = weak or (prefix, len(parts), strength)
        return weak

    def _typed_quote_line(self, i: int) -> bool:
        """A lone "> …" line between two of the person's lines, with no quote block above it and
        none below it before an attribution: typed, not quoted (unless it is the alert's text)."""
        bare, quoted = self.bare, self.quoted
        if i == 0 or i + 1 >= len(bare) or not bare[i - 1] or not bare[i + 1] or quoted[i - 1] or quoted[i + 1]:
            return False
        content = bare[i].lstrip("> ").lower()
        if any(mark in content for mark in self.marks) or (len(self.subject) >= 8 and content in self.subject):
            return False
        for j in range(i + 1, len(bare)):
            if quoted[j]:
                return False
            if bare[j] and (self._attribution_at(j) or self._history_starts(j)):
                return True
        return True

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


def _names_a_sender(value: str) -> bool:
    """A header's "From:" value: an address, or a few words that are no sentence or time ("From: now
    on, weekly please" and "From: 10:00 to 12:00" are the person's)."""
    value = value.strip(" *_")
    if "@" in value:
        return True
    words = value.split()
    return (any(ch.isalpha() for ch in value) and not value[0].isdigit() and len(words) <= 5 and "," not in value
            and not value.endswith(("!", "?")) and not (value.endswith(".") and len(words[-1]) > 4))


def _arrow(bare: str) -> bool:
    m = _ARROW.match(bare)
    return m is not None and len(m.group(1)) == len(m.group(2))


def _wraps_on(line: str, following: str) -> bool:
    """An attribution may go on from ``line`` to ``following``: ``line`` ends in no colon and no
    sentence (a short abbreviation such as "nov." may end it), ``following`` starts no history."""
    if line.count("(") > line.count(")"):  # "… ezt írta (időpont:" goes on
        pass
    elif line.endswith((":", "：", "!", "?")) or (line.endswith(".") and len(line.rsplit(None, 1)[-1]) > 5):
        return False
    return not (_LABEL.match(following) or _FORWARDED.match(following) or _ORIGINAL.match(following)
                or _SIGNATURE.match(following))


def _later_lines_attribute(parts: list[str]) -> bool:
    """The last lines of ``parts`` are an attribution without the first: "Thanks Adam" then "Adam
    <adam@example.com> wrote:", or "Thanks On Mon, … wrote:". Unless the first line opens one with its date ("On Mon, Nov 23,
    2026 at 6:01 AM", then "Zerg <zerg@…>", then "wrote:"), holds no word of a sentence, and the
    rest lacks a date."""
    head = parts[0]
    opens = ((_OPENER.match(head) or _DATE_FIRST.match(head)) and _DATE.search(head) and not head.endswith(".")
             and not any(w.isalpha() and w.islower() and len(w) >= 5 for w in head.split()))  # a date, no sentence
    for k in range(1, len(parts)):
        strength = _attribution(parts[k:])[1]
        if strength == _STRONG or (strength and not opens):
            return True
    return False


def _may_end_attribution(bare: str) -> bool:
    return bare.endswith((":", "：", ">", ")", "]")) or _VERB_END.search(bare[-24:]) is not None


def _attribution(parts: list[str], *, split: bool = True) -> tuple[str, int]:
    """``(prefix, strength)`` of the lines ``parts`` read as one attribution; with ``split``, one may
    start after the person's words on its first line ("Sure thing On Wed, … wrote:"), at the last
    capitalised opener that still leaves one (its date comes right after it, so a name such as "Le
    Monde" further on opens none)."""
    text = " ".join(parts)
    if split:
        for m in reversed(list(_OPENER_INSIDE.finditer(parts[0]))):
            strength = _attribution_strength(text[m.start():])
            if strength:
                return parts[0][:m.start()].rstrip(), strength
    return "", _attribution_strength(text)


def _attribution_strength(text: str) -> int:
    """:data:`_STRONG`, :data:`_WEAK` or 0 for ``text`` (one line, or a wrapped one joined)."""
    if len(text) > 2 * _SPAN_LINE:
        return 0
    colon = text.endswith((":", "："))
    body = text.rstrip(" :：")
    verb_end = _VERB_END.search(body[-24:]) is not None
    sender_end = _SENDER_END.search(body) is not None
    if not (colon or verb_end or sender_end):
        return 0
    sender = _SENDER.search(text)
    verb = _VERB.search(text)
    dated = _DATE.search(text) is not None
    if _OPENER.match(text) or _DATE_FIRST.match(text):  # "On <date>, <name> wrote:", "2026/11/23 <name> <addr>:"
        if not dated:
            return 0
        if (colon or verb_end) and ((verb and (sender or _names_someone(text))) or sender_end):
            return _STRONG  # "… wrote:", "… <addr>:" (the sender last when no verb is known)
        if colon and sender:
            return _WEAK  # "… <addr> đã viết:": a verb not known
        if sender_end and (verb or _DATE_FIRST.match(text)):  # no colon: "2011/4/7 Name <addr>"
            return _WEAK
        return 0
    if verb and (colon or verb_end):  # the name first: "Name <addr> wrote:", "Zerg <addr> 于…写道："
        if sender and sender.start() < verb.start() and 0 < len(text[:sender.start()].split()) <= 8:
            return _STRONG if dated else _WEAK
        before = text[:verb.start()]
        if (not sender and verb_end and before.strip() and len(before.split()) <= 4 and "," not in before
                and not any(ch.isdigit() for ch in before)):  # "John Doe wrote:"
            return _WEAK
    if colon and dated and sender and text[:sender.start()].strip():  # any other language: a date, a sender, a colon
        return _WEAK
    return 0


def _names_someone(text: str) -> bool:
    """Letters are left once the opener, dates, verb and addresses are taken out: a name."""
    rest = _OPENER.sub("", _SENDER.sub(" ", _VERB.sub(" ", _DATE.sub(" ", text))).strip())
    return any(ch.isalpha() for ch in rest)


def _footer(bare: str) -> int:
    """:data:`_STRONG` for a client's footer on a line of its own (short, its lead known, then a
    device or an app: "Sent from my iPhone", "Get Outlook for iOS"); :data:`_WEAK` for a line shaped
    like one but naming no device ("Sent from a magnificent torch of pixels"), a footer only where
    the person's words end; 0 for a sentence ("Sent from my desk, is much easier …")."""
    if len(bare) > 160:
        return 0
    line = _LINK_TAIL.sub("", bare).strip()
    if len(line) > 100 or line.endswith(("?", "!", ":")):
        return 0
    if _FOOTER_GET.match(line) or _FOOTER_WHOLE.match(line):
        return _STRONG
    m = _FOOTER_SENT.match(line)
    if not m:
        return 0
    rest = line[m.end():].strip()
    if not 0 < len(rest.split()) <= 10 or any(w[0].islower() and w.lower() not in _ARTICLES
                                              for w in _AFTER_COMMA.findall(rest)):
        return 0
    return _STRONG if any(ch.isupper() for ch in rest) or _POSSESSIVE.match(rest) else _WEAK


def _without_signoff(kept: list[str]) -> list[str]:
    """``kept`` without a sign-off block at its end ("Regards," then 1-4 lines of name, title,
    company, phone), when words of the person's stay above it. "Thanks, Dana" on one line stays."""
    rows = [n for n, line in enumerate(kept) if line.strip()]
    for back in range(2, min(5, len(rows) - 1) + 1):
        start = rows[-back]
        if _SIGNOFF.match(kept[start].strip()):
            tail = [kept[n].strip() for n in rows[-back + 1:]]
            if rows[-back + 1] <= start + 2 and all(map(_signature_line, tail)):  # one blank line between, at most
                return kept[:start]
            return kept
    return kept


def _signature_line(bare: str) -> bool:
    """A name, title, company, phone or link: short, every word capitalised (or a short joining
    word, a number, a link), no question or exclamation."""
    words = bare.split()
    if len(bare) > 60 or len(words) > 8 or bare.endswith(("?", "!", ":")):
        return False
    return all(not w[0].isalpha() or w[0].isupper() or len(w) <= 3 or "@" in w or "://" in w or w.startswith("www.")
               for w in words)


def _drop_trailing_rules(kept: list[str]) -> None:
    """A rule line (and blank lines) that ended ``kept`` belonged to the history below it."""
    while kept and (not kept[-1].strip() or (len(kept[-1].strip()) <= 120 and _RULE.match(kept[-1].strip()))):
        kept.pop()


def _drop_header_block(kept: list[str]) -> None:
    """Remove the "Label: value" lines (and a rule above them) that end ``kept``: a quoted header block."""
    for pattern in (_FIELD, _RULE):
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
