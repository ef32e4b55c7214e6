"""Inbound SMS: a two-way SMS record (or a local injection) becomes an ``Inbound``; every bad
message is a refusal saying why that still fits its row; the carrier keywords match whole messages
only; STOP opts one owner's number out (nothing is texted to it, and deliver says why) until START."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.support.api import call
from tests.support.notify import texts, unique_number, verified_contact
from zerg.cli.main import main
from zerg.handler_input import InvalidEvent
from zerg.inbound import sms
from zerg.inbound.messages import Inbound
from zerg.notify import contacts
from zerg.notify.deliver import OPTED_OUT, deliver, release_held
from zerg.notify.policy import PolicyChange, set_policy

SNS_ID = "95df01b4-ee98-5cb9-9903-4c221d41eb5e"
NIGHT = datetime(2031, 1, 1, 23, 0, tzinfo=UTC)
MORNING = datetime(2031, 1, 2, 7, 0, tzinfo=UTC)


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def two_way(**fields) -> dict:
    """The JSON two-way SMS publishes (AWS's example shape), with ``fields`` changed; None drops one."""
    message = {"originationNumber": "+14255550182", "destinationNumber": "+12125550101", "messageKeyword": "KEYWORD_1",
               "messageBody": "make that check weekly", "inboundMessageId": "cae173d2-66b9-564c-8309-21f858e9fb84",
               "previousPublishedMessageId": "wJ0T9oP8tTAuXFCQFyvLxXaU47eMxu5R6Wx7pW6oG8UEXAMPLE"}
    message.update(fields)
    return {k: v for k, v in message.items() if v is not None}


def record(message: dict | str, message_id: str = SNS_ID) -> dict:
    """One record of the SNS event Lambda receives."""
    return {"EventSource": "aws:sns", "EventVersion": "1.0",
            "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:zerg-sms:1f2e",
            "Sns": {"Type": "Notification", "MessageId": message_id, "TopicArn": "arn:aws:sns:us-east-1:123456789012:zerg-sms",
                    "Subject": None, "Message": message if isinstance(message, str) else json.dumps(message),
                    "Timestamp": "2031-01-01T23:00:00.000Z", "SignatureVersion": "1", "Signature": "c2ln",
                    "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem", "MessageAttributes": {}}}


def record_row(pool, inbound: Inbound) -> dict:
    """What recording a refusal writes (the replies part owns the real insert): proves it fits the row."""
    with pool.connection() as conn:
        return conn.execute(
            """INSERT INTO inbound_messages (channel, provider_id, source, sender, recipient, body, status, reason)
               VALUES (%s, %s, %s, %s, %s, %s, 'rejected', %s) RETURNING id, provider_id, sender, body, status, reason""",
            (inbound.channel, f"{inbound.provider_id}-{datetime.now(UTC).timestamp()}", inbound.source, inbound.sender,
             inbound.recipient, inbound.body, inbound.rejection)).fetchone()


def inbound_row(pool, number: str) -> int:
    with pool.connection() as conn:
        return conn.execute("INSERT INTO inbound_messages (channel, provider_id, source, sender, body, status) "
                            "VALUES ('sms', %s, 'local', %s, 'STOP', 'keyword') RETURNING id",
                            (f"local-test-{unique_number()}-{datetime.now(UTC).timestamp()}", number)).fetchone()["id"]


def contact_row(pool, contact_id: int) -> dict:
    with pool.connection() as conn:
        return conn.execute("SELECT owner_id, opted_out_at, opted_out_by FROM owner_contacts WHERE id = %s",
                            (contact_id,)).fetchone()


# --- parsing -------------------------------------------------------------------------------------

def test_a_two_way_sms_record_becomes_an_inbound_with_its_ids_and_a_clean_body():
    inbound = sms.from_sns_record(record(two_way(messageBody="  make that\r\ncheck\tweekly \x00\u202e\u200b  ")))

    assert inbound == Inbound(
        channel="sms", provider_id="cae173d2-66b9-564c-8309-21f858e9fb84", source="sns", sender="+14255550182",
        body="make that\ncheck weekly", recipient="+12125550101",
        previous_provider_id="wJ0T9oP8tTAuXFCQFyvLxXaU47eMxu5R6Wx7pW6oG8UEXAMPLE",
        extra={"sns_message_id": SNS_ID, "topic_arn": "arn:aws:sns:us-east-1:123456789012:zerg-sms", "keyword": "KEYWORD_1"})


def test_an_sms_is_cleaned_by_the_rules_an_email_reply_is():
    from zerg.inbound.reply_text import clean_text

    text = "make it\x85weekly\u2029please \U000e0041\ufeff👨\u200d💻"
    inbound = sms.from_sns_record(record(two_way(messageBody=text)))
    assert inbound.body == clean_text(text) == "make it\nweekly\n\nplease 👨\u200d💻"


def test_an_emoji_reply_keeps_its_joined_emoji_and_a_first_message_needs_no_previous_id():
    inbound = sms.from_sns_record(record(two_way(messageBody="👍🏽 👨\u200d💻", previousPublishedMessageId=None,
                                                 messageKeyword=None)))
    assert (inbound.rejection, inbound.body, inbound.previous_provider_id) == (None, "👍🏽 👨\u200d💻", None)


LONG = "x" * (sms.MAX_BODY_CHARS + 1)
BAD_MESSAGES = [  # (the SNS Message, its provider id, the reason)
    ("ack", f"sns-{SNS_ID}", "the SNS message is not JSON (two-way SMS publishes a JSON object)"),
    ("[" * 100_000, f"sns-{SNS_ID}", "the SNS message is not JSON (two-way SMS publishes a JSON object)"),
    ('["ack"]', f"sns-{SNS_ID}", "the SNS message is a JSON array, not the two-way SMS object"),
    ("null", f"sns-{SNS_ID}", "the SNS message is a JSON null, not the two-way SMS object"),
    (two_way(originationNumber=None, messageBody=None), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "two-way SMS message: originationNumber is missing; messageBody is missing"),
    (two_way(inboundMessageId=None), f"sns-{SNS_ID}", "two-way SMS message: inboundMessageId is missing"),
    (two_way(inboundMessageId="id with spaces\n"), f"sns-{SNS_ID}", "two-way SMS message: inboundMessageId is not a "
     "message id (letters, digits and -_.:/+=, at most 200)"),
    (two_way(inboundMessageId="x" * 201), f"sns-{SNS_ID}", "two-way SMS message: inboundMessageId is not a message id "
     "(letters, digits and -_.:/+=, at most 200)"),
    (two_way(messageBody=42, originationNumber=14255550182), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "two-way SMS message: originationNumber is not a string; messageBody is not a string"),
    (two_way(originationNumber="+1" + "5" * 50), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "two-way SMS message: originationNumber is longer than 40 characters"),
    (two_way(originationNumber="555-0182"), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "originationNumber: '555-0182' is not a phone number in E.164 form: '+', the country code and the number, "
     "8 to 16 characters, e.g. +15551234567"),
    (two_way(destinationNumber="our number"), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "destinationNumber: not a phone number (E.164) or short code"),
    (two_way(previousPublishedMessageId="<script>"), "cae173d2-66b9-564c-8309-21f858e9fb84",
     "two-way SMS message: previousPublishedMessageId is not a message id (letters, digits and -_.:/+=, at most 200)"),
    (two_way(messageBody=" \n\x00\u200b "), "cae173d2-66b9-564c-8309-21f858e9fb84", "the SMS has no text"),
    (two_way(messageBody=LONG), "cae173d2-66b9-564c-8309-21f858e9fb84", "the SMS has 1,601 characters; a reply has at most 1,600"),
]


@pytest.mark.parametrize(("message", "provider_id", "reason"), BAD_MESSAGES)
def test_each_bad_sms_message_is_a_refusal_saying_why_that_can_be_recorded(pool, message, provider_id, reason):
    inbound = sms.from_sns_record(record(message))

    assert (inbound.channel, inbound.source, inbound.provider_id, inbound.rejection) == ("sms", "sns", provider_id, reason)
    row = record_row(pool, inbound)  # fits the row: nothing about it can fail the refusal's record
    assert (row["status"], row["reason"]) == ("rejected", reason)


def test_a_refusal_keeps_what_could_be_read_bounded_and_without_nul_or_lone_surrogates(pool):
    inbound = sms.from_sns_record(record(two_way(originationNumber="+1\x00555\ud800", messageBody="\ud800" + "é" * 30_000)))

    assert inbound.rejection == "originationNumber: the sms address contains a control character (a line break?)"
    assert (inbound.sender, inbound.body) == ("+1555", "é" * sms.RECORD_MAX_CHARS)  # the text kept, up to the row's bound
    row = record_row(pool, inbound)
    assert (row["sender"], len(row["body"])) == ("+1555", sms.RECORD_MAX_CHARS)
    too_long = sms.from_sns_record(record(two_way(messageBody=LONG)))
    assert too_long.body == LONG  # refused, yet nothing of it lost


def test_the_same_record_delivered_twice_has_one_provider_id_even_without_an_inbound_id():
    for message in (two_way(), two_way(inboundMessageId=None), "not json"):
        first, again = sms.from_sns_record(record(message)), sms.from_sns_record(record(message))
        assert first.provider_id == again.provider_id
    other = sms.from_sns_record(record(two_way(inboundMessageId=None), message_id="5a3f0c1e-0000-4000-8000-000000000001"))
    assert other.provider_id == "sns-5a3f0c1e-0000-4000-8000-000000000001"


@pytest.mark.parametrize(("envelope", "field"), [
    ({"EventSource": "aws:s3", "Sns": {"MessageId": SNS_ID, "Message": "{}"}}, "EventSource"),
    ({"EventSource": "aws:sns"}, "Sns: Field required"),
    ({"EventSource": "aws:sns", "Sns": {"MessageId": "../../x", "Message": "{}"}}, "Sns.MessageId"),
    ({"EventSource": "aws:sns", "Sns": {"MessageId": SNS_ID, "Message": 7}}, "Sns.Message"),
    ({"EventSource": "aws:sns", "Sns": {"MessageId": SNS_ID, "Message": "x" * (256 * 1024 + 1)}}, "Sns.Message"),
    ({"EventSource": "aws:sns", "Sns": {"Type": "SubscriptionConfirmation", "MessageId": SNS_ID, "Message": "{}"}},
     "Sns.Type"),
    ("not a record", "event"),
])
def test_a_bad_sns_envelope_is_an_invalid_event_naming_the_field(envelope, field):
    with pytest.raises(InvalidEvent, match=r"^invalid SNS event: .*" + field.replace(".", r"\.")):
        sms.from_sns_record(envelope)


def test_a_local_sms_is_one_message_per_id_the_caller_gives():
    given = sms.from_local("+1 (425) 555-0182", " ack ", previous_provider_id="outbox-20310101T230000000000Z-ab12cd34-1",
                           message_id="a" * 64)
    assert (given.source, given.provider_id, given.sender, given.body, given.previous_provider_id, given.rejection) == (
        "local", "local-" + "a" * 64, "+14255550182", "ack", "outbox-20310101T230000000000Z-ab12cd34-1", None)
    assert sms.from_local("+14255550182", "other text", message_id="a" * 64).provider_id == given.provider_id

    first, second = sms.from_local("+14255550182", "ack"), sms.from_local("+14255550182", "ack")
    assert first.provider_id != second.provider_id  # no id: every call a new message (the CLI sending twice on purpose)

    odd = sms.from_local("+14255550182", "ack", message_id="my id\n" * 100)
    assert odd.provider_id == sms.from_local("+14255550182", "x", message_id="my id\n" * 100).provider_id
    assert odd.provider_id.startswith("local-sha256-") and len(odd.provider_id) <= 300


@pytest.mark.parametrize(("sender", "text", "previous", "reason"), [
    ("5550182", "ack", None, "from: '5550182' is not a phone number in E.164 form"),
    (15550182, "ack", None, "from: not a string"),
    ("+14255550182", ["ack"], None, "text: not a string"),
    ("+14255550182", "ack", 7, "reply_to: not a string"),
    ("+14255550182", "   ", None, "the SMS has no text"),
    ("+14255550182", LONG, None, "the SMS has 1,601 characters; a reply has at most 1,600"),
    ("+14255550182", "ack", "not an id!", "the message it answers is not a message id"),
])
def test_a_bad_local_sms_is_a_refusal_like_one_from_sns(pool, sender, text, previous, reason):
    inbound = sms.from_local(sender, text, previous_provider_id=previous, message_id="b" * 64)
    assert inbound.source == "local" and inbound.provider_id == "local-" + "b" * 64
    assert inbound.rejection.startswith(reason)
    assert record_row(pool, inbound)["status"] == "rejected"


# --- keywords ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "word"), [
    ("STOP", "stop"), ("stop", "stop"), (" Stop. ", "stop"), ("STOP!!", "stop"), ("stopall", "stop"),
    ("Unsubscribe", "stop"), ("cancel", "stop"), ("END", "stop"), ("quit", "stop"), ("revoke", "stop"),
    ("opt out", "stop"), ("OPT-OUT", "stop"), ("optout", "stop"),
    ("START", "start"), ("unstop", "start"), ("Start.", "start"),
    ("HELP", "help"), ("help?", "help"), ("Info", "help"),
    ("yes", None), ("YES", None), ("ok", None), ("ack", None), ("", None),
    ("stop the backup check", None), ("please stop", None), ("help me with the disk", None), ("STOPP", None),
    ("ſtop", None), ("ＳＴＯＰ", None), ("S T O P", None), (".stop", None),
])
def test_the_carrier_keywords_match_the_whole_message_only(body, word):
    assert sms.keyword(body) == word


