"""The notifier contract: the local outbox and AWS (SES v2 + SNS under moto) send the same messages,
read back from where each one keeps them (.eml/.json files; moto's SES and SNS backends)."""

from __future__ import annotations

import email
import email.policy
import json
import os
import re
import stat

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from tests.support.notify import body_of
from zerg.notify.channels.notifier import SMS_MAX_BYTES, SMS_MAX_PARTS, header_text, split_sms
from zerg.ports import Email, NotifierError, Sms

REGION = "us-east-1"
SENDER = "zerg@zerg.example.org"


class Outbox:
    """The local implementation and how to read back what it sent."""

    def __init__(self, tmp_path):
        from zerg.notify.channels.outbox import OutboxNotifier

        self.dir = tmp_path / "data" / "outbox"
        self.notifier = OutboxNotifier(self.dir)

    def emails(self):
        return [(email.message_from_bytes(p.read_bytes(), policy=email.policy.default), None)
                for p in sorted(self.dir.glob("*.eml"))]

    def raw(self):
        return [p.read_bytes() for p in sorted(self.dir.glob("*.eml"))]

    def texts(self):
        return [(sms["to"], part) for p in sorted(self.dir.glob("*.json")) for sms in [json.loads(p.read_text())]
                for part in sms["parts"]]

    def break_email(self):
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        self.dir.write_text("a file where the outbox should be")


class Aws:
    """SES v2 and SNS under moto, and the messages moto recorded."""

    def __init__(self):
        from zerg.notify.channels.notifier import AwsNotifier
        from zerg.notify.channels.ses import SesEmail
        from zerg.notify.channels.sns import SnsSms

        self.ses = boto3.client("sesv2", region_name=REGION)
        self.ses.create_email_identity(EmailIdentity="zerg.example.org")  # SES sends only from a verified identity
        self.notifier = AwsNotifier(SesEmail(self.ses), SnsSms("+15550000000", boto3.client("sns", region_name=REGION)))

    def emails(self):
        from moto.ses.models import ses_backends

        sent = ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages
        return [(email.message_from_bytes(m.raw_data.encode().replace(b"\r\n", b"\n"), policy=email.policy.default),
                 set(m.destinations)) for m in sent]  # as a mail client reads it (CRLF on the wire)

    def raw(self):
        from moto.ses.models import ses_backends

        return [m.raw_data.encode() for m in ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages]

    def texts(self):
        from moto.sns.models import sns_backends

        return list(sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages.values())

    def break_email(self):
        self.ses.delete_email_identity(EmailIdentity="zerg.example.org")


@pytest.fixture(params=["local", "aws"])
def impl(request, tmp_path):
    if request.param == "local":
        yield Outbox(tmp_path)
    else:
        with mock_aws():
            yield Aws()


def _email(**kw) -> Email:
    return Email(**{"to": "owner@example.com", "subject": "Disk 91% on cube", "text": "Disk /var is at 91%.\n\n<b>not html</b>",
                    "sender": SENDER, "reply_to": "reply+tok123@zerg.example.org",
                    "message_id": "<m1@zerg.example.org>", **kw})


def test_an_email_arrives_with_text_html_reply_to_and_threading(impl):
    sent = impl.notifier.send_email(_email(in_reply_to="<earlier@zerg.example.org>"))

    ((msg, envelope),) = impl.emails()
    assert msg["To"] == "owner@example.com" and msg["From"] == f"Zerg <{SENDER}>"
    assert msg["Subject"] == "Disk 91% on cube" and msg["Reply-To"] == "reply+tok123@zerg.example.org"
    assert msg["In-Reply-To"] == msg["References"] == "<earlier@zerg.example.org>"
    assert msg["Date"] and msg["Auto-Submitted"] == "auto-generated"
    assert body_of(msg).rstrip("\n") == "Disk /var is at 91%.\n\n<b>not html</b>"
    assert "&lt;b&gt;not html&lt;/b&gt;" in body_of(msg, "html")  # the text, escaped, in the HTML alternative
    assert envelope in (None, {"owner@example.com"})  # SES: the envelope names only the recipient
    assert sent.provider_message_id and re.fullmatch(r"<[^<>@\s]+@[^<>@\s]+>", sent.message_id)
    if envelope is None:
        assert msg["Message-ID"] == sent.message_id == "<m1@zerg.example.org>"
    else:  # SES replaces Message-ID with its own: the one a reply's In-Reply-To carries
        assert sent.message_id == f"<{sent.provider_message_id}@email.amazonses.com>"


