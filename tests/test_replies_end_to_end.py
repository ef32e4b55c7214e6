"""Replies end to end (issue 15's "Must show"): an alert is answered from a mail client or a phone and
Zerg carries on: the ingress function with SES and SNS events built as AWS delivers them (the raw
mail in moto S3), the local engine running the real state machines, the scripted model over
loopback, moto's SES v2, SNS and EventBridge Scheduler, and the project's own outbox.

1. A warning email of a real scheduled check, answered "make this weekly" the way a mail client
   replies: the schedule is weekly in the table and in Scheduler, and the confirmation is threaded.
2. An SMS "ack" to a critical alert ends its escalation: no further repeat, no run.
3. The same inbound message delivered twice (SES, SNS, the watched local directory) starts one run.
"""

from __future__ import annotations

import email
import email.policy
import json
import re
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.inbound import inbound_rows
from tests.support.notify import unique_number, verified_contact
from tests.support.schedules import finished_run, schedule_row
from tests.support.waiting import wait_for

DOMAIN = "zerg.example.org"
SENDER = f"zerg@{DOMAIN}"
BUCKET = "zerg-artifacts-e2e"
GROUP = "zerg-replies-e2e"
ROLE = "arn:aws:iam::123456789012:role/zerg-scheduler"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:zerg-ingress"
DLQ = "arn:aws:sqs:us-east-1:123456789012:zerg-schedule-dlq"
TOPIC = "arn:aws:sns:us-east-1:123456789012:zerg-inbound-sms"
ZERG_NUMBER = "+18005550100"  # the origination number two-way SMS replies arrive at


# --- the AWS side, under moto ------------------------------------------------------------------------


@dataclass
class Aws:
    """The runtime configured for SES, SNS, S3 and Scheduler under moto, and what they hold."""

    rt: Any
    notifier: str  # "aws" (SES v2 + SNS) or "local" (the outbox under ZERG_DATA_DIR)

    def client(self, service: str):
        import boto3

        return boto3.client(service, region_name="us-east-1")

    def raw_emails(self) -> list[bytes]:
        """Every email Zerg sent, oldest first, as it went on the wire (SES raw data, or the .eml)."""
        if self.notifier == "local":
            from tests.support.notify import outbox

            return [p.read_bytes() for p in sorted(outbox(self.rt.settings.data_dir).glob("*.eml"))]
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ses.models import ses_backends

        return [m.raw_data.encode() for m in ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages]

    def emails(self) -> list[email.message.EmailMessage]:
        """Every email Zerg sent, oldest first, parsed as the recipient's client would."""
        return [email.message_from_bytes(raw, policy=email.policy.default) for raw in self.raw_emails()]

    def texts(self) -> list[tuple[str, str]]:
        """Every SMS Zerg sent: (number, text), oldest first."""
        if self.notifier == "local":
            from tests.support.notify import texts

            return [(t["to"], "".join(t["parts"])) for t in texts(self.rt.settings.data_dir)]
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sns.models import sns_backends

        return list(sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sms_messages.values())

    def scheduler_expression(self, schedule_id: int) -> str:
        return self.client("scheduler").get_schedule(Name=f"zerg-s{schedule_id}", GroupName=GROUP)["ScheduleExpression"]

    def mail_arrives(self, raw: bytes, *, sender: str, recipients: list[str], verdict: str = "PASS") -> dict:
        """What SES's receipt rule does with a mail to ``recipients``: the S3 action stores the raw
        message under inbound/email/{messageId}, then the Lambda action invokes the ingress function
        (Event) with the receipt, whose verdicts are ``verdict``. Returns the handler's answer."""
        message_id = ses_message_id()
        self.client("s3").put_object(Bucket=BUCKET, Key=f"inbound/email/{message_id}", Body=raw)
        return ingress(ses_event(message_id, sender=sender, recipients=recipients, verdict=verdict))


