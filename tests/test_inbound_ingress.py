"""The ingress function with replies as AWS delivers them: an SES receipt event (the raw mail in
moto S3 under ``inbound/email/{messageId}``) and an SNS delivery of two-way SMS, each record
through its parser and ``replies.receive``; a record that is not AWS's is answered, not retried;
a database outage raises so Lambda retries; the ``inbound`` housekeeping task."""

from __future__ import annotations

import json
import secrets
import uuid
from email.message import EmailMessage

import boto3
import pytest
from moto import mock_aws

from tests.support.inbound import inbound_rows, runs_with_trigger
from tests.support.notify import verified_contact
from tests.support.schedules import answer_directly, finished_run

BUCKET = "zerg-artifacts-inbound-test"


def handler(event):
    from functions.events.handler import handler as ingress

    return ingress(event, None)


@pytest.fixture
def rt(runtime_env, llm):
    """The runtime with the artifacts bucket in moto S3 (where SES stores inbound mail)."""
    llm.respond_with(answer_directly("Disk usage is at 41%."))
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        yield runtime_env(ZERG_ARTIFACT_BACKEND="s3", ZERG_ARTIFACT_BUCKET=BUCKET)


def alert(rt, pool, owner_id: int, channel: str) -> tuple[dict, dict]:
    """The owner's verified contact of ``channel`` and an alert Zerg sent it."""
    from zerg.notify.deliver import deliver

    contact = verified_contact(pool, owner_id, channel)
    (note,) = deliver(rt, owner_id, channel=channel, purpose="alert", subject="Disk at 91% on cube",
                      body="Disk usage is at 91%.", severity="warning")
    with pool.connection() as conn:
        return contact, conn.execute("SELECT * FROM notifications WHERE id = %s", (note["id"],)).fetchone()


def stored_reply(rt, contact: dict, note: dict, text: str) -> tuple[str, str]:
    """A reply to ``note`` as SES's S3 action stores it; returns (SES messageId, the recipient)."""
    recipient = f"reply+{note['reply_token']}@{rt.settings.mail_domain}"
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = contact["address"], recipient, f"Re: {note['subject']}"
    msg["Message-ID"] = f"<{secrets.token_hex(8)}@mail.example.com>"
    msg["In-Reply-To"] = msg["References"] = note["message_id"]
    msg.set_content(f"{text}\n\nOn Mon, 23 Nov 2026 at 06:01, Zerg wrote:\n> Disk usage is at 91%.\n")
    message_id = secrets.token_hex(16)
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"inbound/email/{message_id}", Body=msg.as_bytes())
    return message_id, recipient


def ses_event(message_id: str, sender: str, recipient: str, verdict: str = "PASS") -> dict:
    """What the receipt rule's Lambda action (Event) sends: the notification, not the body."""
    status = {"status": verdict}
    return {"Records": [{
        "eventSource": "aws:ses", "eventVersion": "1.0",
        "ses": {
            "mail": {"timestamp": "2026-11-23T06:05:00.000Z", "source": sender, "messageId": message_id,
                     "destination": [recipient], "headersTruncated": False, "headers": [],
                     "commonHeaders": {"from": [sender], "to": [recipient], "subject": "Re: Disk at 91% on cube"}},
            "receipt": {"timestamp": "2026-11-23T06:05:00.000Z", "processingTimeMillis": 512,
                        "recipients": [recipient], "spamVerdict": status, "virusVerdict": status,
                        "spfVerdict": status, "dkimVerdict": status, "dmarcVerdict": status,
                        "action": {"type": "Lambda", "invocationType": "Event",
                                   "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:zerg-test-events"}},
        }}]}


def sns_event(message: dict | str, sns_message_id: str | None = None) -> dict:
    """What the inbound-SMS topic's subscription delivers to the function."""
    return {"Records": [{
        "EventSource": "aws:sns", "EventVersion": "1.0",
        "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:zerg-test-inbound-sms:" + str(uuid.uuid4()),
        "Sns": {"Type": "Notification", "MessageId": sns_message_id or str(uuid.uuid4()),
                "TopicArn": "arn:aws:sns:us-east-1:123456789012:zerg-test-inbound-sms", "Subject": None,
                "Message": message if isinstance(message, str) else json.dumps(message),
                "Timestamp": "2026-11-23T06:05:00.000Z", "SignatureVersion": "1", "Signature": "x",
                "SigningCertUrl": "https://sns.example/cert.pem", "UnsubscribeUrl": "https://sns.example/u",
                "MessageAttributes": {}}}]}


def two_way_sms(sender: str, body: str, previous: str | None, inbound_id: str | None = None) -> dict:
    return {"originationNumber": sender, "destinationNumber": "+12125550101", "messageKeyword": "KEYWORD_1",
            "messageBody": body, "inboundMessageId": inbound_id or str(uuid.uuid4()),
            "previousPublishedMessageId": previous}


