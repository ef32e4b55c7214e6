"""THE one way Zerg emails or texts the owner: :func:`deliver`. Alerts, escalations, the digest,
reminders, budget notes and the connector tools all call it; :func:`release_held` sends what quiet
hours held.

Invariants:
- Recipients are the owner's *verified* contacts of the channel, read here and nowhere else (an
  answer to a reply names one of them, ``contact_id``: only that one, if still verified). The
  one exception is :func:`deliver_verification`: a verification code goes to the one unverified
  address being verified (that is the point of it), through the same limits and records.
- Every recipient gets one ``notifications`` row: ``sent``, ``held`` (quiet hours, with
  ``release_at``), ``suppressed`` (and why: no verified contact, the daily limit) or ``failed``
  (and why). No verified contact is one ``suppressed`` row with no address; when every verified
  contact of the channel opted out (SMS STOP), its reason is :data:`OPTED_OUT`.
- A send is reserved against the owner's daily limit of its channel before it is made
  (:func:`zerg.notify.limits.reserve`, atomic); a failed send gives the reservation back.
- Nothing raises to the caller for a provider's failure: the row says ``failed``, a log line says
  why, and the operators' topic (ZERG_ALERT_TOPIC_ARN) gets one line, best effort.
- Each email has its own reply token (``Reply-To: reply+{token}@ZERG_MAIL_DOMAIN``) and records
  the Message-ID the recipient sees; a verification code is never stored in clear (the row's body
  has it masked).
- Quiet hours hold only SMS, and only when the caller asks (``hold_in_quiet_hours``: warnings;
  never critical alerts, never codes). A held row is sent, suppressed (contact gone, or its run's
  inbox item acknowledged meanwhile) or put back held: never lost in flight.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from zerg import observability
from zerg.alerts import inbox
from zerg.notify import contacts, limits, notifications
from zerg.notify.channels.notifier import header_text
from zerg.notify.policy import CHANNELS, Policy, get_policy, in_quiet_hours
from zerg.ports import Email, NotifierError, Sms
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from zerg.runtime import Runtime

Channel = Literal["email", "sms"]
Purpose = Literal["alert", "escalation", "digest", "reminder", "verification", "connector", "budget", "answer",
                  "idle_pause", "approval"]
MASK = "••••••"
OPTED_OUT = "opted out (STOP)"  # every verified SMS contact replied STOP (zerg.notify.contacts.opt_out)
RELEASE_BATCH = 50
RELEASE_EVERY_S = 60.0  # how often held notifications are looked at (housekeeping "notifications")


@dataclass(frozen=True)
class _Message:
    channel: str
    purpose: str
    subject: str
    body: str
    stored_body: str  # what the row keeps (the body, or with a code masked)
    severity: str | None = None
    run_id: int | None = None
    schedule_id: int | None = None
    attempt: int = 0
    in_reply_to: str | None = None
    html: str | None = None  # an email's HTML part (None: the text, escaped); not kept in the row
    references: tuple[str, ...] = ()  # an email's References (the thread it answers), oldest first

    def row_fields(self) -> dict[str, Any]:
        return {"channel": self.channel, "purpose": self.purpose, "subject": self.subject or None,
                "body": self.stored_body, "severity": self.severity, "run_id": self.run_id,
                "schedule_id": self.schedule_id, "attempt": self.attempt}


def deliver(rt: "Runtime", owner_id: int, *, channel: Channel, purpose: Purpose, subject: str, body: str,
            severity: str | None = None, run_id: int | None = None, schedule_id: int | None = None,
            attempt: int = 0, hold_in_quiet_hours: bool = False, in_reply_to: str | None = None,
            now: datetime | None = None, html: str | None = None, contact_id: int | None = None,
            references: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Send ``subject``/``body`` on ``channel`` to each of the owner's verified contacts of it (only
    the one ``contact_id`` when given: an answer goes to whoever wrote); one notifications row per
    contact (or one ``suppressed`` row when there is none), returned in order. ``subject`` is
    flattened to one line (SMS ignore it); ``in_reply_to`` and ``references`` thread an email;
    ``html`` is an email's HTML part (the caller escapes what it puts in it; None: the text, escaped)."""
    if channel not in CHANNELS:
        raise ValueError(f"channel must be email or sms, not {channel!r}")
    now = now or utcnow()
    msg = _Message(channel, purpose, header_text(subject), body, body, severity, run_id, schedule_id, attempt, in_reply_to,
                   html if channel == "email" else None, tuple(references) if channel == "email" else ())
    with rt.pool.connection() as conn:
        recipients = contacts.verified_contacts(conn, owner_id, channel)
        if contact_id is not None:
            recipients = [c for c in recipients if c["id"] == contact_id]
        policy = get_policy(conn, owner_id)
        if not recipients:
            opted_out = [c for c in contacts.opted_out_contacts(conn, owner_id, channel)
                         if contact_id is None or c["id"] == contact_id]
            reason = (OPTED_OUT if opted_out else f"no verified {channel} contact" if contact_id is None
                      else f"contact {contact_id} is not a verified {channel} contact of the owner")
            row = notifications.record(conn, owner_id, **msg.row_fields(), status="suppressed", reason=reason)
            log_row(row)
            return [row]
        release_at = in_quiet_hours(policy, now) if hold_in_quiet_hours and channel == "sms" else None
        if release_at is not None:
            rows = [notifications.record(conn, owner_id, **msg.row_fields(), status="held", contact_id=c["id"],
                                         address=c["address"], release_at=release_at,
                                         reason=f"quiet hours ({policy.quiet_hours} {policy.timezone})")
                    for c in recipients]
            for row in rows:
                log_row(row)
            return rows
    return [_send(rt, owner_id, contact, msg, policy, now) for contact in recipients]