@pytest.fixture(params=["aws", "local"])
def aws(request, runtime_env) -> Iterator[Aws]:
    """moto S3 (the inbound mail bucket), SES v2, SNS and Scheduler, with Zerg's notifier on SES/SNS
    ("aws") or on the local outbox ("local"): the reply comes in through the SES path either way."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        boto3.client("sesv2", region_name="us-east-1").create_email_identity(EmailIdentity=DOMAIN)
        boto3.client("scheduler", region_name="us-east-1").create_schedule_group(Name=GROUP)
        rt = runtime_env(ZERG_NOTIFIER=request.param, ZERG_SENDER_EMAIL=SENDER, ZERG_MAIL_DOMAIN=DOMAIN,
                         ZERG_ARTIFACT_BUCKET=BUCKET, ZERG_SCHEDULE_GROUP=GROUP, ZERG_SCHEDULER_ROLE_ARN=ROLE,
                         ZERG_SCHEDULE_TARGET_ARN=TARGET, ZERG_SCHEDULE_DLQ_ARN=DLQ,
                         ZERG_MEMORY_EXTRACT="off", ZERG_EMBEDDINGS="off")
        yield Aws(rt, request.param)


def ingress(event: dict) -> dict:
    from functions.events.handler import handler

    return handler(event, None)


def message_ids(raw: bytes, header: str) -> list[str]:
    """The Message-IDs in ``header`` of a raw email as a mail client threading it reads them: the
    header unfolded, its ``<...>`` tokens (RFC 5322 msg-id; an RFC 2047 encoded-word is not one)."""
    from email.parser import BytesHeaderParser
    from email.policy import compat32

    value = BytesHeaderParser(policy=compat32).parsebytes(raw)[header] or ""
    return re.findall(r"<[^<>\s]+>", str(value))


def ses_message_id() -> str:
    """An id shaped like SES's (the S3 object's name, and the provider id of the inbound row)."""
    return secrets.token_hex(20)


def ses_event(message_id: str, *, sender: str, recipients: list[str], verdict: str = "PASS") -> dict:
    """The event SES's Lambda action delivers (Event invocation): the receipt and the mail's headers,
    never its body (that is in S3)."""
    from tests.support.mail import ses_record

    return {"Records": [ses_record(message_id, recipients=recipients, sender=sender, spf=verdict, dkim=verdict,
                                   spam=verdict, virus=verdict, dmarc=verdict)]}


def sns_sms_event(sender: str, body: str, *, inbound_id: str | None = None, previous: str | None = None) -> dict:
    """What two-way SMS publishes to the inbound topic, as the SNS Lambda record carrying it."""
    message = {"originationNumber": sender, "destinationNumber": ZERG_NUMBER, "messageKeyword": "KEYWORD_123456789012",
               "messageBody": body, "inboundMessageId": inbound_id or str(uuid.uuid4()),
               "previousPublishedMessageId": previous}
    return {"Records": [{
        "EventSource": "aws:sns", "EventVersion": "1.0",
        "EventSubscriptionArn": f"{TOPIC}:{uuid.uuid4()}",
        "Sns": {"Type": "Notification", "MessageId": str(uuid.uuid4()), "TopicArn": TOPIC, "Subject": None,
                "Message": json.dumps(message), "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "SignatureVersion": "1", "Signature": "EXAMPLE", "SigningCertUrl": "https://sns.example/cert.pem",
                "UnsubscribeUrl": "https://sns.example/unsubscribe", "MessageAttributes": {}},
    }]}


# --- rows ---------------------------------------------------------------------------------------------


def runs_of(pool, owner_id: int, trigger: str) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT id, status, trigger, task, result FROM runs WHERE owner_id = %s AND trigger = %s "
                            "ORDER BY id", (owner_id, trigger)).fetchall()


def settle(rt) -> None:
    """Let the runs' last asynchronous step (Remember) end while the scripted model still answers."""
    assert rt.starter.drain(timeout=60)


