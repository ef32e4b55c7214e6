"""Email as tests need it: a warning alert exactly as Zerg sends it (:func:`alert_email`), a reply
to it the way real mail clients write one (:func:`reply_to_alert`), what SES adds on receipt
(:func:`as_received_by_ses`) and SES's Lambda event record (:func:`ses_record`).

    alert = alert_email(to="owner@example.com", token=token)
    raw = reply_to_alert(alert, "make this weekly", client="gmail", sender="owner@example.com")

A reply is addressed to the alert's Reply-To (``reply+{token}@domain``), has ``In-Reply-To`` and
``References`` set to the alert's Message-ID and a "Re: " subject, and quotes the alert's text
below the person's (Gmail: ``gmail_quote`` div + ``>`` lines; Apple Mail and the iPhone: an
attribution and ``>`` lines; Outlook: HTML only, the "From: / Sent:" block and the unmarked alert;
Thunderbird: format=flowed, a wrapped attribution and a ``-- `` signature).
"""

from __future__ import annotations

import html
import secrets
import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid, parseaddr, parsedate_to_datetime
from typing import Any

MAIL_DOMAIN = "zerg.localhost"  # ZERG_MAIL_DOMAIN's default
ZERG = "zerg@zerg.localhost"  # ZERG_SENDER_EMAIL's default
CLIENTS = ("gmail", "apple", "iphone", "outlook", "thunderbird")
ALERT_TEXT = ("Disk 91% full on web-1\n\n/var is at 91% (18.2 of 20 GB); it grew 4% since yesterday.\n"
              "Logs under /var/log/app are the largest.\n\nScheduled check: disk space\n"
              "Run: http://127.0.0.1:8000/api/jarvis/runs/42\n")


def new_token() -> str:
    """A reply token as :func:`zerg.notify.deliver.deliver` makes one."""
    return secrets.token_hex(16)


def alert_email(*, to: str = "owner@example.com", token: str | None = None, message_id: str | None = None,
                subject: str = "[Zerg WARNING] Disk 91% full on web-1", text: str = ALERT_TEXT,
                mail_domain: str = MAIL_DOMAIN, sender: str = ZERG) -> bytes:
    """A warning alert as Zerg sends it (:func:`zerg.notify.channels.notifier.mime_message`): Reply-To
    ``reply+{token}@{mail_domain}``, a Message-ID, text plus an HTML alternative."""
    from zerg.notify.channels.notifier import mime_message
    from zerg.ports import Email

    token = token or new_token()
    message_id = message_id or make_msgid(idstring=secrets.token_hex(4), domain=mail_domain)
    msg = mime_message(Email(to=to, subject=subject, text=text, sender=sender,
                             reply_to=f"reply+{token}@{mail_domain}", message_id=message_id))
    return msg.as_bytes()


@dataclass(frozen=True)
class AlertFields:
    """What a mail client takes from the message it answers."""

    reply_to: str
    message_id: str
    subject: str
    text: str
    sender: str = ZERG
    sender_name: str = "Zerg"
    date: datetime = datetime(2026, 11, 23, 6, 1, tzinfo=timezone.utc)
    references: tuple[str, ...] = ()


def alert_fields(alert: bytes | EmailMessage | AlertFields | dict[str, Any]) -> AlertFields:
    """``alert`` (raw bytes, a parsed message, or the fields as a dict) as :class:`AlertFields`."""
    if isinstance(alert, AlertFields):
        return alert
    if isinstance(alert, dict):
        return AlertFields(**alert)
    msg = alert if isinstance(alert, EmailMessage) else BytesParser(policy=policy.default).parsebytes(alert)
    name, sender = parseaddr(str(msg["From"]))
    date = parsedate_to_datetime(str(msg["Date"])) if msg["Date"] else AlertFields.date
    return AlertFields(reply_to=parseaddr(str(msg["Reply-To"] or msg["From"]))[1], message_id=str(msg["Message-ID"]),
                       subject=str(msg["Subject"]), text=msg.get_body(preferencelist=("plain",)).get_content(),
                       sender=sender, sender_name=name or sender, date=date,
                       references=tuple(str(msg["References"] or "").split()))