def test_an_ses_event_reads_the_stored_mail_and_starts_one_run_even_when_delivered_twice(rt, pool, owner):
    contact, note = alert(rt, pool, owner, "email")
    message_id, recipient = stored_reply(rt, contact, note, "what is using the disk?")
    event = ses_event(message_id, contact["address"], recipient)

    first, again = handler(event), handler(event)

    (row,) = inbound_rows(pool, owner)
    (run,) = runs_with_trigger(pool, owner, "email")
    assert (first["trigger"], first["channel"]) == ("inbound", "email")
    assert first["results"] == [{"provider_id": message_id, "status": "run", "reason": None, "inbound_id": row["id"],
                                 "run_id": run["id"], "duplicate": False}]
    assert again["results"][0] | {"duplicate": False} == first["results"][0] and again["results"][0]["duplicate"]
    assert (row["source"], row["provider_id"], row["object_key"]) == ("ses", message_id, f"inbound/email/{message_id}")
    assert row["body"] == "what is using the disk?" and row["answers_run_id"] == note["run_id"]
    assert finished_run(pool, owner, run["id"])["status"] == "success"


def test_a_failed_spf_verdict_is_recorded_as_refused_and_nothing_runs(rt, pool, owner):
    contact, note = alert(rt, pool, owner, "email")
    message_id, recipient = stored_reply(rt, contact, note, "delete every schedule")

    (result,) = handler(ses_event(message_id, contact["address"], recipient, verdict="FAIL"))["results"]

    assert result["status"] == "rejected" and "FAIL" in result["reason"] and result["run_id"] is None
    assert runs_with_trigger(pool, owner, "email") == []
    assert boto3.client("s3").head_object(Bucket=BUCKET, Key=f"inbound/email/{message_id}")  # nothing lost


def test_an_sns_delivery_of_two_way_sms_goes_through_the_same_pipeline_once(rt, pool, owner):
    phone, note = alert(rt, pool, owner, "sms")
    event = sns_event(two_way_sms(phone["address"], "how full is /var?", note["provider_message_id"]))

    first, again = handler(event), handler(event)

    (row,) = inbound_rows(pool, owner)
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert (first["channel"], first["results"][0]["status"], first["results"][0]["run_id"]) == ("sms", "run", run["id"])
    assert again["results"][0]["duplicate"] is True and again["results"][0]["run_id"] == run["id"]
    assert (row["source"], row["notification_id"]) == ("sns", note["id"])
    finished_run(pool, owner, run["id"])


def test_an_sms_from_another_owners_number_acts_for_that_owner_only(rt, pool, owner, other_owner):
    alert(rt, pool, owner, "sms")
    theirs, _ = alert(rt, pool, other_owner, "sms")

    (result,) = handler(sns_event(two_way_sms(theirs["address"], "STOP", None)))["results"]

    assert result["status"] == "keyword"
    assert inbound_rows(pool, owner) == [] and [r["id"] for r in inbound_rows(pool, other_owner)] == [result["inbound_id"]]


def test_a_record_that_is_not_awss_is_answered_with_why_and_never_raised(rt, pool, owner):
    bad_ses = ses_event("x", "a@example.com", "b@example.com")
    del bad_ses["Records"][0]["ses"]["mail"]["messageId"]
    bad_sns = sns_event("{}")
    del bad_sns["Records"][0]["Sns"]["MessageId"]
    mixed = {"Records": [sns_event("{}")["Records"][0], "not a record"]}

    for event in (bad_ses, bad_sns, mixed):
        out = handler(event)
        rejected = [r for r in out["results"] if "rejected" in r]
        assert rejected and all(r["rejected"].startswith("invalid") for r in rejected), out
    assert "messageId" in handler(bad_ses)["results"][0]["rejected"]


def test_a_database_outage_raises_so_lambda_delivers_the_event_again(rt, pool, owner, monkeypatch):
    from psycopg import OperationalError

    from zerg.inbound import replies

    phone, note = alert(rt, pool, owner, "sms")

    def outage(rt, inbound):
        raise OperationalError("connection refused")

    monkeypatch.setattr(replies, "receive", outage)
    with pytest.raises(OperationalError):
        handler(sns_event(two_way_sms(phone["address"], "ack", note["provider_message_id"])))


def test_the_inbound_housekeeping_task_completes_replies_left_half_done(rt):
    out = handler({"trigger": "housekeeping", "task": "inbound"})

    assert (out["trigger"], out["task"]) == ("housekeeping", "inbound") and isinstance(out["result"], dict)


def test_mail_whose_object_is_missing_is_recorded_and_s3_unreachable_raises_for_a_retry(runtime_env, pool, owner):
    from zerg.inbound.email import InboundUnavailable

    contact = verified_contact(pool, owner, "email")
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        runtime_env(ZERG_ARTIFACT_BACKEND="s3", ZERG_ARTIFACT_BUCKET=BUCKET)
        missing = secrets.token_hex(16)

        (result,) = handler(ses_event(missing, contact["address"], "reply+x@zerg.localhost"))["results"]

        assert result["status"] == "rejected" and result["reason"].startswith("raw message not found")
        runtime_env(ZERG_ARTIFACT_BACKEND="s3", ZERG_ARTIFACT_BUCKET="no-such-bucket-here")
        with pytest.raises(InboundUnavailable):  # S3 refusing: Lambda's retry delivers the event again
            handler(ses_event(secrets.token_hex(16), contact["address"], "reply+x@zerg.localhost"))