def deliver_verification(rt: "Runtime", owner_id: int, contact: dict[str, Any], *, subject: str, body: str,
                         code: str, now: datetime | None = None) -> dict[str, Any]:
    """The verification code to the one contact being verified (verified or not: the only send to
    an unverified address). Daily limits apply; the stored body has ``code`` masked."""
    now = now or utcnow()
    msg = _Message(contact["kind"], "verification", header_text(subject), body, body.replace(code, MASK))
    with rt.pool.connection() as conn:
        policy = get_policy(conn, owner_id)
    return _send(rt, owner_id, contact, msg, policy, now)


def release_held(rt: "Runtime", now: datetime | None = None,
                 should_stop: Callable[[], bool] | None = None) -> dict[str, int]:
    """Send every held notification whose quiet hours have ended (the same limits apply; a contact
    removed or unverified meanwhile, or a run's alert acknowledged meanwhile, is ``suppressed``).
    ``should_stop`` is asked after each row: the batch's rows not yet sent go back to ``held`` for
    the next sweep. Housekeeping task ``notifications``."""
    now = now or utcnow()
    counts = {"sent": 0, "suppressed": 0, "failed": 0}
    while not (should_stop and should_stop()):
        with rt.pool.connection() as conn:
            rows = notifications.claim_due_held(conn, now, RELEASE_BATCH)
        if not rows:
            break
        started = 0
        try:
            for held in rows:
                started += 1
                status = _release_one(rt, held, now)
                counts[status] = counts.get(status, 0) + 1
                if should_stop and should_stop():
                    break
        finally:  # stopped or crashed mid-batch: the rows not started wait for the next sweep (one
            # that crashed mid-send stays in flight: it may have gone out, and is never sent twice)
            if started < len(rows):
                with rt.pool.connection() as conn:
                    notifications.unclaim_held(conn, rows[started:])
    return counts