def reply_to_alert(alert: bytes | EmailMessage | AlertFields | dict[str, Any], text: str, client: str = "gmail", *,
                   sender: str = "owner@example.com", sender_name: str = "Dana Owner",
                   date: datetime | None = None, message_id: str | None = None, charset: str = "utf-8") -> bytes:
    """A reply saying ``text`` to ``alert``, as ``client`` (one of :data:`CLIENTS`) writes it."""
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {CLIENTS}, not {client!r}")
    a = alert_fields(alert)
    msg = EmailMessage()
    msg["From"] = Address(display_name=sender_name, addr_spec=sender)
    msg["To"] = Address(addr_spec=a.reply_to)
    msg["Subject"] = a.subject if a.subject.lower().startswith("re:") else f"Re: {a.subject}"
    msg["Date"] = format_datetime(date or datetime.now(timezone.utc))
    msg["Message-ID"] = message_id or make_msgid(idstring=secrets.token_hex(6), domain=sender.rpartition("@")[2])
    msg["In-Reply-To"] = a.message_id
    msg["References"] = " ".join([*a.references, a.message_id])
    {"gmail": _gmail, "apple": _apple, "iphone": _iphone, "outlook": _outlook, "thunderbird": _thunderbird}[client](
        msg, a, text, charset)
    return msg.as_bytes()


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.rstrip("\n").split("\n"))


def _html_lines(text: str) -> str:
    return "<br>".join(html.escape(line) for line in text.rstrip("\n").split("\n"))


def _gmail(msg: EmailMessage, a: AlertFields, text: str, charset: str) -> None:
    when = f"{a.date:%a, %b} {a.date.day}, {a.date:%Y} at {a.date.hour % 12 or 12}:{a.date:%M} {a.date:%p}"
    attribution = f"On {when} {a.sender_name} <{a.sender}> wrote:"
    # Gmail wraps a long attribution in the plain part
    wrapped = "\n".join(textwrap.wrap(attribution, 60, break_long_words=False, break_on_hyphens=False))
    msg.set_content(f"{text}\n\n{wrapped}\n\n{_quoted(a.text)}\n", charset=charset)
    msg.add_alternative(
        f'<div dir="ltr">{_html_lines(text)}</div><br><div class="gmail_quote gmail_quote_container">'
        f'<div dir="ltr" class="gmail_attr">On {html.escape(when)} {html.escape(a.sender_name)} &lt;'
        f'<a href="mailto:{a.sender}">{a.sender}</a>&gt; wrote:<br></div><blockquote class="gmail_quote" '
        'style="margin:0px 0px 0px 0.8ex;border-left:1px solid rgb(204,204,204);padding-left:1ex">'
        f'<div style="font-family: sans-serif; white-space: pre-wrap">{html.escape(a.text)}</div></blockquote></div>\n',
        subtype="html", charset=charset)


def _apple(msg: EmailMessage, a: AlertFields, text: str, charset: str) -> None:
    when = f"{a.date.day} {a.date:%b %Y}, at {a.date:%H:%M}"
    msg.set_content(f"{text}\n\nOn {when}, {a.sender_name} <{a.sender}> wrote:\n\n{_quoted(a.text)}\n", charset=charset)


def _iphone(msg: EmailMessage, a: AlertFields, text: str, charset: str) -> None:
    when = f"{a.date:%b} {a.date.day}, {a.date:%Y}, at {a.date:%H:%M}"
    msg.set_content(f"{text}\n\nSent from my iPhone\n\n> On {when}, {a.sender_name} <{a.sender}> wrote:\n>\n"
                    f"{_quoted(a.text)}\n", charset=charset)


def _outlook(msg: EmailMessage, a: AlertFields, text: str, charset: str) -> None:
    sent = f"{a.date:%A, %B} {a.date.day}, {a.date:%Y} {a.date.hour % 12 or 12}:{a.date:%M} {a.date:%p}"
    body = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">'
        '<style type="text/css" style="display:none;"> P {margin-top:0;margin-bottom:0;} </style></head>'
        '<body dir="ltr"><div class="elementToProof" style="font-family: Aptos, Calibri, Helvetica, sans-serif; '
        f'font-size: 12pt;">{_html_lines(text)}</div><div id="appendonsend"></div>'
        '<hr style="display:inline-block;width:98%" tabindex="-1"><div id="divRplyFwdMsg" dir="ltr">'
        '<font face="Calibri, sans-serif" style="font-size:11pt" color="#000000">'
        f'<b>From:</b> {html.escape(a.sender_name)} &lt;{a.sender}&gt;<br><b>Sent:</b> {sent}<br>'
        f'<b>To:</b> {html.escape(str(msg["From"]))}<br><b>Subject:</b> {html.escape(a.subject)}</font>'
        f'<div>&nbsp;</div></div><div style="white-space: pre-wrap">{_html_lines(a.text)}</div></body></html>\n')
    msg.set_content(body, subtype="html", charset=charset)


