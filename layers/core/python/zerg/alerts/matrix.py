"""The escalation matrix: what a background result sends, by severity (seed 4.4).

- ``info``: nothing now; the item waits in the inbox for the next digest.
- ``warning``: each channel of the policy's ``warning`` list (or the schedule's override), now;
  an SMS in the owner's quiet hours is held until they end (``hold_in_quiet_hours``).
- ``critical``: each channel of the ``critical`` list (or the override), now, never held; then
  the escalation state machine repeats it until acknowledged (:func:`zerg.alerts.repeats.start_escalation`).
- Push (Web Push, :mod:`zerg.notify.push`): beside those channels, to every subscription of the
  owner when the policy's ``push`` names the severity (default: warning and critical), the first
  alert and each repeat alike; never held (quiet hours hold only SMS, as for email). An owner
  without a subscription gets no push row at all (push is on "when the owner has a subscription").

Invariants:
- Every email or SMS goes through :func:`zerg.notify.deliver.deliver`: only the owner's verified
  contacts, the daily limits, one ``notifications`` row per contact (sent, held, suppressed or
  failed, and why). Nothing here talks to a provider.
- Called once per inbox item, by whoever wrote it (:func:`zerg.alerts.background.on_run_end`).
- Headline and details were written by a model from tool output: they are data. Subjects are one
  line (and :func:`zerg.notify.channels.notifier.header_text` neutralises header injection); the email's
  HTML part is the text, escaped by the notifier.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zerg.notify.policy import CHANNELS, get_policy
from zerg.text import one_line

if TYPE_CHECKING:
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)

SMS_CHARS = 300  # an alert SMS stays short (2 segments); the email carries the details


@dataclass(frozen=True)
class AlertMessage:
    """One alert's texts: the email's subject and body (the notifier escapes it into the HTML part)
    and the SMS."""

    subject: str
    text: str
    sms: str


def base_url(settings: Any) -> str:
    return (settings.public_url or settings.api_url).rstrip("/")


def run_link(base: str, run_id: int) -> str:
    """The run's page under ``base`` (:func:`base_url`), for alerts and digests."""
    return f"{base.rstrip('/')}/api/jarvis/runs/{run_id}"


def compose(settings: Any, item: dict[str, Any], *, attempt: int = 0) -> AlertMessage:
    """The alert for an inbox ``item`` (run_id, severity, headline, details, schedule_name);
    ``attempt`` n > 0 marks the n-th repeat of a critical alert."""
    severity, run_id = item["severity"].upper(), item["run_id"]
    headline, details = one_line(item["headline"]), item["details"] or ""
    again = f" (repeat {attempt})" if attempt else ""
    origin = f"Scheduled check: {item['schedule_name']}\n" if item.get("schedule_name") else ""
    text = (f"{headline}\n\n{details}\n\n{origin}Run: {run_link(base_url(settings), run_id)}\n"
            # Replies are not read yet (issue 15): the text promises only what acknowledges today.
            f"To acknowledge: run `zerg inbox ack {run_id}`, or POST "
            f"{base_url(settings)}/api/jarvis/inbox/{run_id}/ack\n")
    head, tail = f"Zerg {severity}{again}: {headline}.", f" Ack: zerg inbox ack {run_id}"
    room = SMS_CHARS - len(head) - len(tail) - 1
    short = one_line(details, room) if room > 20 and details.strip() else ""
    return AlertMessage(f"[Zerg {severity}] {headline}{again}", text, f"{head} {short}{tail}" if short else head + tail)


def channels_for(policy: Any, schedule: dict[str, Any] | None, severity: str) -> list[str]:
    """The channels a result of ``severity`` goes to: the schedule's override for that severity if
    it has one, else the owner's policy."""
    override = (schedule or {}).get("channels") or {}
    chosen = override[severity] if severity in override else policy.channels.get(severity, [])
    return [c for c in dict.fromkeys(chosen) if c in CHANNELS]


def push_alert(rt: "Runtime", owner_id: int, policy: Any, item: dict[str, Any], message: AlertMessage, *,
               purpose: str = "alert", attempt: int = 0) -> list[dict[str, Any]]:
    """Push ``message`` (an inbox ``item``'s alert) to the owner's browsers when the policy pushes
    its severity; the notifications rows (none without a subscription, or when not pushed)."""
    if item["severity"] not in policy.push:
        return []
    from zerg.notify.push import PushMessage, notify

    run_id = item["run_id"]
    push = PushMessage(title=message.subject, body=message.sms, url=f"{base_url(rt.settings)}/#/",
                       severity=item["severity"], run_id=run_id, tag=f"zerg-run-{run_id}")
    return notify(rt, owner_id, push, purpose=purpose, schedule_id=item.get("schedule_id"), attempt=attempt)


def apply(rt: "Runtime", owner_id: int, item: dict[str, Any], schedule: dict[str, Any] | None) -> dict[str, Any]:
    """Send what ``item``'s severity calls for; a report: the notifications rows' statuses per
    channel, and whether an escalation started."""
    from zerg.notify.deliver import deliver

    severity = item["severity"]
    report: dict[str, Any] = {"severity": severity, "sent": {}}
    if severity == "info":
        return {**report, "note": "info: in the inbox until the next digest"}
    with rt.pool.connection() as conn:
        policy = get_policy(conn, owner_id)
    message = compose(rt.settings, item)
    for channel in channels_for(policy, schedule, severity):
        rows = deliver(rt, owner_id, channel=channel, purpose="alert", severity=severity,
                       subject=message.subject, body=message.text if channel == "email" else message.sms,
                       run_id=item["run_id"], schedule_id=item.get("schedule_id"),
                       hold_in_quiet_hours=severity == "warning")
        report["sent"][channel] = [r["status"] for r in rows]
    try:  # a push bug never keeps the escalation from starting; its rows say what happened
        pushed = push_alert(rt, owner_id, policy, item, message)
    except Exception as exc:
        log.warning("run %s: push failed", item["run_id"], exc_info=True)
        report["push"] = f"failed: {type(exc).__name__}: {exc}"[:300]
        pushed = []
    if pushed:
        report["sent"]["push"] = [r["status"] for r in pushed]
    if severity == "critical":
        try:  # the first alert is out whatever happens here; a failed start is logged and reported
            from zerg.alerts.repeats import start_escalation

            report["escalation"] = start_escalation(rt, owner_id, item["run_id"])
        except Exception as exc:
            log.warning("run %s: critical alert sent, but its escalation could not start", item["run_id"], exc_info=True)
            report["escalation"] = f"not started: {type(exc).__name__}: {exc}"[:300]
    return report
