"""What an alert says and where it goes: the texts of an inbox item's alert (email subject and
body, SMS), its channels (the schedule's override, else the owner's policy), its push, and the
links every message to the owner carries. Used by the first alert (:mod:`zerg.alerts.matrix`),
each repeat of a critical one (:mod:`zerg.alerts.repeats`), the digest and the answers.

Headline and details were written by a model from tool output: they are data, cut to one line
where a line is all there is room for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zerg.notify.policy import CHANNELS
from zerg.text import one_line

if TYPE_CHECKING:
    from zerg.runtime import Runtime

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
