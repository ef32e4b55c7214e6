"""The shapes quoted history takes in a reply's plain text, as mail clients write it in their
languages: an attribution ("On <date>, <name> <addr> wrote:", on up to 3 lines, after the reply
on its line, without "On" or its colon), the labels of a quoted header block ("From:", "De :",
"Envoyé le :", "发件人："), the separators ("-----Original Message-----", "Begin forwarded
message:"), a client's footer ("Sent from my iPhone", "Gesendet von Outlook für Android"), a
sign-off block ("Regards," and a name). :mod:`zerg.inbound.reply_text` reads a reply with them.

Invariants:
- Driven by structure: an attribution is a date, a sender (an address in <>, () or [mailto:], or
  a name before the verb) and an end (a colon, the verb, the address before a quote block); a
  header block names a sender and a date, or a sender and the recipients. The word lists are the
  closed sets those shapes are made of (the verb of "X wrote:", the labels of a header, the lead
  of a footer, the words of a sign-off), not phrases of whole messages.
- A shape only half there is the person's text: losing their words is worse than keeping a quote.
  :data:`WEAK` shapes count only right above a quote block.
- Pure functions of their input, each bounded (at most :data:`SPAN` lines of :data:`SPAN_LINE`
  characters, or one line): no I/O, never raise, no regular expression that backtracks on a long line.
"""

from __future__ import annotations

import re

SPAN = 3  # an attribution is wrapped over at most this many lines ...
SPAN_LINE = 300  # ... of at most this many characters each
_LATIN_VERBS = (r"wrote|writes|schrieb|a\s+écrit|escribió|escreveu|ha\s+scritto|schreef|skrev|skriver|kirjoitti|"
                r"pisze|napisał(?:\(a\)|a)?|napsal(?:\(a\)|a)?|írta|yazdı|написал(?:\(а\)|а)?|пишет|έγραψε|"
                r"a\s+scris|napisao|napisala|rašė|rakstīja|kirjutas|đã\s+viết|(?:het\s+volgende\s+)?geschreven|"
                r"pise|пише|(?:folgendes\s+)?geschrieben")
_CJK_VERBS = r"写道|寫道|のメール|님이\s*작성"
_VERB = re.compile(rf"(?<![^\W_])(?:{_LATIN_VERBS})(?![^\W_])|{_CJK_VERBS}", re.IGNORECASE)
_VERB_END = re.compile(rf"(?:(?<![^\W_])(?:{_LATIN_VERBS})|{_CJK_VERBS})$", re.IGNORECASE)
_ADDRESS = r"<(?:mailto:)?[^<>\s@]+@[^<>\s@]+>|\(<?[^()<>\s@]+@[^()<>\s@]+>?\)|\[mailto:[^\[\]\s@]+@[^\[\]\s]+\]"
_SENDER = re.compile(_ADDRESS, re.IGNORECASE)
_SENDER_END = re.compile(rf"(?:{_ADDRESS})$", re.IGNORECASE)
# A date or a time as clients write them: 06:01, 6.01, 2026, 23/11/26, 2026年11月23日.
DATE = re.compile(r"(?<!\d)(?:\d{1,2}[:.h]\d{2}(?!\d)|(?:19|20)\d{2}(?!\d)|\d{1,4}[./-]\d{1,2}[./-]\d{1,4}(?!\d)|"
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
            r"надіслано|trimis|odoslané|poslano|đã\s+gửi|dikirim|发送时间|发送日期|日期|寄件日期|送信日時|日付|"
            r"보낸\s*날짜|날짜|"
            r"ημερομηνία|στάλθηκε|נשלח|تاريخ\s+الإرسال",
    "to": r"to|an|à|a|para|aan|till|til|do|komu|кому|kime|címzett|vastaanottaja|destinatario|destinatário|către|prima|"
          r"đến|kepada|收件人|收件者|宛先|받는\s*사람|προς|אל|إلى",
    "cc": r"cc|bcc|kopie|copie|cópia|copia|kopia|копия|抄送|副本|kopio",
    "subject": r"subject|betreff|objet|asunto|oggetto|assunto|onderwerp|ämne|emne|aihe|temat|тема|konu|tárgy|předmět|"
               r"predmet|subiect|chủ\s+đề|subjek|主题|主旨|件名|제목|θέμα|נושא|الموضوع",
}
# "From:", "*From:*", "De :", "Envoyé le :", "发件人：": a header label of a quoted message.
LABEL = re.compile(r"^[*_]{0,2}(?:" + "|".join(f"(?P<{kind}>{words})" for kind, words in _LABELS.items())
                   + r")[*_]{0,2}\s*[:：]", re.IGNORECASE)
