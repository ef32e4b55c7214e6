"""The escalation matrix, applied when a background run ends: info → inbox only; warning → inbox +
the policy's warning channels now (an SMS in quiet hours held); critical → inbox + every critical
channel now, never held, then the escalation. Only verified contacts, within the daily limits;
every send or suppression a notifications row. Run with the local outbox and with moto SES/SNS,
each recording exactly the expected messages."""

from __future__ import annotations

import email
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.policy import default
from pathlib import Path

import pytest

from tests.support.factories import make_finished_worker, unique_name
from zerg.alerts import inbox
from zerg.notify import contacts, notifications
from zerg.notify.policy import PolicyChange, set_policy
from zerg.runs import store as runs
from zerg.schedules import fires
from zerg.schedules import service as schedules
from zerg.schedules.spec import ScheduleSpec
from zerg.supervisor import turn

SENDER = "zerg@zerg.localhost"


@dataclass
class Sent:
    """What the notifier really sent: (to, subject, text) per email, (to, text) per SMS."""

    emails: list[tuple[str, str, str]]
    sms: list[tuple[str, str]]


class Outbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def read(self) -> Sent:
        files = sorted(self.directory.glob("*")) if self.directory.exists() else []
        emails = []
        for path in (p for p in files if p.suffix == ".eml"):
            msg = email.message_from_bytes(path.read_bytes(), policy=default)
            emails.append((msg["To"], msg["Subject"], msg.get_body(("plain",)).get_content()))
        sms = [(d["to"], "".join(d["parts"])) for d in (json.loads(p.read_text()) for p in files if p.suffix == ".json")]
        return Sent(emails, sms)


class Moto:
    def read(self) -> Sent:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ses.models import ses_backends
        from moto.sns.models import sns_backends

        emails = []
        for raw in ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages:
            msg = email.message_from_string(raw.raw_data, policy=default)
            emails.append((msg["To"], msg["Subject"], msg.get_body(("plain",)).get_content().replace("\r\n", "\n")))
        sms = list(sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sms_messages.values())
        return Sent(emails, sms)


@pytest.fixture(params=["local", "aws"])
def notifier(request, runtime_env):
    """(runtime, reader of what was sent) with the local outbox or SES v2 + SNS under moto."""
    if request.param == "local":
        rt = runtime_env()
        yield rt, Outbox(rt.settings.data_dir / "outbox")
        return
    import boto3
    from moto import mock_aws

    with mock_aws():
        boto3.client("sesv2", region_name="us-east-1").create_email_identity(EmailIdentity=SENDER)
        yield runtime_env(ZERG_NOTIFIER="aws"), Moto()


def verified(pool, owner_id: int, kind: str, address: str, *, verify: bool = True) -> dict:
    now = datetime.now(timezone.utc)
    with pool.connection() as conn:
        row = contacts.insert_pending(conn, owner_id, kind, address, "not-a-code", now + timedelta(hours=1), now)
        return contacts.mark_verified(conn, owner_id, row["id"], now) if verify else row


@pytest.fixture
def reachable(pool, owner):
    """The owner with one verified email and one verified phone number."""
    tag = unique_name("o")
    mail, phone = f"{tag}@example.com", f"+1555{int(tag.split('-')[1], 16) % 10_000_000:07d}"
    verified(pool, owner, "email", mail)
    verified(pool, owner, "sms", phone)
    return owner, mail, phone


def schedule(rt, owner_id: int, **extra) -> dict:
    spec = ScheduleSpec(name=unique_name("nightly"), task="check the servers", cron="0 6 * * *", **extra)
    return schedules.create(rt, owner_id, spec)


def scheduled_run(rt, pool, owner_id: int, sched: dict) -> dict:
    """A running run started by ``sched``'s fire, as the firing code writes it."""
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, sched["task"], trigger="schedule")
        fire = fires.claim(conn, sched["id"], owner_id, datetime.now(timezone.utc), "ticker")
        fires.attach_run(conn, fire, started.run_id)
        return runs.get_run(conn, owner_id, started.run_id)


def finish(rt, pool, run: dict, answer: str) -> dict:
    """The supervisor answered ``answer``: finalize closes the run as the state machine would."""
    from zerg.llm import Usage

    with pool.connection() as conn:
        runs.save_working(conn, run["id"], [], Usage(0, 0, 0.0), answer=answer)
    turn.finalize(rt, run["id"], run["owner_id"], run["thread_id"])
    with pool.connection() as conn:
        return {"run": runs.get_run(conn, run["owner_id"], run["id"]),
                "item": inbox.get(conn, run["owner_id"], run["id"]),
                "notifications": notifications.for_run(conn, run["owner_id"], run["id"]),
                "thread": conn.execute("SELECT role, content FROM thread_messages WHERE run_id = %s ORDER BY id",
                                       (run["id"],)).fetchall()}