def test_the_help_text_fits_one_sms_and_says_what_zerg_sends_and_how_to_stop():
    assert len(sms.HELP_TEXT) <= 160 and sms.HELP_TEXT.isascii()  # GSM-7: one part
    assert all(word in sms.HELP_TEXT for word in ("Zerg", "alerts", "ACK", "STOP", "START"))


# --- opt-out ---------------------------------------------------------------------------------------

def test_stop_opts_out_only_that_owners_number_and_start_opts_it_back_in(pool, alice, bob):
    mine, theirs = verified_contact(pool, alice.owner_id, "sms"), verified_contact(pool, bob.owner_id, "sms")
    stop = inbound_row(pool, mine["address"])

    with pool.connection() as conn:
        assert contacts.opt_out(conn, bob.owner_id, mine["id"], stop) is None  # another owner's id: nothing
        assert contacts.opt_in(conn, bob.owner_id, mine["id"]) is None
        opted = contacts.opt_out(conn, alice.owner_id, mine["id"], stop)
        assert opted["id"] == mine["id"] and opted["opted_out_at"] and opted["opted_out_by"] == stop
        assert contacts.verified_contacts(conn, alice.owner_id, "sms") == []
        assert [c["id"] for c in contacts.opted_out_contacts(conn, alice.owner_id, "sms")] == [mine["id"]]
        assert contacts.opted_out_contacts(conn, bob.owner_id, "sms") == []
        assert [c["id"] for c in contacts.verified_contacts(conn, bob.owner_id, "sms")] == [theirs["id"]]
    assert contact_row(pool, theirs["id"]) == {"owner_id": bob.owner_id, "opted_out_at": None, "opted_out_by": None}

    again = inbound_row(pool, mine["address"])
    with pool.connection() as conn:  # a second STOP keeps the first one's time and message
        assert contacts.opt_out(conn, alice.owner_id, mine["id"], again) == opted
        back = contacts.opt_in(conn, alice.owner_id, mine["id"])
        assert (back["opted_out_at"], back["opted_out_by"]) == (None, None)
        assert [c["id"] for c in contacts.verified_contacts(conn, alice.owner_id, "sms")] == [mine["id"]]