def _release_one(rt: "Runtime", held: dict[str, Any], now: datetime) -> str:
    """Send one claimed held row, or finish it ``suppressed`` when it no longer should go; its status."""
    msg = _Message(held["channel"], held["purpose"], held["subject"] or "", held["body"], held["body"],
                   held["severity"], held["run_id"], held["schedule_id"], held["attempt"])
    owner_id = held["owner_id"]
    with rt.pool.connection() as conn:
        contact = contacts.get_contact(conn, owner_id, held["contact_id"]) if held["contact_id"] else None
        policy = get_policy(conn, owner_id)
        reason = None
        if contact is None or contact["verified_at"] is None:
            reason = "held for quiet hours; the contact was removed or unverified meanwhile"
        elif contact["opted_out_at"] is not None:
            reason = f"held for quiet hours; {OPTED_OUT} meanwhile"
        elif held["run_id"] is not None and (inbox.get(conn, owner_id, held["run_id"]) or {}).get("acknowledged_at"):
            reason = "held for quiet hours; acknowledged meanwhile"  # the owner has seen it: no text at 7 am
        if reason is not None:
            row = notifications.finish(conn, held["id"], status="suppressed", reason=reason)
            log_row(row)
            return row["status"]
    return _send(rt, owner_id, contact, msg, policy, now, held=held)["status"]


def _send(rt: "Runtime", owner_id: int, contact: dict[str, Any], msg: _Message, policy: Policy, now: datetime,
          held: dict[str, Any] | None = None) -> dict[str, Any]:
    """Reserve, record (in flight), send, finish: one recipient. ``held``: the claimed held row to finish."""
    channel, day = contact["kind"], now.astimezone(timezone.utc).date()
    settings = rt.settings
    token = (held or {}).get("reply_token") or (secrets.token_hex(16) if channel == "email" else None)
    message_id = (held or {}).get("message_id") or (_message_id(settings.mail_domain) if channel == "email" else None)
    with rt.pool.connection() as conn:
        if not limits.reserve(conn, owner_id, channel, policy.limit(channel), day):
            reason = f"daily {channel} limit of {policy.limit(channel)} reached"
            if held is not None:
                row = notifications.finish(conn, held["id"], status="suppressed", reason=reason)
            else:
                row = notifications.record(conn, owner_id, **msg.row_fields(), status="suppressed", reason=reason,
                                           contact_id=contact["id"], address=contact["address"])
            log_row(row)
            return row
        if held is None:
            row = notifications.record(conn, owner_id, **msg.row_fields(), status="failed", reason=notifications.IN_FLIGHT,
                                       contact_id=contact["id"], address=contact["address"], reply_token=token,
                                       message_id=message_id)
        else:
            row = held
    provider_id = reason = None
    try:
        if channel == "email":
            sent = rt.notifier.send_email(Email(
                to=contact["address"], subject=msg.subject, text=msg.body, sender=settings.sender_email,
                reply_to=f"reply+{token}@{settings.mail_domain}", message_id=message_id, in_reply_to=msg.in_reply_to,
                references=msg.references, html=msg.html))
            provider_id, message_id = sent.provider_message_id, sent.message_id
        else:  # a reply to an SMS names the last part it answers (SNS previousPublishedMessageId)
            provider_id = rt.notifier.send_sms(Sms(to=contact["address"], text=msg.body))[-1]
    except NotifierError as exc:
        reason = str(exc)
    except Exception as exc:  # a notifier bug must not fail an alert's caller either: recorded and logged
        reason = f"{type(exc).__name__}: {exc}"
    with rt.pool.connection() as conn:
        if reason is None:
            row = notifications.finish(conn, row["id"], status="sent", provider_message_id=provider_id, message_id=message_id)
        else:
            limits.release(conn, owner_id, channel, day)
            row = notifications.finish(conn, row["id"], status="failed", reason=reason)
    log_row(row)
    if reason is not None and settings.alert_topic_arn:
        from zerg.notify.channels.sns import publish_alert

        publish_alert(settings.alert_topic_arn, f"Zerg notification {row['id']} ({channel}, {msg.purpose}) for owner "
                                                f"{owner_id} failed: {reason}")
    return row


def _message_id(domain: str) -> str:
    from email.utils import make_msgid

    return make_msgid(idstring=secrets.token_hex(4), domain=domain)


def log_row(row: dict[str, Any]) -> None:
    """One log line per notification row written (every channel: email, SMS, push)."""
    extra = {k: row.get(k) for k in ("id", "owner_id", "channel", "purpose", "severity", "status", "reason", "run_id")}
    if row["status"] == "failed":
        observability.logger().warning("notification failed", extra=extra)
    else:
        observability.logger().info(f"notification {row['status']}", extra=extra)