def notes(pool, owner_id: int, **match: Any) -> list[dict]:
    """The owner's notifications (with the reply token, as the pipeline reads it) matching ``match``,
    once recorded: a row in flight says ``failed`` until the provider's answer is (the email is in
    the outbox before its row is finished)."""
    from zerg.notify.notifications import IN_FLIGHT

    with pool.connection() as conn:
        rows = conn.execute("SELECT * FROM notifications WHERE owner_id = %s AND reason IS DISTINCT FROM %s "
                            "ORDER BY id", (owner_id, IN_FLIGHT)).fetchall()
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


# --- the scripted model -------------------------------------------------------------------------------


def background(request: dict) -> bool:
    from zerg.llm.port import BACKGROUND_MARKER

    first = request["messages"][0]
    return first["role"] == "system" and BACKGROUND_MARKER in first["content"]


def tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def request_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if isinstance(m.get("content"), str))


# --- 1. a warning email answered "make this weekly" ------------------------------------------------------


def test_a_mail_clients_reply_make_this_weekly_to_a_warning_makes_the_check_weekly_in_the_table_and_in_scheduler(
        aws, llm, pool, owner):
    from tests.support.mail import reply_to_alert
    from tests.support.scripts import assessment_json, role_of, run_script
    from zerg.schedules import service as schedules
    from zerg.schedules.spec import ScheduleSpec

    rt = aws.rt
    mine = verified_contact(pool, owner, "email")
    check = schedules.create(rt, owner, ScheduleSpec(name="disk check", task="Check disk usage on this machine",
                                                     cron="0 6 * * *", timezone="UTC"))
    assert aws.scheduler_expression(check["id"]) == "cron(0 6 * * ? *)"  # daily

    check_run = run_script(["Check disk usage"], answer=lambda req: assessment_json(
        "warning", "Disk at 91% on this machine", "worker: / is 91% full"), commands={"Check disk usage": "echo 91%"})
    reply_requests: list[dict] = []

    def reply_run(request: dict) -> dict:
        """The supervisor of the reply's run: it reads the schedule from the reply context and makes it weekly."""
        if role_of(request) not in ("supervisor", "supervisor-final"):
            return {"content": "short summary"}
        reply_requests.append(request)
        if not tool_results(request):
            assert "update_schedule" in tool_names(request)
            (named,) = re.findall(r"Schedule: #(\d+) '", request_text(request))  # as the reply context names it
            return {"tool_calls": [("update_schedule", {"schedule_id": int(named), "cron": "0 6 * * 1"})]}
        (said,) = [line for line in tool_results(request)[-1].splitlines() if line.startswith("Schedule #")]
        return {"content": f"Done: {said}"}  # the tool's confirmation, out of its data fence

    llm.respond_with(lambda request: (check_run if background(request) else reply_run)(request))

    # The daily check fires (what Scheduler delivers) and its run ends with a warning: emailed now.
    fired = ingress({"trigger": "schedule", "schedule_id": check["id"], "scheduled_time": "2026-11-23T06:00:00Z"})
    assert finished_run(pool, owner, fired["run_id"])["status"] == "success"
    (alert,) = wait_for(lambda: notes(pool, owner, purpose="alert", channel="email", status="sent"), "the alert email")
    (received,) = aws.emails()
    assert received["To"] == mine["address"] and received["Subject"] == "[Zerg WARNING] Disk at 91% on this machine"
    if aws.notifier == "aws":  # SES gives the message its own Message-ID: that is what the owner's client sees
        received.replace_header("Message-ID", alert["message_id"])
    assert message_ids(received.as_bytes(), "Message-ID") == [alert["message_id"]]
    assert received["Reply-To"] == f"reply+{alert['reply_token']}@{DOMAIN}"

    # The owner answers from their mail client, quoting the alert; SES receives it.
    reply = reply_to_alert(received.as_bytes(), "make this weekly", client="apple", sender=mine["address"])
    parsed_reply = email.message_from_bytes(reply, policy=email.policy.default)
    assert "> " in parsed_reply.get_body(("plain",)).get_content()  # the alert quoted below the answer
    out = aws.mail_arrives(reply, sender=mine["address"], recipients=[f"reply+{alert['reply_token']}@{DOMAIN}"])

    (row,) = inbound_rows(pool, owner)
    assert (row["channel"], row["source"], row["status"], row["body"]) == ("email", "ses", "run", "make this weekly")
    assert row["answers_run_id"] == fired["run_id"] and row["notification_id"] == alert["id"]
    assert out["results"] == [{"provider_id": row["provider_id"], "status": "run", "reason": None,
                               "inbound_id": row["id"], "run_id": row["run_id"], "duplicate": False}]
    run = finished_run(pool, owner, row["run_id"])
    assert (run["status"], run["trigger"]) == ("success", "email")
    assert run["task"] == "make this weekly"
    # The model was shown what the reply answers (the alert, the schedule behind it) fenced as data,
    # and the owner's words as the task.
    shown = reply_requests[0]["messages"]
    (context,) = [m["content"] for m in shown[1:] if "[REPLY CONTEXT]" in (m.get("content") or "")]
    assert [m for m in shown if m["content"] == context][0]["role"] == "user"  # never the system prompt
    assert context.startswith("<<<UNTRUSTED-DATA") and "Disk at 91% on this machine" in context
    assert f"Schedule: #{check['id']} 'disk check' (kind check, cron 0 6 * * *, time zone UTC" in context
    assert shown[-1] == {"role": "user", "content": run["task"]}

    # Weekly in the table and in EventBridge Scheduler.
    weekly = schedule_row(pool, check["id"])
    assert (weekly["cron"], weekly["expression"]) == ("0 6 * * 1", "cron(0 6 ? * 2 *)")
    assert aws.scheduler_expression(check["id"]) == "cron(0 6 ? * 2 *)"

    # The confirmation goes back to the owner, threaded to their reply.
    raw = wait_for(lambda: (m := aws.raw_emails()) and len(m) == 2 and m[1], "the confirmation email")
    confirmation = email.message_from_bytes(raw, policy=email.policy.default)
    assert confirmation["To"] == mine["address"]
    assert confirmation["Subject"] == "Re: [Zerg WARNING] Disk at 91% on this machine"
    assert message_ids(raw, "In-Reply-To") == [parsed_reply["Message-ID"]]
    assert message_ids(raw, "References") == [alert["message_id"], parsed_reply["Message-ID"]]  # the whole thread
    text = confirmation.get_body(("plain",)).get_content()
    assert text.startswith(f"Done: Schedule #{check['id']} 'disk check' now runs weekly (cron 0 6 * * 1, UTC); next: Monday")
    (answer,) = wait_for(lambda: notes(pool, owner, purpose="answer"), "the answer's row recorded")
    assert (answer["channel"], answer["status"], answer["run_id"]) == ("email", "sent", run["id"])
    settle(rt)


