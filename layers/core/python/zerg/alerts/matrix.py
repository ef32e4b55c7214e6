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
from typing import TYPE_CHECKING, Any

from zerg.alerts.messages import channels_for, compose, push_alert
from zerg.alerts.repeats import start_escalation
from zerg.notify.policy import get_policy

if TYPE_CHECKING:
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)


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
            report["escalation"] = start_escalation(rt, owner_id, item["run_id"])
        except Exception as exc:
            log.warning("run %s: critical alert sent, but its escalation could not start", item["run_id"], exc_info=True)
            report["escalation"] = f"not started: {type(exc).__name__}: {exc}"[:300]
    return report