def _thunderbird(msg: EmailMessage, a: AlertFields, text: str, charset: str) -> None:
    attribution = f"On {a.date:%m/%d/%y} {a.date:%H:%M}, {a.sender_name} <{a.sender}> wrote:"
    flowed = "\n".join(line + " " for line in textwrap.wrap(attribution, 50))[:-1]  # soft breaks: a space ends the line
    msg.set_content(f"{text}\n\n{flowed}\n{_quoted(a.text)}\n\n-- \nDana Owner\nOps, Example Inc.\n", charset=charset)
    msg.set_param("format", "flowed")


def as_received_by_ses(raw: bytes, *, spf: str = "pass", dkim: str = "pass", dmarc: str = "pass",
                       spam: str = "PASS", virus: str = "PASS") -> bytes:
    """``raw`` with the headers SES's receipt adds on top (verdicts, Received-SPF, Authentication-Results)."""
    sender = parseaddr(str(BytesParser(policy=policy.default).parsebytes(raw)["From"]))[1] or "unknown@example.com"
    domain = sender.rpartition("@")[2]
    head = (f"Return-Path: <{sender}>\r\n"
            f"Received: from mail.{domain} by inbound-smtp.us-east-1.amazonaws.com with SMTP id x1;\r\n"
            f" {format_datetime(datetime.now(timezone.utc))}\r\n"
            f"X-SES-Spam-Verdict: {spam}\r\nX-SES-Virus-Verdict: {virus}\r\n"
            f"Received-SPF: {spf} (spfCheck: domain of {domain} designates 192.0.2.1 as permitted sender)"
            f" client-ip=192.0.2.1; envelope-from={sender}; helo=mail.{domain};\r\n"
            f"Authentication-Results: amazonses.com;\r\n spf={spf} (spfCheck: 192.0.2.1 is permitted) "
            f"smtp.mailfrom={sender};\r\n dkim={dkim} header.i=@{domain};\r\n dmarc={dmarc} header.from={domain};\r\n")
    return head.encode() + raw


def ses_record(message_id: str, *, recipients: list[str], sender: str = "owner@example.com", source: str | None = None,
               spf: str = "PASS", dkim: str = "PASS", spam: str = "PASS", virus: str = "PASS",
               dmarc: str | None = "PASS", subject: str = "Re: [Zerg WARNING] Disk 91% full on web-1") -> dict[str, Any]:
    """One record of SES's Lambda event (receipt rule: S3 action to ``inbound/email/``, then Lambda)."""
    receipt: dict[str, Any] = {
        "timestamp": "2026-11-23T06:05:00.000Z", "processingTimeMillis": 420, "recipients": recipients,
        "spamVerdict": {"status": spam}, "virusVerdict": {"status": virus}, "spfVerdict": {"status": spf},
        "dkimVerdict": {"status": dkim},
        "action": {"type": "Lambda", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:zerg-events",
                   "invocationType": "Event"}}
    if dmarc is not None:
        receipt |= {"dmarcVerdict": {"status": dmarc}, "dmarcPolicy": "NONE"}
    return {"eventSource": "aws:ses", "eventVersion": "1.0", "ses": {
        "mail": {"timestamp": "2026-11-23T06:05:00.000Z", "source": source if source is not None else sender,
                 "messageId": message_id, "destination": recipients, "headersTruncated": False,
                 "headers": [{"name": "From", "value": f"Dana Owner <{sender}>"}],
                 "commonHeaders": {"returnPath": sender, "from": [f"Dana Owner <{sender}>"], "to": recipients,
                                   "subject": subject, "messageId": f"<{message_id}@mail.example.com>"}},
        "receipt": receipt}}