# Outlook's block run into one line by a conversion: "From: X Sent: Y To: Z".
DATE_LABEL_INSIDE = re.compile(r"\s[*_]{0,2}(?:" + _LABELS["date"] + r")[*_]{0,2}\s*[:：]", re.IGNORECASE)
# "Label:" of one or two words, any language
FIELD = re.compile(r"^\*?[^\s:：*]{1,30}(?:\s[^\s:：*]{1,30})?\*?\s*[:：]")
ORIGINAL = re.compile(
    r"^(?=.*[-=_*]{2})[-=_*\s]*(?:original message|ursprüngliche nachricht|message d'origine|mensaje original|"
    r"messaggio originale|mensagem original|oorspronkelijk bericht|originalmeddelande|opprinnelig melding|"
    r"oprindelig meddelelse|alkuperäinen viesti|oryginalna wiadomość|"
    r"исходное сообщение|původní zpráva|původní e-mail|原始邮件|原始郵件|"
    r"forwarded message|weitergeleitete nachricht|message transféré|mensaje reenviado|messaggio inoltrato|"
    r"mensagem encaminhada|doorgestuurd bericht|vidarebefordrat meddelande|videresendt melding|"
    r"videresendt meddelelse|przekazana wiadomość|пересылаемое сообщение|転送されたメッセージ|转发的邮件)"
    r"[-=_*\s]*$", re.IGNORECASE)
FORWARDED = re.compile(
    r"^(?:begin forwarded message|anfang der weitergeleiteten nachricht|début du message réexpédié|"
    r"inicio del mensaje reenviado|inizio messaggio inoltrato|início da mensagem reencaminhada|"
    r"begin doorgestuurd bericht|vidarebefordrat mejl|videresendt melding|начало переадресованного сообщения|"
    r"początek przekazywanej wiadomości|転送されたメッセージ)\s*[:：]\s*$", re.IGNORECASE)
RULE = re.compile(r"^[-_=—–*~·]{3,}$")
UNDERSCORES = re.compile(r"^_{2,}$")
_ARROW = re.compile(r"^(>+)\s.*\s(<+)$")  # ">>> http://… <<<": framed by arrows, not quoted
SIGNATURE = re.compile(r"^--\s?$")
_OPEN_ADDRESS = re.compile(r"\s[<(\[]$")  # a line broken right after the bracket that opens an address ("… Name <")
_LINK = re.compile(r"\s*<https?://[^<>\s]+>")  # "Get Outlook for iOS<https://aka.ms/…>", the link anywhere
REACHABLE = re.compile(r"https?://|www\.|[^\s@<>]@[^\s@<>]+\.\w")  # a link or an address
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
# The verb last, as German and Dutch put it: "Outlook für Android herunterladen", "Outlook voor iOS downloaden".
_FOOTER_GET_LAST = re.compile(r"^(?:\S+\s+){1,3}(?:für|voor|för)\s+(?:ios|android|iphone|ipad|windows|mac)\s+"
                              r"(?:herunterladen|beziehen|holen|downloaden|ophalen|hämta|ladda\s+ner)$", re.IGNORECASE)
_FOOTER_WHOLE = re.compile(r"^(?:von\s+meinem\s.{1,40}\sgesendet|(?:发自|從|从|來自)我的.{1,30}|.{1,30}から送信|"
                           r".{1,30}(?:dan|den|ten|tan)\s+gönderildi|lähetetty\s+\S{1,30}(?:sta|stä)|"
                           r".{1,30}에서\s*보냄)"
                           r"\.?$", re.IGNORECASE)