def assessment(severity: str, headline: str, details: str = "see the evidence") -> str:
    return json.dumps({"severity": severity, "headline": headline, "details": details})


def escalation_of(pool, owner_id: int, run_id: int) -> dict | None:
    from zerg.alerts import escalations

    with pool.connection() as conn:
        return next((e for e in escalations.export_escalations(conn, owner_id) if e["run_id"] == run_id), None)


# --- the matrix ------------------------------------------------------------------------------------

def test_info_goes_to_the_inbox_only(notifier, pool, reachable):
    rt, outbox = notifier
    owner, _, _ = reachable
    run = scheduled_run(rt, pool, owner, schedule(rt, owner))
    out = finish(rt, pool, run, assessment("info", "All fine", "disk 40%"))
    assert (out["item"]["severity"], out["item"]["headline"]) == ("info", "All fine")
    assert out["notifications"] == [] and outbox.read() == Sent([], [])
    assert out["thread"] == [] and out["run"]["status"] == "success"  # info stays off the thread
    assert escalation_of(pool, owner, run["id"]) is None


def test_warning_emails_and_texts_now_and_joins_the_thread(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, phone = reachable
    sched = schedule(rt, owner)
    run = scheduled_run(rt, pool, owner, sched)
    out = finish(rt, pool, run, assessment("warning", "Disk at 91% on cube", "/dev/sda1 91% (worker #3)"))
    sent = outbox.read()
    link = f"http://127.0.0.1:8000/api/jarvis/runs/{run['id']}"
    ((to, subject, text),) = sent.emails
    assert (to, subject) == (mail, "[Zerg WARNING] Disk at 91% on cube")
    assert "/dev/sda1 91% (worker #3)" in text and f"Run: {link}" in text and f"zerg inbox ack {run['id']}" in text
    assert f"Scheduled check: {sched['name']}" in text
    assert sent.sms == [(phone, f"Zerg WARNING: Disk at 91% on cube. /dev/sda1 91% (worker #3) Ack: zerg inbox ack {run['id']}")]
    assert sorted((n["channel"], n["status"], n["purpose"], n["severity"], n["schedule_id"]) for n in out["notifications"]) == [
        ("email", "sent", "alert", "warning", sched["id"]), ("sms", "sent", "alert", "warning", sched["id"])]
    assert [m["content"] for m in out["thread"]] == [
        "check the servers", "[WARNING] Disk at 91% on cube\n\n/dev/sda1 91% (worker #3)"]
    assert escalation_of(pool, owner, run["id"]) is None


def test_critical_goes_to_every_channel_and_starts_the_escalation(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, phone = reachable
    with pool.connection() as conn:  # quiet now: a critical alert is never held
        set_policy(conn, owner, PolicyChange(quiet_hours=quiet_around_now(), escalation_every_s=3600))
    run = scheduled_run(rt, pool, owner, schedule(rt, owner))
    out = finish(rt, pool, run, assessment("critical", "nginx is down on web1", "port 443 refused"))
    sent = outbox.read()
    assert [(to, subject) for to, subject, _ in sent.emails] == [(mail, "[Zerg CRITICAL] nginx is down on web1")]
    assert sent.sms == [(phone, f"Zerg CRITICAL: nginx is down on web1. port 443 refused Ack: zerg inbox ack {run['id']}")]
    assert sorted(n["status"] for n in out["notifications"]) == ["sent", "sent"]
    escalation = escalation_of(pool, owner, run["id"])
    assert escalation is not None and escalation["status"] == "running" and escalation["max_repeats"] == 3
    from zerg.alerts.background import acknowledge

    assert acknowledge(rt, owner, run["id"])["acknowledged_at"] is not None
    assert escalation_of(pool, owner, run["id"])["status"] == "acknowledged"


def test_a_schedules_channel_override_wins_over_the_policy(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, _ = reachable
    run = scheduled_run(rt, pool, owner, schedule(rt, owner, channels={"warning": ["email"]}))
    finish(rt, pool, run, assessment("warning", "Backups are 2 days old"))
    sent = outbox.read()
    assert [to for to, _, _ in sent.emails] == [mail] and sent.sms == []


# --- refusals: limits, unverified contacts, quiet hours ----------------------------------------------

def quiet_around_now() -> str:
    now = datetime.now(timezone.utc)
    return f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=1):%H:%M}"


def test_a_reached_daily_limit_is_recorded_as_suppressed_not_sent(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, phone = reachable
    with pool.connection() as conn:
        set_policy(conn, owner, PolicyChange(daily_email_limit=1, daily_sms_limit=0))
    sched = schedule(rt, owner)
    first = finish(rt, pool, scheduled_run(rt, pool, owner, sched), assessment("warning", "first"))
    second = finish(rt, pool, scheduled_run(rt, pool, owner, sched), assessment("warning", "second"))
    sent = outbox.read()
    assert [(to, subject) for to, subject, _ in sent.emails] == [(mail, "[Zerg WARNING] first")] and sent.sms == []
    by_channel = lambda out: {n["channel"]: (n["status"], n["reason"]) for n in out["notifications"]}
    assert by_channel(first) == {"email": ("sent", None), "sms": ("suppressed", "daily sms limit of 0 reached")}
    assert by_channel(second) == {"email": ("suppressed", "daily email limit of 1 reached"),
                                  "sms": ("suppressed", "daily sms limit of 0 reached")}
    assert second["item"]["severity"] == "warning"  # the inbox has it all the same


def test_an_unverified_contact_is_refused(notifier, pool, owner):
    rt, outbox = notifier
    tag = unique_name("u")
    verified(pool, owner, "email", f"{tag}@example.com", verify=False)
    out = finish(rt, pool, scheduled_run(rt, pool, owner, schedule(rt, owner)), assessment("critical", "db down"))
    assert outbox.read() == Sent([], [])
    assert sorted((n["channel"], n["status"], n["reason"], n["address"]) for n in out["notifications"]) == [
        ("email", "suppressed", "no verified email contact", None), ("sms", "suppressed", "no verified sms contact", None)]


def test_quiet_hours_hold_a_warning_sms_but_not_its_email(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, phone = reachable
    with pool.connection() as conn:
        set_policy(conn, owner, PolicyChange(quiet_hours=quiet_around_now()))
    out = finish(rt, pool, scheduled_run(rt, pool, owner, schedule(rt, owner)), assessment("warning", "cert expires in 9 days"))
    sent = outbox.read()
    assert [to for to, _, _ in sent.emails] == [mail] and sent.sms == []
    held = next(n for n in out["notifications"] if n["channel"] == "sms")
    assert held["status"] == "held" and held["address"] == phone and held["release_at"] > datetime.now(timezone.utc)


# --- the other closers, and once only ---------------------------------------------------------------

def test_a_failed_scheduled_run_is_a_warning_in_the_inbox_by_the_system(notifier, pool, reachable):
    rt, outbox = notifier
    owner, mail, _ = reachable
    sched = schedule(rt, owner)
    run = scheduled_run(rt, pool, owner, sched)
    turn.fail(rt, run["id"], owner, {"Error": "LLMError", "Cause": "supervisor model is down"})
    with pool.connection() as conn:
        item = inbox.get(conn, owner, run["id"])
    assert (item["severity"], item["assessed_by"]) == ("warning", "system")
    assert item["headline"].startswith(f"Scheduled check '{sched['name']}' failed: ")
    assert "supervisor model is down" in item["headline"]
    assert [subject for _, subject, _ in outbox.read().emails] == [f"[Zerg WARNING] {item['headline']}"]


def test_a_failed_worker_raises_a_models_info_and_a_second_closer_sends_nothing_again(notifier, pool, reachable):
    rt, outbox = notifier
    owner, _, _ = reachable
    run = scheduled_run(rt, pool, owner, schedule(rt, owner))
    make_finished_worker(pool, rt.store, owner, run["id"], "check backups on nas", status="failed")
    out = finish(rt, pool, run, assessment("info", "All fine"))
    assert (out["item"]["severity"], out["item"]["assessed_by"]) == ("warning", "system")
    assert len(outbox.read().emails) == 1 and len(out["thread"]) == 2  # a warning: on the thread
    from zerg.alerts.background import on_run_end

    assert on_run_end(rt, owner, run["id"])["skipped"] == "the run has its inbox item already"
    assert len(outbox.read().emails) == 1


def test_a_chat_run_gets_no_inbox_item(notifier, pool, owner):
    rt, _ = notifier
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "how is the disk?")
    run = {"id": started.run_id, "owner_id": owner, "thread_id": started.thread_id}
    out = finish(rt, pool, run, assessment("critical", "looks like JSON but is a chat"))
    assert out["item"] is None and out["notifications"] == [] and len(out["thread"]) == 2


def test_model_text_is_data_escaped_in_html_and_kept_out_of_headers(runtime_env, pool, reachable):
    rt = runtime_env()
    owner, mail, _ = reachable
    run = scheduled_run(rt, pool, owner, schedule(rt, owner))
    finish(rt, pool, run, assessment("warning", "Disk full\r\nBcc: thief@example.net", '<img src=x onerror="alert(1)">'))
    (path,) = (rt.settings.data_dir / "outbox").glob("*.eml")
    msg = email.message_from_bytes(path.read_bytes(), policy=default)
    assert msg["Bcc"] is None and msg["To"] == mail
    assert msg["Subject"] == "[Zerg WARNING] Disk full Bcc: thief@example.net"  # one line, harmless
    html = msg.get_body(("html",)).get_content()
    assert "<img" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