# --- 2. an SMS "ack" ends a critical alert's repeats ------------------------------------------------------


def test_an_sms_ack_to_a_critical_alert_stops_its_repeats_and_starts_no_run(aws, pool, owner):
    from tests.test_escalation_matrix import assessment, escalation_of, finish, schedule, scheduled_run
    from zerg.alerts import inbox
    from zerg.alerts.repeats import repeat
    from zerg.notify.policy import PolicyChange, set_policy

    rt = aws.rt
    phone = verified_contact(pool, owner, "sms", unique_number())
    with pool.connection() as conn:  # repeats every hour: each one is made due by hand below
        set_policy(conn, owner, PolicyChange(escalation_repeats=5, escalation_every_s=3600,
                                             channels={"critical": ["sms"]}))
    run = scheduled_run(rt, pool, owner, schedule(rt, owner))
    finish(rt, pool, run, assessment("critical", "nginx is down on web1", "port 443 refused"))
    (alert,) = notes(pool, owner, purpose="alert", channel="sms", status="sent")
    assert aws.texts()[0][0] == phone["address"] and "CRITICAL" in aws.texts()[0][1]
    escalation = escalation_of(pool, owner, run["id"])
    assert escalation["status"] == "running"

    def due() -> None:  # the escalation's next repeat falls due (rather than waiting an hour)
        with pool.connection() as conn:
            conn.execute("UPDATE escalations SET started_at = started_at - interval '1 hour' WHERE id = %s",
                         (escalation["id"],))

    due()
    assert repeat(rt, owner, run["id"], escalation["id"]) == {"done": False}  # what the state machine's step does
    assert len(notes(pool, owner, purpose="escalation")) == 1  # a repeat went out: the alert is live

    out = ingress(sns_sms_event(phone["address"], "ack", previous=alert["provider_message_id"]))

    (row,) = inbound_rows(pool, owner)
    assert (row["channel"], row["source"], row["status"], row["run_id"]) == ("sms", "sns", "acknowledged", None)
    assert row["notification_id"] == alert["id"] and row["answers_run_id"] == run["id"]
    assert [(r["status"], r["run_id"], r["duplicate"]) for r in out["results"]] == [("acknowledged", None, False)]
    with pool.connection() as conn:
        assert inbox.get(conn, owner, run["id"])["acknowledged_at"] is not None
    ended = escalation_of(pool, owner, run["id"])
    assert ended["status"] == "acknowledged" and ended["ended_at"] is not None
    engine = rt.starter.engine()
    wait_for(lambda: engine.describe(ended["execution_arn"])["status"] != "RUNNING", "the escalation execution to end")
    assert engine.describe(ended["execution_arn"])["status"] == "ABORTED"

    due()  # the next repeat would be due now: the step sends nothing and ends the escalation
    assert repeat(rt, owner, run["id"], escalation["id"]) == {"done": True}
    assert len(notes(pool, owner, purpose="escalation")) == 1
    assert runs_of(pool, owner, "sms") == []  # an acknowledgement is not a run
    confirmation = aws.texts()[-1]
    assert confirmation[0] == phone["address"] and confirmation[1].startswith("Acknowledged")


