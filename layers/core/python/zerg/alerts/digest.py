"""The morning digest: at a ``digest`` schedule's fire, ONE email to the owner listing their
background results since the last digest.

Invariants:
- The digest lists exactly the inbox items no digest has included yet ("New", any severity), plus
  older warning and critical ones still unacknowledged ("Still open"). An info result is listed
  once; an acknowledged item that was in a digest never comes back.
- Nothing new → no email (outcome ``nothing``): still-open items alone never send one, they ride
  along with the next digest that has something new (the inbox and the alerts' own escalation are
  where an open warning is chased, not a daily repeat of the same email).
- Items are marked digested only when the email was sent: a suppressed (no verified address,
  daily limit) or failed digest leaves them new for the next one.
- Headlines and details are model text: escaped in the HTML part, never put in a header except
  through the notifier's header flattening (the subject carries counts only).
- Times are shown in the digest schedule's time zone (the one the owner wrote its time in).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from zerg.alerts import inbox
from zerg.alerts.messages import base_url as escalation_base_url
from zerg.alerts.messages import run_link
from zerg.notify import notifications

if TYPE_CHECKING:
    from zerg.runtime import Runtime

MAX_ITEMS = 100  # per digest; the rest wait in the inbox (and the email says so)
DETAILS_CHARS = 280  # of each item's details in the email
SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Digest:
    subject: str
    text: str
    html: str
    new_run_ids: list[int]  # marked digested once sent


def _when(ts: datetime, tz: ZoneInfo, now: datetime) -> str:
    local = ts.astimezone(tz)
    return f"{local:%a %H:%M}" if (now - ts).days < 6 else f"{local:%a %d %b %H:%M}"


def _counts(rows: list[dict[str, Any]]) -> str:
    parts = []
    for severity in ("critical", "warning"):
        n = sum(r["severity"] == severity for r in rows)
        if n:
            parts.append(f"{n} {severity}" + ("s" if n > 1 and severity == "warning" else ""))
    return f" ({', '.join(parts)})" if parts else ""


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def compose(rows: list[dict[str, Any]], *, since: datetime | None, timezone: str, base_url: str,
            now: datetime, more: bool = False) -> Digest:
    """The digest email of ``rows`` (from :func:`zerg.alerts.inbox.for_digest`, already cut)."""
    tz = ZoneInfo(timezone)
    new = [r for r in rows if r["new"]]
    still_open = [r for r in rows if not r["new"]]
    n = len(rows)
    since_text = f" since {_when(since, tz, now)}" if since else ""
    subject = f"Zerg digest: {n} background result{'s' if n != 1 else ''}{_counts(rows)}{since_text}"

    text = [f"{n} background result{'s' if n != 1 else ''}{since_text} (times in {timezone})."]
    parts = [f"<p>{html.escape(text[0])}</p>"]
    for title, items, note in (("New", new, "not in any digest yet"),
                               ("Still open", still_open, "from earlier digests, not acknowledged yet")):
        if not items:
            continue
        text += ["", f"{title} ({len(items)}): {note}"]
        parts.append(f"<h2>{title} ({len(items)})</h2><p>{html.escape(note)}</p><ul>")
        for r in items:
            link = run_link(base_url, r["run_id"])
            acked = " (acknowledged)" if r["acknowledged_at"] else ""
            head = f"[{r['severity'].upper()}] {_clip(r['headline'], 300)} ({_when(r['created_at'], tz, now)}){acked}"
            details = _clip(r["details"] or "", DETAILS_CHARS)
            text += [f"- {head}"] + ([f"  {details}"] if details else []) + [f"  {link}"]
            parts.append(
                f"<li><strong>{html.escape(r['severity'].upper())}</strong> {html.escape(_clip(r['headline'], 300))} "
                f"<small>({html.escape(_when(r['created_at'], tz, now))}){html.escape(acked)}</small>"
                + (f"<br>{html.escape(details)}" if details else "")
                + f"<br><a href=\"{html.escape(link, quote=True)}\">run {r['run_id']}</a></li>")
        parts.append("</ul>")
    footer = ("Acknowledge an item with `zerg inbox ack RUN_ID` (or POST /api/jarvis/inbox/RUN_ID/ack); "
              "unacknowledged warnings and criticals come back in the next digest with something new.")
    if more:
        footer = f"More results wait in the inbox (`zerg inbox`): a digest lists at most {MAX_ITEMS}. " + footer
    text += ["", footer]
    parts.append(f"<p>{html.escape(footer)}</p>")
    body_html = ("<!DOCTYPE html><html><body style=\"font-family: sans-serif\">"
                 + "".join(parts) + "</body></html>")
    return Digest(subject, "\n".join(text) + "\n", body_html, [r["run_id"] for r in new])


def send_digest(rt: "Runtime", schedule: dict[str, Any], scheduled_time: datetime) -> tuple[str, str]:
    """The digest of ``schedule``'s owner as one email: ``(outcome, detail)`` with outcome
    ``sent``, ``nothing`` (no email: nothing new to say) or ``failed`` (suppressed or not sent: why)."""
    from zerg.notify.deliver import deliver
    from zerg.timestamps import utcnow

    owner_id = schedule["owner_id"]
    with rt.pool.connection() as conn:
        rows = inbox.for_digest(conn, owner_id, MAX_ITEMS)
        since = notifications.last_sent_at(conn, owner_id, "digest")
    if not rows:
        return "nothing", "no background results since the last digest"
    if not rows[0]["new"]:  # new items sort first: none at all
        return "nothing", (f"nothing new since the last digest; {len(rows[:MAX_ITEMS])} still open item(s) wait "
                           "for the next new result")
    settings = rt.settings
    digest = compose(rows[:MAX_ITEMS], since=since, timezone=schedule["timezone"],
                     base_url=escalation_base_url(settings), now=utcnow(), more=len(rows) > MAX_ITEMS)
    sent = deliver(rt, owner_id, channel="email", purpose="digest", subject=digest.subject, body=digest.text,
                   html=digest.html, schedule_id=schedule["id"])
    delivered = [s for s in sent if s["status"] == "sent"]
    if not delivered:
        why = "; ".join(f"{s['status']}: {s.get('reason') or 'no reason recorded'}" for s in sent) or "no notification"
        return "failed", f"digest of {len(rows[:MAX_ITEMS])} item(s) not sent ({why})"[:1000]
    with rt.pool.connection() as conn:
        inbox.mark_digested(conn, owner_id, digest.new_run_ids)
    return "sent", (f"digest of {len(digest.new_run_ids)} new and {len(rows[:MAX_ITEMS]) - len(digest.new_run_ids)} "
                    f"still open item(s) to {', '.join(s.get('address') or '?' for s in delivered)}")[:1000]