# SES gives every message it sends an id like this (82+ characters); Outlook's are ~90.
SES_ID = "<0100018f3c2a9b1d-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9-000000@email.amazonses.com>"
OUTLOOK_ID = "<DB9PR07MB1234567890ABCDEF1234567890ABCDEF1234567890AB@DB9PR07MB1234.eurprd07.prod.outlook.com>"


def _thread_ids(raw: bytes, name: str) -> tuple[list[str], list[bytes]]:
    """The msg-id tokens of header ``name`` as a mail client threading reads them (compat32: the raw
    value, no encoded word decoded), and the header's physical lines."""
    from email.parser import BytesHeaderParser
    from email.policy import compat32

    value = str(BytesHeaderParser(policy=compat32).parsebytes(raw)[name] or "")
    head = raw.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0].split(b"\n")
    start = next(i for i, line in enumerate(head) if line.lower().startswith(name.lower().encode() + b":"))
    end = next((i for i in range(start + 1, len(head)) if head[i][:1] not in (b" ", b"\t")), len(head))
    return re.findall(r"<[^<>\s]+>", value), head[start:end]


def test_long_message_ids_thread_as_whole_msg_id_tokens_never_encoded_words(impl):
    assert len(SES_ID) >= 82 and len(OUTLOOK_ID) >= 85
    impl.notifier.send_email(_email(in_reply_to=OUTLOOK_ID, references=(SES_ID, "<short@example.com>")))

    (raw,) = impl.raw()
    in_reply_to, in_reply_to_lines = _thread_ids(raw, "In-Reply-To")
    references, references_lines = _thread_ids(raw, "References")
    assert in_reply_to == [OUTLOOK_ID]
    assert references == [SES_ID, "<short@example.com>", OUTLOOK_ID]
    lines = in_reply_to_lines + references_lines
    assert not any(b"=?" in line for line in lines) and all(len(line) <= 998 for line in lines)
    # folded only between ids: every line holds whole ids, and short ones share a line within 78
    assert all(len(line) <= 78 or len(re.findall(rb"<[^<>\s]+>", line)) == 1 for line in lines)


def test_many_short_message_ids_fold_between_ids_within_78_characters(impl):
    ids = tuple(f"<thread-{i:03d}@zerg.example.org>" for i in range(20))
    impl.notifier.send_email(_email(in_reply_to=ids[-1], references=ids[:-1]))

    (raw,) = impl.raw()
    references, lines = _thread_ids(raw, "References")
    assert references == list(ids) and len(lines) > 1 and all(len(line) <= 78 for line in lines)


def test_an_in_reply_to_that_is_no_message_id_is_left_out(impl):
    impl.notifier.send_email(_email(in_reply_to="not an id, ünïcode"))

    ((msg, _),) = impl.emails()
    assert msg["In-Reply-To"] is None and msg["References"] is None


def test_a_subject_or_name_with_line_breaks_adds_no_header(impl):
    impl.notifier.send_email(_email(subject="Disk\r\nBcc: evil@example.com", sender_name="Zerg\nCc: evil2@example.com",
                                    text="body"))

    ((msg, envelope),) = impl.emails()
    assert msg["Bcc"] is None and msg["Cc"] is None
    assert msg["Subject"] == "Disk Bcc: evil@example.com"
    assert "evil2@example.com" in msg["From"] and msg["From"].addresses[0].addr_spec == SENDER
    assert envelope in (None, {"owner@example.com"})


def test_a_short_sms_is_one_message_as_written(impl):
    ids = impl.notifier.send_sms(Sms(to="+15551234567", text="Disk 91% on cube"))

    assert len(ids) == 1 and ids[0]
    assert impl.texts() == [("+15551234567", "Disk 91% on cube")]


def test_a_long_sms_goes_in_numbered_parts_cut_at_sentences(impl):
    sentences = [f"Sentence {i} says something about the disk on cube." for i in range(80)]  # ~4,100 characters
    ids = impl.notifier.send_sms(Sms(to="+15551234567", text=" ".join(sentences)))

    parts = impl.texts()
    assert len(ids) == len(parts) == 3 and len(set(ids)) == 3
    assert [p[1][:6] for p in parts] == ["(1/3) ", "(2/3) ", "(3/3) "]
    assert all(to == "+15551234567" and len(text.encode()) <= SMS_MAX_BYTES for to, text in parts)
    assert all(text.endswith(".") for _, text in parts)  # each part ends a sentence
    assert " ".join(text[6:] for _, text in parts) == " ".join(sentences)  # nothing lost, nothing added


def test_a_provider_failure_is_a_notifier_error_and_nothing_is_sent(impl):
    impl.break_email()

    with pytest.raises(NotifierError) as raised:
        impl.notifier.send_email(_email())
    assert str(raised.value)
    assert impl.emails() == [] if isinstance(impl, Aws) else not list(impl.dir.parent.glob("outbox/*.eml"))