# --- 3. the same message delivered twice starts one run ---------------------------------------------------


def reply_target(aws: Aws, pool, owner_id: int, channel: str) -> dict:
    """A warning alert of a background run of the owner, sent on ``channel``: what the replies answer."""
    from tests.support.factories import make_run
    from zerg.notify.deliver import deliver

    run_id, _ = make_run(pool, owner_id, task="check the backups")
    with pool.connection() as conn:
        conn.execute("""INSERT INTO inbox_items (owner_id, run_id, severity, headline, details, assessed_by)
                        VALUES (%s, %s, 'warning', 'Backups are 2 days old', 'last: 2026-11-20', 'model')""",
                     (owner_id, run_id))
    (sent,) = deliver(aws.rt, owner_id, channel=channel, purpose="alert", severity="warning", run_id=run_id,
                      subject="[Zerg WARNING] Backups are 2 days old", body="Backups are 2 days old. last: 2026-11-20")
    assert sent["status"] == "sent"
    return notes(pool, owner_id, id=sent["id"])[0]


def answer_everything(llm) -> None:
    llm.respond_with(lambda request: {"content": "The last backup finished 2026-11-20 at 02:00."})


@pytest.mark.parametrize("aws", ["aws"], indirect=True)
def test_the_same_mail_delivered_twice_by_ses_starts_one_run(aws, llm, pool, owner):
    from tests.support.mail import reply_to_alert

    answer_everything(llm)
    mine = verified_contact(pool, owner, "email")
    alert = reply_target(aws, pool, owner, "email")
    (received,) = aws.emails()
    received.replace_header("Message-ID", alert["message_id"])
    reply = reply_to_alert(received.as_bytes(), "when did the last one finish?", client="gmail", sender=mine["address"])
    recipients = [f"reply+{alert['reply_token']}@{DOMAIN}"]
    message_id = ses_message_id()
    aws.client("s3").put_object(Bucket=BUCKET, Key=f"inbound/email/{message_id}", Body=reply)
    event = ses_event(message_id, sender=mine["address"], recipients=recipients)

    first, again = ingress(event), ingress(event)  # Lambda's asynchronous invoke retries; SES may deliver twice

    (row,) = inbound_rows(pool, owner)
    (run,) = runs_of(pool, owner, "email")
    assert (row["provider_id"], row["status"], row["run_id"]) == (message_id, "run", run["id"])
    assert [(r["status"], r["run_id"], r["duplicate"]) for r in first["results"]] == [("run", run["id"], False)]
    assert [(r["status"], r["run_id"], r["duplicate"]) for r in again["results"]] == [("run", run["id"], True)]
    assert finished_run(pool, owner, run["id"])["status"] == "success"
    assert len(wait_for(lambda: notes(pool, owner, purpose="answer"), "the answer")) == 1
    settle(aws.rt)


