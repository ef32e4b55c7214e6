"""deliver(): only the owner's verified contacts, one notifications row per recipient (sent, held,
suppressed or failed, and why), daily limits reserved atomically, SMS held in quiet hours and
released after, a provider failure recorded (never raised) with its reservation given back."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from tests.support.api import call
from tests.support.factories import make_run
from tests.support.notify import emails, texts, unique_email, verified_contact
from zerg.notify import limits
from zerg.notify.deliver import deliver, release_held
from zerg.notify.policy import PolicyChange, set_policy

NIGHT = datetime(2031, 1, 1, 23, 0, tzinfo=UTC)  # inside 22:00-07:00 UTC
MORNING = datetime(2031, 1, 2, 7, 0, tzinfo=UTC)


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def policy(pool, owner_id: int, **change) -> None:
    with pool.connection() as conn:
        set_policy(conn, owner_id, PolicyChange(**change))


def reply_token(pool, notification_id: int) -> str | None:
    with pool.connection() as conn:
        return conn.execute("SELECT reply_token FROM notifications WHERE id = %s", (notification_id,)).fetchone()["reply_token"]


def test_an_unverified_contact_is_refused_and_the_row_says_why(rt, alice, pool):
    with pool.connection() as conn:
        conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', %s)",
                     (alice.owner_id, unique_email()))

    (row,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk", body="91%", severity="warning")

    assert (row["status"], row["reason"], row["address"], row["contact_id"]) == (
        "suppressed", "no verified email contact", None, None)
    assert row["severity"] == "warning" and emails(rt.settings.data_dir) == []


def test_each_verified_contact_gets_its_own_row_reply_token_and_message_id(rt, alice, bob, pool):
    mine = [verified_contact(pool, alice.owner_id, "email") for _ in range(2)]
    theirs = verified_contact(pool, bob.owner_id, "email")
    run_id, _ = make_run(pool, alice.owner_id)

    rows = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk 91%", body="details",
                   severity="critical", run_id=run_id, attempt=2)

    assert [(r["status"], r["address"], r["contact_id"]) for r in rows] == [("sent", c["address"], c["id"]) for c in mine]
    assert all(r["run_id"] == run_id and r["attempt"] == 2 and r["sent_at"] for r in rows)
    sent = emails(rt.settings.data_dir)
    assert sorted(m["To"] for m in sent) == sorted(c["address"] for c in mine)  # bob's address: nothing
    assert theirs["address"] not in {m["To"] for m in sent}
    tokens = {reply_token(pool, r["id"]) for r in rows}
    assert len(tokens) == 2 and all(len(t) == 32 for t in tokens)
    for row in rows:
        (msg,) = [m for m in sent if m["To"] == row["address"]]
        assert msg["Reply-To"] == f"reply+{reply_token(pool, row['id'])}@zerg.localhost"
        assert msg["Message-ID"] == row["message_id"] and row["provider_message_id"].startswith("outbox-")
        assert "reply_token" not in row


def test_moto_ses_and_sns_record_exactly_the_messages_delivered(runtime_env, alice, bob, pool):
    from moto.ses.models import ses_backends
    from moto.sns.models import sns_backends

    with mock_aws():
        boto3.client("sesv2").create_email_identity(EmailIdentity="zerg.example.org")
        rt = runtime_env(ZERG_NOTIFIER="aws", ZERG_SENDER_EMAIL="zerg@zerg.example.org", ZERG_MAIL_DOMAIN="zerg.example.org")
        mail, phone = verified_contact(pool, alice.owner_id, "email"), verified_contact(pool, alice.owner_id, "sms")
        verified_contact(pool, bob.owner_id, "email"), verified_contact(pool, bob.owner_id, "sms")

        (email_row,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk", body="91%")
        (sms_row,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 91%")

        (sent,) = ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages
        assert set(sent.destinations) == {mail["address"]} and sent.id == email_row["provider_message_id"]
        assert f"Reply-To: reply+{reply_token(pool, email_row['id'])}@zerg.example.org" in sent.raw_data
        assert email_row["message_id"] == f"<{sent.id}@email.amazonses.com>"
        texts_sent = sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sms_messages
        assert dict(texts_sent) == {sms_row["provider_message_id"]: (phone["address"], "Disk 91%")}


def test_the_daily_limit_suppresses_what_passes_it(rt, alice, pool):
    verified_contact(pool, alice.owner_id, "email"), verified_contact(pool, alice.owner_id, "sms")
    policy(pool, alice.owner_id, daily_email_limit=2, daily_sms_limit=0)

    rows = [deliver(rt, alice.owner_id, channel="email", purpose="connector", subject=f"n{i}", body="x")[0] for i in range(3)]
    (sms,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="x")

    assert [r["status"] for r in rows] == ["sent", "sent", "suppressed"]
    assert rows[2]["reason"] == "daily email limit of 2 reached" and rows[2]["address"]
    assert (sms["status"], sms["reason"]) == ("suppressed", "daily sms limit of 0 reached")
    assert len(emails(rt.settings.data_dir)) == 2 and texts(rt.settings.data_dir) == []


def test_concurrent_reservations_never_pass_the_limit(pool, owner):
    day, takers = date(2031, 6, 1), 12
    barrier, results = threading.Barrier(takers), []

    def take() -> None:
        with pool.connection() as conn:
            barrier.wait()
            results.append(limits.reserve(conn, owner, "sms", 5, day))

    threads = [threading.Thread(target=take) for _ in range(takers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(results) == [False] * 7 + [True] * 5
    with pool.connection() as conn:
        assert limits.used(conn, owner, "sms", day) == 5
        for _ in range(7):  # more releases than reservations never go below zero
            limits.release(conn, owner, "sms", day)
        assert limits.used(conn, owner, "sms", day) == 0


def test_a_warning_sms_in_quiet_hours_is_held_until_they_end(rt, alice, pool):
    phone = verified_contact(pool, alice.owner_id, "sms")
    verified_contact(pool, alice.owner_id, "email")
    policy(pool, alice.owner_id, quiet_hours="22:00-07:00", timezone="UTC")

    (held,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk 91%",
                      severity="warning", hold_in_quiet_hours=True, now=NIGHT)
    (critical,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="Disk full",
                          severity="critical", now=NIGHT)  # critical: never held
    (mail,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk", body="91%",
                      severity="warning", hold_in_quiet_hours=True, now=NIGHT)  # email: never held

    assert (held["status"], held["release_at"], held["reason"]) == ("held", MORNING, "quiet hours (22:00-07:00 UTC)")
    assert critical["status"] == "sent" and mail["status"] == "sent"
    assert [t["parts"] for t in texts(rt.settings.data_dir)] == [["Disk full"]]

    release_held(rt, now=datetime(2031, 1, 2, 6, 59, tzinfo=UTC))
    # The sweep serves every owner: texts held by other tests of this database may go out too.
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [["Disk full"]]
    release_held(rt, now=MORNING)
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [["Disk full"], ["Disk 91%"]]
    with pool.connection() as conn:
        row = conn.execute("SELECT status, sent_at, provider_message_id FROM notifications WHERE id = %s",
                           (held["id"],)).fetchone()
    assert row["status"] == "sent" and row["sent_at"] and row["provider_message_id"]
    release_held(rt, now=MORNING)  # released once only
    assert len([t for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]]) == 2


def test_a_held_sms_whose_contact_went_away_is_suppressed_at_release(rt, alice, pool):
    phone = verified_contact(pool, alice.owner_id, "sms")
    policy(pool, alice.owner_id, quiet_hours="22:00-07:00")
    (held,) = deliver(rt, alice.owner_id, channel="sms", purpose="alert", subject="", body="x", hold_in_quiet_hours=True,
                      now=NIGHT)
    with pool.connection() as conn:
        conn.execute("DELETE FROM owner_contacts WHERE id = %s", (phone["id"],))

    release_held(rt, now=MORNING)

    with pool.connection() as conn:
        row = conn.execute("SELECT status, reason FROM notifications WHERE id = %s", (held["id"],)).fetchone()
    assert row == {"status": "suppressed", "reason": "held for quiet hours; the contact was removed or unverified meanwhile"}
    assert [t for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == []


def held_sms(rt, pool, owner_id: int, night: datetime, body: str, run_id: int | None = None) -> dict:
    (row,) = deliver(rt, owner_id, channel="sms", purpose="alert", subject="", body=body, severity="warning",
                     run_id=run_id, hold_in_quiet_hours=True, now=night)
    assert row["status"] == "held"
    return row


def statuses(pool, ids: list[int]) -> list[tuple[str, str | None]]:
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, status, reason FROM notifications WHERE id = ANY(%s)", (ids,)).fetchall()
    by_id = {r["id"]: (r["status"], r["reason"]) for r in rows}
    return [by_id[i] for i in ids]


def test_a_sweep_told_to_stop_puts_the_rows_it_did_not_send_back_on_hold(rt, alice, pool):
    # Its own night (2021): no other test's held rows are due at its morning.
    night, morning = datetime(2021, 3, 1, 23, 0, tzinfo=UTC), datetime(2021, 3, 2, 7, 0, tzinfo=UTC)
    phone = verified_contact(pool, alice.owner_id, "sms")
    policy(pool, alice.owner_id, quiet_hours="22:00-07:00", timezone="UTC")
    ids = [held_sms(rt, pool, alice.owner_id, night, f"alert {i}")["id"] for i in range(3)]
    answers = iter([False, True])  # asked before the batch, then after its first row

    assert release_held(rt, now=morning, should_stop=lambda: next(answers, True))["sent"] == 1

    quiet = (("held", "quiet hours (22:00-07:00 UTC)"),) * 2
    assert statuses(pool, ids) == [("sent", None), *quiet]  # not lost as "interrupted while sending"
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [["alert 0"]]
    release_held(rt, now=morning)
    assert [s for s, _ in statuses(pool, ids)] == ["sent"] * 3
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [
        ["alert 0"], ["alert 1"], ["alert 2"]]


def test_a_held_alert_whose_run_was_acknowledged_meanwhile_is_suppressed_not_sent(rt, alice, pool):
    from zerg.alerts import inbox
    from zerg.alerts.severity import Assessment

    night, morning = datetime(2021, 4, 1, 23, 0, tzinfo=UTC), datetime(2021, 4, 2, 7, 0, tzinfo=UTC)
    phone = verified_contact(pool, alice.owner_id, "sms")
    policy(pool, alice.owner_id, quiet_hours="22:00-07:00", timezone="UTC")
    seen, unseen = make_run(pool, alice.owner_id)[0], make_run(pool, alice.owner_id)[0]
    with pool.connection() as conn:
        for run_id in (seen, unseen):
            inbox.add(conn, alice.owner_id, run_id, None, Assessment("warning", f"disk {run_id}", "", "model"))
    held = [held_sms(rt, pool, alice.owner_id, night, f"disk {run_id}", run_id=run_id)["id"] for run_id in (seen, unseen)]
    with pool.connection() as conn:
        inbox.acknowledge(conn, alice.owner_id, seen)

    release_held(rt, now=morning)

    assert statuses(pool, held) == [("suppressed", "held for quiet hours; acknowledged meanwhile"), ("sent", None)]
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [[f"disk {unseen}"]]


def test_a_provider_failure_is_a_failed_row_the_reservation_comes_back_and_operators_hear(runtime_env, alice, pool, caplog):
    with mock_aws():
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic = sns.create_topic(Name="zerg-alerts")["TopicArn"]
        queue = sqs.create_queue(QueueName="operators")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
        # No SES identity: SES refuses to send from an address it does not know.
        rt = runtime_env(ZERG_NOTIFIER="aws", ZERG_ALERT_TOPIC_ARN=topic)
        verified_contact(pool, alice.owner_id, "email")

        (row,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk", body="91%", severity="warning")

        assert row["status"] == "failed" and row["reason"].startswith("SES refused the email: MessageRejected")
        assert row["sent_at"] is None
        with pool.connection() as conn:
            assert limits.used(conn, alice.owner_id, "email", datetime.now(UTC).date()) == 0
        (note,) = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)["Messages"]
        assert f"Zerg notification {row['id']} (email, alert) for owner {alice.owner_id} failed" in json.loads(note["Body"])["Message"]
    (logged,) = [r for r in caplog.records if r.getMessage() == "notification failed"]
    assert logged.levelname == "WARNING" and logged.reason == row["reason"]


def test_the_notifications_log_is_the_owners_newest_first_without_reply_tokens(rt, alice, bob, pool):
    verified_contact(pool, alice.owner_id, "email")
    verified_contact(pool, bob.owner_id, "email")
    mine = [deliver(rt, alice.owner_id, channel="email", purpose="connector", subject=f"m{i}", body="x")[0]["id"]
            for i in range(3)]
    deliver(rt, bob.owner_id, channel="email", purpose="connector", subject="bob's", body="x")
    tok = call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})[1]["token"]

    status, page, _ = call("GET", "/api/jarvis/notifications?limit=2", token=tok)
    assert status == 200 and [n["id"] for n in page["notifications"]] == mine[::-1][:2]
    assert page["next_before_id"] == mine[1]
    assert all("reply_token" not in n and "owner_id" not in n for n in page["notifications"])
    status, rest, _ = call("GET", f"/api/jarvis/notifications?before_id={page['next_before_id']}", token=tok)
    assert [n["id"] for n in rest["notifications"]] == [mine[0]] and rest["next_before_id"] is None

    bobs = call("POST", "/api/jarvis/auth", {"device_secret": bob.device_secret})[1]["token"]
    assert [n["subject"] for n in call("GET", "/api/jarvis/notifications", token=bobs)[1]["notifications"]] == ["bob's"]
    status, body, _ = call("GET", "/api/jarvis/notifications?limit=500", token=tok)
    assert status == 422 and body["message"] == "limit: Input should be less than or equal to 200, got '500'"


def test_a_subject_is_one_line_in_the_row_and_the_mail(rt, alice, pool):
    verified_contact(pool, alice.owner_id, "email")
    (row,) = deliver(rt, alice.owner_id, channel="email", purpose="alert", subject="Disk\r\nBcc: evil@example.com", body="x")
    (msg,) = emails(rt.settings.data_dir)
    assert row["subject"] == msg["Subject"] == "Disk Bcc: evil@example.com" and msg["Bcc"] is None


def test_released_notifications_are_a_housekeeping_task_here_and_on_aws(rt, alice, pool):
    from functions.events.handler import handler
    from zerg.local.housekeeping import default_tasks

    task = {t.name: t for t in default_tasks(rt)}["notifications"]
    assert task.interval_s == 60
    phone = verified_contact(pool, alice.owner_id, "sms")
    with pool.connection() as conn:
        conn.execute("""INSERT INTO notifications (owner_id, contact_id, channel, purpose, status, address, body, release_at)
                        VALUES (%s, %s, 'sms', 'alert', 'held', %s, 'held text', now() - interval '1 second')""",
                     (alice.owner_id, phone["id"], phone["address"]))
    out = handler({"trigger": "housekeeping", "task": "notifications"}, None)
    assert out["task"] == "notifications" and out["result"]["sent"] >= 1
    assert [t["parts"] for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]] == [["held text"]]
    assert set(task.run()) == {"sent", "suppressed", "failed"}  # the local task: the same sweep, run again
    assert len([t for t in texts(rt.settings.data_dir) if t["to"] == phone["address"]]) == 1  # sent once
