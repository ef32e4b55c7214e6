"""The ``[REPLY CONTEXT]`` layer: what a reply's run answers, shown to its supervisor.

A run started by an email or SMS reply (trigger ``email``/``sms``) has the reply text as its task:
the verified owner's own words. What they replied to - the notification, and when it came from a
run, that run's inbox headline and severity, its answer and its schedule - is told here, so "make
this weekly" can name the schedule and "what was the disk at?" can quote the alert.

Invariants:
- Owner-scoped: every read names the run's owner (:func:`zerg.inbound.messages.for_run`,
  :func:`zerg.notify.notifications.get`, ...); another owner's rows are never found.
- Data, not instructions: the alert, the run's answer and the headline were written by models from
  tool output, so the layer reaches the model only fenced and labelled, in a user-role message
  (:mod:`zerg.supervisor.context`), never in the system prompt and never stored.
- Bounded: each text at most :data:`TEXT_CHARS`; the assembler fits the whole within its share.
- Never fails a run: a failure to build it is logged and the run goes on without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.statuses import REPLY_TRIGGERS
from zerg.text import one_line

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

HEADER = "[REPLY CONTEXT]"
TEXT_CHARS = 1_500


def reply_layer(rt: "Runtime", run: dict[str, Any]) -> str | None:
    """The layer's text for ``run``, or None (not a reply's run, or nothing known of it)."""
    if run.get("trigger") not in REPLY_TRIGGERS:
        return None
    try:
        with rt.pool.connection() as conn:
            return build(conn, run["owner_id"], run["id"])
    except Exception as exc:  # a help, never a reason to fail the run
        observability.logger().warning("reply context not built", extra={
            "run_id": run["id"], "reason": f"{type(exc).__name__}: {exc}"[:300]})
        return None


def build(conn: "Connection", owner_id: int, run_id: int) -> str | None:
    from zerg.alerts import inbox
    from zerg.inbound import messages
    from zerg.notify import notifications
    from zerg.runs import store as runs

    inbound = messages.for_run(conn, owner_id, run_id)
    if inbound is None:
        return None
    via = "an email" if inbound["channel"] == "email" else "an SMS"
    lines = [f"{HEADER} This run was started by {via} from the owner's verified "
             f"{'address' if inbound['channel'] == 'email' else 'number'}: the task is their reply. "
             "Below is what it answers.",
             f"Channel: {inbound['channel']} (your answer is sent back on it)"]
    if inbound["subject"]:
        lines.append(f"Reply subject: {one_line(inbound['subject'], 300)}")
    note = (notifications.get(conn, owner_id, inbound["notification_id"])
            if inbound["notification_id"] else None)
    if note is not None:
        kind = " ".join(p for p in (note["severity"], note["purpose"]) if p)
        lines += ["", f"It answers Zerg's {note['channel']} {kind} #{note['id']}, sent {note['sent_on']:%Y-%m-%d %H:%M} UTC:"]
        if note["subject"] and note["channel"] == "email":
            lines.append(f"  Subject: {one_line(note['subject'], 300)}")
        lines.append(f"  Text: {_indent(_excerpt(note['body'], TEXT_CHARS))}")
    answered_run = inbound["answers_run_id"]
    run = runs.get_run(conn, owner_id, answered_run) if answered_run else None
    if run is not None:
        lines += ["", f"That message came from run #{run['id']} ({run['trigger']}, {run['status']}); "
                      f"its task: {one_line(run['task'], 300)}"]
        item = inbox.get(conn, owner_id, run["id"])
        if item is not None:
            state = "acknowledged" if item["acknowledged_at"] else "not acknowledged"
            lines.append(f"  Inbox item: {item['severity']}: {one_line(item['headline'], 300)} ({state})")
        if run["result"]:
            lines.append(f"  Its answer: {_indent(_excerpt(run['result'], TEXT_CHARS))}")
    schedule = _schedule(conn, owner_id, run, note)
    if schedule is not None:
        lines += ["", _schedule_line(schedule)]
    return "\n".join(lines)


def _schedule(conn: "Connection", owner_id: int, run: dict[str, Any] | None,
              note: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schedule behind what the reply answers: the answered run's (a reply to an answer: the run
    that answer replied to, once more), else the notification's own (a reminder, a digest)."""
    from zerg.inbound import messages
    from zerg.schedules import fires, store

    if run is not None:
        found = fires.schedule_of_run(conn, owner_id, run["id"])
        if found is None and run["trigger"] in REPLY_TRIGGERS:  # "make that weekly" after a reply's answer
            earlier = messages.for_run(conn, owner_id, run["id"])
            if earlier and earlier["answers_run_id"]:
                found = fires.schedule_of_run(conn, owner_id, earlier["answers_run_id"])
        if found is not None:
            return found
    if note is not None and note["schedule_id"]:
        return store.get(conn, owner_id, note["schedule_id"])
    return None


def _schedule_line(s: dict[str, Any]) -> str:
    when = (f"cron {s['cron']}" if s["cron"] else f"rate {s['rate']}" if s["rate"]
            else f"once at {s['at']:%Y-%m-%d %H:%M}" if s["at"] else s["expression"])
    state = "enabled" if s["enabled"] else "paused"
    return (f"Schedule: #{s['id']} '{one_line(s['name'], 100)}' (kind {s['kind']}, {when}, time zone {s['timezone']}, "
            f"{state}); its task: {one_line(s['task'], 300)}")


def _excerpt(text: str | None, limit: int) -> str:
    """A text of many lines (a message's body, a run's answer) kept as lines, cut with …; a field
    of one line is :func:`zerg.text.one_line` (a newline in it cannot start a line here)."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")