@pytest.mark.parametrize("aws", ["aws"], indirect=True)
def test_the_same_sms_delivered_twice_by_sns_starts_one_run(aws, llm, pool, owner):
    answer_everything(llm)
    phone = verified_contact(pool, owner, "sms", unique_number())
    alert = reply_target(aws, pool, owner, "sms")
    event = sns_sms_event(phone["address"], "when did the last one finish?", previous=alert["provider_message_id"])

    first, again = ingress(event), ingress(event)

    (row,) = inbound_rows(pool, owner)
    (run,) = runs_of(pool, owner, "sms")
    assert (row["status"], row["run_id"], row["notification_id"]) == ("run", run["id"], alert["id"])
    assert [(r["status"], r["run_id"], r["duplicate"]) for r in first["results"]] == [("run", run["id"], False)]
    assert [(r["status"], r["run_id"], r["duplicate"]) for r in again["results"]] == [("run", run["id"], True)]
    assert finished_run(pool, owner, run["id"])["status"] == "success"
    (answer,) = wait_for(lambda: notes(pool, owner, purpose="answer"), "the answer")
    assert (answer["channel"], answer["address"]) == ("sms", phone["address"])
    settle(aws.rt)


@pytest.mark.parametrize("aws", ["local"], indirect=True)
def test_the_same_mail_dropped_twice_into_the_watched_inbox_starts_one_run(aws, llm, pool, owner):
    from tests.support.mail import reply_to_alert
    from zerg.inbound.local_inbox import sweep

    answer_everything(llm)
    rt = aws.rt
    mine = verified_contact(pool, owner, "email")
    reply_target(aws, pool, owner, "email")
    (received,) = aws.emails()
    reply = reply_to_alert(received.as_bytes(), "when did the last one finish?", client="outlook",
                           sender=mine["address"])
    new = rt.settings.inbound_root / "new"
    new.mkdir(parents=True, exist_ok=True)

    (new / "reply.eml").write_bytes(reply)
    (first,) = sweep(rt)  # what zerg serve's inbox task does every few seconds
    (new / "reply-again.eml").write_bytes(reply)  # the same message, dropped again under another name
    (again,) = sweep(rt)

    (row,) = inbound_rows(pool, owner)
    (run,) = runs_of(pool, owner, "email")
    assert (row["source"], row["status"], row["run_id"]) == ("local", "run", run["id"])
    assert [(t.name, t.moved_to, t.status, t.run_id) for t in (first, again)] == [
        ("reply.eml", "processed", "run", run["id"]), ("reply-again.eml", "processed", "run", run["id"])]
    assert sorted(p.name for p in (rt.settings.inbound_root / "processed").iterdir()
                  if p.suffix == ".eml") == ["reply-again.eml", "reply.eml"]
    assert list(new.iterdir()) == []
    assert finished_run(pool, owner, run["id"])["status"] == "success"
    settle(rt)