# --- what only one side has ---------------------------------------------------------------------

def test_the_outbox_files_are_private_and_written_whole(tmp_path, caplog):
    impl = Outbox(tmp_path)
    impl.notifier.send_email(_email())
    impl.notifier.send_sms(Sms(to="+15551234567", text="hi"))

    assert stat.S_IMODE(os.stat(impl.dir).st_mode) == 0o700
    files = sorted(impl.dir.iterdir())
    assert [f.suffix for f in files] == [".eml", ".json"]  # no temporary file left behind
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert set(json.loads(files[1].read_text())) == {"to", "parts", "created"}


def test_sns_marks_each_sms_transactional_and_names_the_origination_number():
    with mock_aws():
        impl = Aws()
        seen = []
        impl.notifier.sms.client.meta.events.register(
            "provide-client-params.sns.Publish", lambda params, **_: seen.append(params["MessageAttributes"]))
        impl.notifier.send_sms(Sms(to="+15551234567", text="x " * 1000))
    assert len(seen) == 2 and all(a == {
        "AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"},
        "AWS.MM.SMS.OriginationNumber": {"DataType": "String", "StringValue": "+15550000000"}} for a in seen)


def test_ses_sends_the_message_raw_to_the_one_recipient():
    with mock_aws():
        impl = Aws()
        calls = []
        impl.ses.meta.events.register("provide-client-params.sesv2.SendEmail", lambda params, **_: calls.append(params))
        impl.notifier.send_email(_email(subject="Disk\r\nBcc: evil@example.com"))
    ((params,),) = [calls]
    assert params["Destination"] == {"ToAddresses": ["owner@example.com"]} and set(params["Content"]) == {"Raw"}
    raw = params["Content"]["Raw"]["Data"]
    assert b"\nBcc:" not in raw and raw.startswith(b"Subject: Disk Bcc: evil@example.com\r\n")


# --- the shared helpers -------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "flat"), [
    ("Disk\r\nBcc: evil@example.com", "Disk Bcc: evil@example.com"),
    ("a\u2028b\u0085c\x00d\te", "a b c d e"),
    ("  many   spaces  ", "many spaces"),
])
def test_header_text_flattens_every_line_break_and_control_character(value, flat):
    assert header_text(value) == flat


def test_header_text_cuts_a_long_subject_with_an_ellipsis():
    cut = header_text("word " * 100)
    assert len(cut) == 200 and cut.endswith("…")


def test_split_sms_prefers_line_breaks_then_sentences_then_words():
    lines = "\n".join(f"line {i} " + "x" * 80 for i in range(40))  # ~3,500 bytes of lines
    assert all(p.split(" ", 1)[1].startswith("line ") for p in split_sms(lines))
    words = " ".join(["word"] * 900)  # no sentence ends, no lines
    parts = split_sms(words)
    assert len(parts) == 3 and all(p.endswith("word") for p in parts)
    unbroken = "x" * 4000
    assert "".join(p.split(" ", 1)[1] for p in split_sms(unbroken)) == unbroken  # cut where it must be
    assert all(len(p.encode()) <= SMS_MAX_BYTES for p in split_sms("ü" * 3000))  # bytes, not characters


def test_split_sms_sizes_the_prefix_from_the_real_part_count():
    two = "x" * (2 * (SMS_MAX_BYTES - len("(1/2) ")))  # fills exactly two parts behind a "(n/2) " prefix
    parts = split_sms(two)
    assert [p[:6] for p in parts] == ["(1/2) ", "(2/2) "] and all(len(p.encode()) == SMS_MAX_BYTES for p in parts)
    ten = split_sms("word " * 3000)  # ~15,000 bytes: ten parts, "(10/10) " the widest prefix
    assert len(ten) == 10 and ten[-1].startswith("(10/10) ") and all(len(p.encode()) <= SMS_MAX_BYTES for p in ten)


def test_split_sms_caps_the_parts_and_ends_the_last_with_an_ellipsis():
    for text in ("x" * 200_000, "ü" * 100_000, "word " * 40_000):  # 100+ parts uncapped
        parts = split_sms(text)
        assert len(parts) == SMS_MAX_PARTS and all(len(p.encode()) <= SMS_MAX_BYTES for p in parts)
        assert [p.split(" ", 1)[0] for p in parts] == [f"({i}/10)" for i in range(1, 11)]
        assert parts[-1].endswith("…") and not parts[-2].endswith("…")
        assert len(parts[-1].encode()) > SMS_MAX_BYTES - 20  # the last part is filled before it is cut