_AFTER_COMMA = re.compile(r",\s+(\S+)")
_ARTICLES = frozenset({"a", "an", "un", "une", "ein", "eine", "el", "la", "il"})  # "…, an AT&T smartphone"
_SIGNOFF = re.compile(
    r"^(?:(?:best|kind|warm|warmest|many|with\s+kind|with\s+best)\s+)?(?:regards|wishes|thanks|cheers|best|sincerely|"
    r"yours(?:\s+(?:truly|sincerely))?|cordially|thank\s+you|thx|br|rgds|"
    r"cordialement|bien\s+cordialement|bien\s+à\s+vous|salutations|amicalement|merci|"
    r"(?:mit\s+)?(?:freundlichen|besten|herzlichen|lieben|viele|beste|liebe)\s+grü(?:ß|ss)en?|grü(?:ß|ss)e|"
    r"gruß|lg|mfg|vg|"
    r"danke|saludos|un\s+saludo|atentamente|gracias|saluti|cordiali\s+saluti|distinti\s+saluti|un\s+saluto|grazie|"
    r"atenciosamente|abraços|obrigad[oa]|cumprimentos|met\s+vriendelijke\s+groet(?:en)?|groet(?:en|jes)?|"
    r"med\s+vänlig\s+hälsning|vänliga\s+hälsningar|hälsningar|mvh|med\s+venlig\s+hilsen|vennlig\s+hilsen|hilsen|"
    r"с\s+уважением|спасибо|pozdrawiam|z\s+poważaniem|dziękuję|よろしくお願いします|此致)\s*[,.!]?$",
    re.IGNORECASE)
# A shape that counts whatever follows it / only where a quote block follows (a footer: the end).
STRONG, WEAK = 2, 1


def names_a_sender(value: str) -> bool:
    """A header's "From:" value: an address, or a few words that are no sentence or time ("From: now
    on, weekly please" and "From: 10:00 to 12:00" are the person's)."""
    value = value.strip(" *_")
    if "@" in value and value[:1] not in ":：":
        return True
    if not value or not (value[0].isalpha() or value[0] in "\"'<[("):
        return False
    words = value.split()
    return (any(ch.isalpha() for ch in value) and len(words) <= 5 and "," not in value
            and not value.endswith(("!", "?")) and not (value.endswith(".") and len(words[-1]) > 4))


def is_arrow(bare: str) -> bool:
    """``>>> link <<<``: as many ``<`` close the line as ``>`` open it."""
    m = _ARROW.match(bare)
    return m is not None and len(m.group(1)) == len(m.group(2))


def wraps_on(line: str, following: str) -> bool:
    """An attribution may go on from ``line`` to ``following``: ``line`` ends in no colon and no
    sentence (a short abbreviation such as "nov." may end it), ``following`` starts no history."""
    open_paren = line.count("(") > line.count(")")  # "… ezt írta (időpont:" goes on
    if not open_paren and (line.endswith((":", "：", "!", "?"))
                           or (line.endswith(".") and len(line.rsplit(None, 1)[-1]) > 5)):
        return False
    return not (LABEL.match(following) or FORWARDED.match(following) or ORIGINAL.match(following)
                or SIGNATURE.match(following))


def later_lines_attribute(parts: list[str]) -> bool:
    """The last lines of ``parts`` are an attribution without the first: "Thanks Adam" then "Adam
    <adam@example.com> wrote:", or "Thanks On Mon, … wrote:". Unless the first line opens one with
    its date and ends in a name or a number ("On Mon, Nov 23, 2026 at 6:01 AM", then "Zerg
    <zerg@…>", then "wrote:"; "Il giorno lun 23 nov 2026 alle ore 06:01 Operations", then
    "Monitoring Team <…> ha scritto:"), is no sentence, and the rest lacks a date."""
    head = parts[0]
    last = head.split()[-1].lstrip("(\"'")[:1]
    opens = bool((_OPENER.match(head) or (_DATE_FIRST.match(head) and head[:1].isalpha()))  # "On", "pon., 23"
                 and DATE.search(head) and not head.endswith(".")
                 and (last.isupper() or last.isdigit())  # broken in the name or the date ...
                 and sum(w.isalpha() and w.islower() and len(w) >= 5 for w in head.split()) <= 1)  # ... no sentence
    for k in range(1, len(parts)):
        if _OPEN_ADDRESS.search(parts[k - 1]):
            continue  # the line before was broken inside the sender's address: this one starts mid-address
        strength = attribution(parts[k:])[1]
        if strength == STRONG or (strength and not opens):
            return True
    return False


def joined(parts: list[str]) -> str:
    """The lines of a wrapped attribution as one: with a space, except after a line that ends
    inside the sender's address ("… Konstantinopoulou <" then "alexandra@example.org> wrote:", as
    Gmail breaks it), which goes on without one."""
    text = parts[0] if parts else ""
    for part in parts[1:]:
        text += part if _OPEN_ADDRESS.search(text) else " " + part
    return text


