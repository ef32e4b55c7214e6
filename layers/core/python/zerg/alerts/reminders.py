"""Reminders: a ``reminder`` schedule's fire sends its text to the owner, without a run.

Invariants:
- No model is involved: the text the owner (or the supervisor, in a run the owner started) wrote
  is what is sent, as is.
- Channels: the schedule's channel override when it has one, else every channel the owner has a
  verified contact for. Sending goes through :func:`zerg.notify.deliver.deliver` only (verified
  contacts, daily limits, a ``notifications`` row per send or suppression).
- An owner with no verified contact gets no reminder, and the suppression is recorded (the
  email channel's row says why).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from zerg.notify.policy import CHANNELS

if TYPE_CHECKING:
    from zerg.runtime import Runtime


def override_channels(channels: Any) -> list[str] | None:
    """The channels a schedule's override names: a list as is, a per-severity map as the union of
    its lists; None when the schedule has no override."""
    if not channels:
        return None
    names = channels if isinstance(channels, list) else [c for v in channels.values() for c in (v or [])]
    return [c for c in CHANNELS if c in names]


def _subject(text: str) -> str:
    line = " ".join(text.split())
    return "Reminder: " + (line if len(line) <= 80 else line[:79].rstrip() + "…")


def send_reminder(rt: "Runtime", schedule: dict[str, Any], scheduled_time: datetime) -> tuple[str, str]:
    """Send ``schedule``'s text to the owner: ``(outcome, detail)``, outcome ``sent`` (to at least
    one contact) or ``failed`` (suppressed or not sent: why)."""
    from zerg.notify import contacts
    from zerg.notify.deliver import deliver

    owner_id, text = schedule["owner_id"], schedule["task"]
    channels = override_channels(schedule.get("channels"))
    if channels is None:
        with rt.pool.connection() as conn:
            verified = {c["kind"] for c in contacts.list_contacts(conn, owner_id) if c["verified_at"] is not None}
        channels = [c for c in CHANNELS if c in verified] or ["email"]  # none: email's row records why
    local = scheduled_time.astimezone(ZoneInfo(schedule["timezone"]))
    footer = f"(Zerg reminder \"{schedule['name']}\", due {local:%a %Y-%m-%d %H:%M} {schedule['timezone']}.)"
    rows: list[dict[str, Any]] = []
    for channel in channels:
        rows += deliver(rt, owner_id, channel=channel, purpose="reminder", schedule_id=schedule["id"],
                        subject=_subject(text), body=f"{text}\n\n{footer}" if channel == "email" else f"Reminder: {text}")
    sent = [r for r in rows if r["status"] == "sent"]
    if not sent:
        why = "; ".join(f"{r['channel']} {r['status']}: {r.get('reason') or 'no reason recorded'}" for r in rows)
        return "failed", f"reminder not sent ({why or 'no notification'})"[:1000]
    return "sent", ("reminder to " + ", ".join(f"{r['channel']} {r.get('address') or '?'}" for r in sent))[:1000]