def test_an_email_contact_cannot_opt_out_by_sms_keyword(pool, alice):
    mail = verified_contact(pool, alice.owner_id, "email")
    with pool.connection() as conn:
        assert contacts.opt_out(conn, alice.owner_id, mail["id"], None) is None
        assert [c["id"] for c in contacts.verified_contacts(conn, alice.owner_id, "email")] == [mail["id"]]


def test_sender_contact_finds_only_verified_numbers_and_still_hears_an_opted_out_one(pool, alice):
    with pool.connection() as conn:
        unverified = conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'sms', %s) "
                                  "RETURNING id, address", (alice.owner_id, unique_number())).fetchone()
        assert contacts.sender_contact(conn, "sms", unverified["address"]) is None
        assert contacts.sender_contact(conn, "email", unverified["address"]) is None
    phone = verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        contacts.opt_out(conn, alice.owner_id, phone["id"], None)
        found = contacts.sender_contact(conn, "sms", phone["address"])  # its START must still be heard
    assert (found["id"], found["owner_id"]) == (phone["id"], alice.owner_id) and found["opted_out_at"]


def test_a_text_to_an_owner_whose_every_number_opted_out_is_suppressed_saying_so_and_sent_after_start(rt, pool, alice):
    phone = verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        contacts.opt_out(conn, alice.owner_id, phone["id"], inbound_row(pool, phone["address"]))

    (row,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 91%", severity="critical")
    assert (row["status"], row["reason"], row["address"]) == ("suppressed", OPTED_OUT, None)
    assert OPTED_OUT == "opted out (STOP)" and texts(rt.settings.data_dir) == []

    with pool.connection() as conn:
        contacts.opt_in(conn, alice.owner_id, phone["id"])
    (row,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 92%", severity="critical")
    assert (row["status"], row["address"]) == ("sent", phone["address"])
    assert [(t["to"], t["parts"]) for t in texts(rt.settings.data_dir)] == [(phone["address"], ["Disk 92%"])]


def test_a_number_that_opted_out_is_skipped_while_the_owners_other_numbers_get_the_text(rt, pool, alice):
    quiet, loud = verified_contact(pool, alice.owner_id, "sms"), verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        contacts.opt_out(conn, alice.owner_id, quiet["id"], None)

    rows = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 91%")
    assert [(r["status"], r["address"]) for r in rows] == [("sent", loud["address"])]
    assert [t["to"] for t in texts(rt.settings.data_dir)] == [loud["address"]]
    (mail,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk", body="91%")
    assert mail["reason"] == "no verified email contact"  # an SMS STOP says nothing about email


def test_a_held_text_to_a_number_that_opted_out_meanwhile_is_suppressed_at_release(rt, pool, alice):
    phone = verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(quiet_hours="22:00-07:00", timezone="UTC"))
    (held,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 91%", severity="warning",
                      hold_in_quiet_hours=True, now=NIGHT)
    with pool.connection() as conn:
        contacts.opt_out(conn, alice.owner_id, phone["id"], None)

    release_held(rt, now=MORNING)

    with pool.connection() as conn:
        row = conn.execute("SELECT status, reason FROM notifications WHERE id = %s", (held["id"],)).fetchone()
    assert row == {"status": "suppressed", "reason": "held for quiet hours; opted out (STOP) meanwhile"}
    assert [t for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == []


def test_the_owner_sees_the_opt_out_in_the_api_and_the_cli_and_another_owner_sees_nothing(rt, pool, alice, bob, capsys):
    phone = verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        contacts.opt_out(conn, alice.owner_id, phone["id"], None)
    tokens = {o.owner_id: call("POST", "/api/jarvis/auth", {"device_secret": o.device_secret})[1]["token"]
              for o in (alice, bob)}

    status, listing, _ = call("GET", "/api/jarvis/contacts", token=tokens[alice.owner_id])
    (shown,) = listing["contacts"]
    assert status == 200 and shown["id"] == phone["id"] and shown["verified"] is True and shown["opted_out_at"]
    assert call("GET", "/api/jarvis/contacts", token=tokens[bob.owner_id])[1] == {"contacts": []}

    assert main(["contacts", "list", "--owner", alice.name]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    fields = line.split("\t")
    assert fields[:4] == [str(phone["id"]), "sms", phone["address"], "verified"]
    assert fields[4].startswith("opted out (STOP) ") and fields[4].endswith(" UTC")


@pytest.mark.parametrize(("body", "answer"), [
    ("Y 4821", ("approve", "4821")), ("y 4821", ("approve", "4821")), ("YES 0042.", ("approve", "0042")),
    ("approve #4821", ("approve", "4821")), ("N 4821", ("deny", "4821")), (" no   4821 ", ("deny", "4821")),
    ("deny 4821!", ("deny", "4821")), ("Y", None), ("yes", None), ("Y 482", None), ("Y 48211", None),
    ("Y 4821 and restart the db", None), ("maybe 4821", None), ("Y ٤٨٢١", None),
])
def test_an_approval_answer_is_the_whole_message_with_a_four_digit_code(body, answer):
    assert sms.approval_answer(body) == answer