def has_address(text: str) -> bool:
    """``text`` names a sender's address (in <>, () or [mailto:])."""
    return _SENDER.search(text) is not None


def may_end_attribution(bare: str) -> bool:
    return bare.endswith((":", "：", ">", ")", "]")) or _VERB_END.search(bare[-24:]) is not None


def attribution(parts: list[str], *, split: bool = True) -> tuple[str, int]:
    """``(prefix, strength)`` of the lines ``parts`` read as one attribution; with ``split``, one may
    start after the person's words on its first line ("Sure thing On Wed, … wrote:"), at the last
    capitalised opener that still leaves one (its date comes right after it, so a name such as "Le
    Monde" further on opens none)."""
    text = joined(parts)
    if split:
        for m in reversed(list(_OPENER_INSIDE.finditer(parts[0]))):
            strength = attribution_strength(text[m.start():])
            if strength:
                return parts[0][:m.start()].rstrip(), strength
    return "", attribution_strength(text)


def attribution_strength(text: str) -> int:
    """:data:`STRONG`, :data:`WEAK` or 0 for ``text`` (one line, or a wrapped one joined)."""
    if len(text) > 2 * SPAN_LINE:
        return 0
    colon = text.endswith((":", "："))
    body = text.rstrip(" :：")
    verb_end = _VERB_END.search(body[-24:]) is not None
    sender_end = _SENDER_END.search(body) is not None
    if not (colon or verb_end or sender_end):
        return 0
    sender = _SENDER.search(text)
    verb = _VERB.search(text)
    dated = DATE.search(text) is not None
    if _OPENER.match(text) or _DATE_FIRST.match(text):  # "On <date>, <name> wrote:", "2026/11/23 <name> <addr>:"
        if not dated:
            return 0
        if (colon or verb_end) and ((verb and (sender or _names_someone(text))) or sender_end):
            return STRONG  # "… wrote:", "… <addr>:" (the sender last when no verb is known)
        if colon and sender:
            return WEAK  # "… <addr> đã viết:": a verb not known
        if sender_end and (verb or _DATE_FIRST.match(text)):  # no colon: "2011/4/7 Name <addr>"
            return WEAK
        return 0
    if verb and (colon or verb_end):  # the name first: "Name <addr> wrote:", "Zerg <addr> 于…写道："
        if sender and sender.start() < verb.start() and 0 < len(text[:sender.start()].split()) <= 8:
            return STRONG if dated else WEAK
        before = text[:verb.start()]
        if (not sender and verb_end and before.strip() and len(before.split()) <= 4 and "," not in before
                and not any(ch.isdigit() for ch in before)):  # "John Doe wrote:"
            return WEAK
    if colon and dated and sender and text[:sender.start()].strip():  # any other language: a date, a sender, a colon
        return WEAK
    return 0


def _names_someone(text: str) -> bool:
    """Letters are left once the opener, dates, verb and addresses are taken out: a name."""
    rest = _OPENER.sub("", _SENDER.sub(" ", _VERB.sub(" ", DATE.sub(" ", text))).strip())
    return any(ch.isalpha() for ch in rest)


def footer(bare: str) -> int:
    """:data:`STRONG` for a client's footer on a line of its own (short, its lead known, then a
    device or an app: "Sent from my iPhone", "Get Outlook for iOS"); :data:`WEAK` for a line shaped
    like one but naming no device ("Sent from a magnificent torch of pixels"), a footer only where
    the person's words end; 0 for a sentence ("Sent from my desk, is much easier …")."""
    if len(bare) > 160:
        return 0
    line = _LINK.sub("", bare).strip()
    if len(line) > 100 or line.endswith(("?", "!", ":")):
        return 0
    if _FOOTER_GET.match(line) or _FOOTER_GET_LAST.match(line) or _FOOTER_WHOLE.match(line):
        return STRONG
    m = _FOOTER_SENT.match(line)
    if not m:
        return 0
    rest = line[m.end():].strip()
    if not 0 < len(rest.split()) <= 10 or any(w[0].islower() and w.lower() not in _ARTICLES
                                              for w in _AFTER_COMMA.findall(rest)):
        return 0
    return STRONG if any(ch.isupper() for ch in rest) or _POSSESSIVE.match(rest) else WEAK


def without_signoff(kept: list[str]) -> list[str]:
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


