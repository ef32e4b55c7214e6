"""Directives: what the supervisor's directive tools (:mod:`zerg.tools.directive_tools`) do when the owner
says "make that check weekly", "pause the backup check", "no SMS at night" or "delete the disk check".

Invariants:
- Schedules change only through :mod:`zerg.schedules.service` (so EventBridge Scheduler follows) and
  the notification policy only through :func:`zerg.notify.policy.set_policy` with a
  :class:`~zerg.notify.policy.PolicyChange`: the same code as the API, the CLI and each other.
- Owner-scoped throughout: another owner's schedule id is "no schedule #N", the answer for one that
  does not exist.
- Preferences are the documented keys only (:data:`PREFERENCE_KEYS`); anything else is refused with
  the keys and the expected form, never guessed.
- A destructive directive (deleting a schedule; a preference that leaves critical alerts with no
  channel, or every severity with none, or a spending cap below a cent, which stops every run; a
  schedule's channels that leave its critical alerts, or its warnings and critical alerts, with no
  channel) is never done in the run that asks for it. It is recorded as
  a question (``pending_directives``, :mod:`zerg.inbound.pending`) and done only when a later call
  with ``confirm`` finds that question, pending and unexpired, and the user's own yes to it, checked
  here and not left to the model: the confirming run was started by a person, its task (the user's
  own words, ``runs.task``) is a yes as the whole message (:func:`zerg.inbound.words.is_affirmative`),
  and it is the NEXT person-started run on the thread after the run that asked (no other request in
  between). Neither a model nor text it read can confirm: a run answering anything else, or a yes
  to something later, is refused with "the user has to say yes to that question first". What the
  code cannot see is what the asking run's answer showed the user: the yes is to that answer.
- Order of a confirmed change: a preference is changed and its question marked ``done`` in one
  transaction. A schedule deletion or change has its own transaction in the service (the row and
  Scheduler together): the question is checked first, the schedule changed, then the question
  marked ``done``.
  A crash between the last two leaves the question pending for a schedule that is gone: a repeated
  "yes" answers "no schedule #N", and the question expires within a day.
- Every refusal is :class:`DirectiveError` with text for the model; nothing half-done.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from zerg.notify.policy import (CHANNELS, SEVERITIES, Policy, PolicyChange, PolicyError, change_from, get_policy,
                                set_policy)
from zerg.text import one_line

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime


class DirectiveError(ValueError):
    """A directive that cannot be done; the message is for the model."""


NO_PENDING = "There is no pending request to confirm; ask the user first."
NOT_A_YES = "Not confirmed: the user has to say yes to that question first"

# --- preferences ---------------------------------------------------------------------------------

PREFERENCE_KEYS: dict[str, str] = {
    "channels.info": "email, sms, email,sms or none",
    "channels.warning": "email, sms, email,sms or none",
    "channels.critical": "email, sms, email,sms or none",
    "quiet_hours": "HH:MM-HH:MM on the 24-hour clock (e.g. 22:00-07:00; may wrap midnight) or off",
    "timezone": "an IANA time zone, e.g. Europe/Berlin",
    "daily_usd_cap": "a number of US dollars per day (e.g. 5 or 2.50) or off",
}
_OFF = ("off", "none", "no")
_SPLIT = re.compile(r"[\s,+/&]+|\band\b")


@dataclass(frozen=True)
class Preference:
    key: str
    value: str  # canonical: "email,sms", "none", "22:00-07:00", "off", "Europe/Berlin", "2.50"
    change: PolicyChange


def _keys() -> str:
    return "; ".join(f"{k} ({form})" for k, form in PREFERENCE_KEYS.items())


def parse_preference(key: str, value: str) -> Preference:
    """The documented ``key`` set to ``value``, as a :class:`PolicyChange`; DirectiveError naming
    the keys or the expected form."""
    key = key.strip().lower()
    if key not in PREFERENCE_KEYS:
        raise DirectiveError(f"unknown preference {key!r}; the keys are: {_keys()}")
    text = value.strip()
    if not text:  # never read as "none" or "off": silence is asked for in words
        raise DirectiveError(f"{key}: a value is required; give {PREFERENCE_KEYS[key]}")
    fields: dict[str, Any]
    if key.startswith("channels."):
        words = [w for w in _SPLIT.split(text.lower()) if w]
        if words in (["none"], ["off"], ["no"]):
            chosen: list[str] = []
        elif words and all(w in CHANNELS for w in words):
            chosen = [c for c in CHANNELS if c in words]
        else:
            raise DirectiveError(f"{key}: {value!r} is not {PREFERENCE_KEYS[key]}")
        canonical = ",".join(chosen) or "none"
        fields = {"channels": {key.split(".", 1)[1]: chosen}}
    elif key == "quiet_hours":
        canonical = "off" if text.lower() in _OFF else text
        fields = {"quiet_hours": canonical}
    elif key == "timezone":
        canonical, fields = text, {"timezone": text}
    else:  # daily_usd_cap
        if text.lower() in _OFF:
            canonical, fields = "off", {"daily_usd_cap": None}
        else:
            try:
                amount = Decimal(text.removeprefix("$").replace("USD", "").strip())
            except InvalidOperation:
                raise DirectiveError(f"{key}: {value!r} is not {PREFERENCE_KEYS[key]}") from None
            canonical, fields = money(amount), {"daily_usd_cap": amount}
    try:
        change = change_from(fields)
    except PolicyError as exc:
        raise DirectiveError(f"{key}: {value!r} is refused ({exc}); give {PREFERENCE_KEYS[key]}") from None
    return Preference(key, canonical, change)


def shown(policy: Policy, key: str) -> str:
    """The policy's current value of ``key``, written as a directive writes it."""
    if key.startswith("channels."):
        return ",".join(policy.channels.get(key.split(".", 1)[1], [])) or "none"
    if key == "quiet_hours":
        return policy.quiet_hours or "off"
    if key == "timezone":
        return policy.timezone
    return "off" if policy.daily_usd_cap is None else money(policy.daily_usd_cap)


def money(amount: Decimal) -> str:
    """'2.50', '5.00', '0.125': cents always, more digits only when given."""
    if not amount.is_finite():
        return str(amount)
    exact = amount.normalize()
    return f"{exact:.2f}" if exact.as_tuple().exponent >= -2 else f"{exact:f}"


CAP_FLOOR = Decimal("0.01")  # a daily cap below a cent stops every model call: every check, every request
_ALERTING = ("warning", "critical")  # the severities that reach the user at once


def _silencing(before: dict[str, list[str]], after: dict[str, list[str]], its: str = "") -> str | None:
    """Why going from the channels ``before`` to ``after`` (per severity) silences alerts, or None."""
    if not any(after.get(s) for s in SEVERITIES) and any(before.get(s) for s in SEVERITIES):
        return f"stop all {its}alerts: no severity keeps a channel"
    if before.get("critical") and not after.get("critical"):
        return f"{its}critical alerts would reach the user by no channel"
    return None


def destructive(before: Policy, pref: Preference) -> str | None:
    """Why ``pref`` needs the user's yes (it silences critical alerts or every alert, or sets a
    spending cap below a cent, which stops every run), or None."""
    if "daily_usd_cap" in pref.change.model_fields_set:
        cap, was = pref.change.daily_usd_cap, before.daily_usd_cap
        if cap is not None and cap < CAP_FLOOR and (was is None or was >= CAP_FLOOR):
            return (f"a cap below {money(CAP_FLOOR)} USD stops every model call: no check and no request "
                    "runs until it is raised")
        return None
    if not pref.change.channels:
        return None
    return _silencing(before.channels, {**before.channels, **pref.change.channels})


def silenced_schedule(policy: Policy, schedule: dict[str, Any], channels: dict[str, list[str]]) -> str | None:
    """Why giving ``schedule`` these channel overrides ({}: the policy's) needs the user's yes: its
    critical alerts, or its warnings and critical alerts together, would reach the user by no
    channel (silencing the check); None otherwise."""
    from zerg.alerts.messages import channels_for

    before = {s: channels_for(policy, schedule, s) for s in SEVERITIES}
    after = {s: channels_for(policy, {"channels": channels}, s) for s in SEVERITIES}
    why = _silencing(before, after, its="its ")
    if why is None and any(before[s] for s in _ALERTING) and not any(after[s] for s in _ALERTING):
        why = "its warnings and critical alerts would reach the user by no channel"
    return why


def _effect(policy: Policy, key: str) -> str:
    if key == "quiet_hours":
        return (f" Warning SMS wait until quiet hours end ({policy.timezone}); critical alerts still page."
                if policy.quiet_hours else " Alerts are sent at any hour.")
    if key == "timezone":
        return " Quiet hours, the spending cap's day and new schedules use it; existing schedules keep their zones."
    if key == "daily_usd_cap":
        return (f" Model spending stops for the day (in {policy.timezone}) at that amount."
                if policy.daily_usd_cap is not None else " Model spending is not capped.")
    return ""


def set_preference(rt: Runtime, owner_id: int, run: dict[str, Any], key: str, value: str, confirm: bool) -> str:
    """Apply the preference, or ask first when it is destructive (see the module's rules)."""
    from zerg.inbound import pending

    pref = parse_preference(key, value)
    args = {"key": pref.key, "value": pref.value}
    with rt.pool.connection() as conn:
        before = get_policy(conn, owner_id)
        why = destructive(before, pref)
        question = None
        if why and not confirm:
            return _ask(conn, owner_id, run, "set_preference", args, f"set {pref.key} to {pref.value} ({why})")
        if why:
            question = _confirmable(conn, owner_id, run, "set_preference", args)
        after = set_policy(conn, owner_id, pref.change)
        if question is not None:
            pending.mark_done(conn, owner_id, question["id"])
        conn.commit()
    was = shown(before, pref.key)
    now = shown(after, pref.key)
    change = f"is now {now} (was {was})" if was != now else f"stays {now} (unchanged)"
    return f"Preference {pref.key} {change}.{_effect(after, pref.key)}"


# --- confirmation ------------------------------------------------------------------------------------

def _ask(conn: Connection, owner_id: int, run: dict[str, Any], action: str, args: dict[str, Any], summary: str) -> str:
    from zerg.inbound import pending

    pending.expire_overdue(conn, owner_id)
    pending.ask(conn, owner_id, run["id"], action, args, summary)
    conn.commit()
    return f"Not done yet: ask the user to confirm '{summary}' (their next message must be yes)."


def _confirmable(conn: Connection, owner_id: int, run: dict[str, Any], action: str,
                 args: dict[str, Any]) -> dict[str, Any]:
    """The question this confirmation answers, locked, when the user said yes to it (module rules);
    DirectiveError otherwise (with the overdue questions marked expired and committed)."""
    from zerg.inbound import pending
    from zerg.inbound.words import is_affirmative
    from zerg.runs import store as runs
    from zerg.statuses import BACKGROUND_TRIGGERS

    expired = pending.expire_overdue(conn, owner_id)
    row = pending.latest_pending(conn, owner_id, action, args)
    refusal = None
    if row is None:
        if any(e["action"] == action and e["args"] == args for e in expired):
            refusal = (f"{NO_PENDING} (The earlier request expired after "
                       f"{int(pending.TTL.total_seconds() // 3600)} hours.)")
        else:
            refusal = NO_PENDING
    elif row["run_id"] == run["id"] or row["created_at"] >= run["created_at"]:
        refusal = (f"{NO_PENDING} (The request was made in this run: the user must say yes "
                   "in a later message.)")
    elif run["trigger"] in BACKGROUND_TRIGGERS or not is_affirmative(run["task"] or ""):
        refusal = (f"{NOT_A_YES} ('{row['summary']}'): this request is not their yes to it. Ask them "
                   "(call again without confirm) and wait for a yes.")
    elif runs.next_run_on_thread(conn, owner_id, row["run_id"], excluding=BACKGROUND_TRIGGERS) != run["id"]:
        refusal = (f"{NOT_A_YES} ('{row['summary']}'): their yes must be their next message after the "
                   "question, and another request came in between. Ask again (call without confirm).")
    if refusal is None:
        return row
    conn.commit()  # the expiries stay recorded
    raise DirectiveError(refusal)


# --- schedules -------------------------------------------------------------------------------------

_SIMPLE = re.compile(r"^\d{1,2}$")


def written(schedule: dict[str, Any]) -> str:
    """The expression as the owner wrote it: 'cron 0 6 * * 1', 'rate 1 day', 'at 2026-11-23T09:00:00'."""
    kind = next(k for k in ("cron", "rate", "at") if schedule[k] is not None)
    return f"{kind} {schedule[kind]}"


def cadence(schedule: dict[str, Any]) -> str:
    """How often, in words: 'weekly', 'daily', 'every 2 hours', 'once', or 'on its cron'."""
    if schedule["rate"]:
        return f"every {schedule['rate']}"
    if schedule["at"]:
        return "once"
    from zerg.schedules.expressions import MACROS

    cron = MACROS.get(schedule["cron"].strip().lower(), schedule["cron"])
    minute, hour, dom, month, dow = (cron.split() + ["?"] * 5)[:5]
    fixed_time = bool(_SIMPLE.match(minute) and _SIMPLE.match(hour))
    if fixed_time and month == "*" and dom == "*" and dow == "*":
        return "daily"
    if fixed_time and month == "*" and dom == "*" and re.fullmatch(r"\d|[A-Za-z]{3}", dow):
        return "weekly"
    if fixed_time and month == "*" and _SIMPLE.match(dom) and dow == "*":
        return "monthly"
    if _SIMPLE.match(minute) and hour == "*" and dom == month == dow == "*":
        return "hourly"
    return "on its cron"


def next_fire(schedule: dict[str, Any]) -> str:
    """'Monday 2026-11-30 06:00' in the schedule's zone, or why there is none."""
    nxt = schedule["next_fire_at"]
    if nxt is None:
        return "none (paused)" if not schedule["enabled"] else "none (it has no future time)"
    return f"{nxt.astimezone(ZoneInfo(schedule['timezone'])):%A %Y-%m-%d %H:%M}"


def timing(schedule: dict[str, Any]) -> str:
    """'weekly (cron 0 6 * * 1, Europe/Berlin); next: Monday 2026-11-30 06:00'."""
    return f"{cadence(schedule)} ({written(schedule)}, {schedule['timezone']}); next: {next_fire(schedule)}"


def channels_text(schedule: dict[str, Any]) -> str:
    overrides = schedule["channels"]
    if not overrides:
        return "the notification policy's"
    return ", ".join(f"{sev} → {','.join(overrides[sev]) or 'none'}" for sev in SEVERITIES if sev in overrides)


def listing(schedule: dict[str, Any], task_chars: int = 160) -> str:
    """One line of ``list_schedules``."""
    task = one_line(schedule["task"] or "", task_chars)
    state = "enabled" if schedule["enabled"] else "paused"
    return (f"#{schedule['id']} {schedule['name']!r} ({schedule['kind']}, {state}): {timing(schedule)}; "
            f"alert channels: {channels_text(schedule)}; task: {task!r}")


def changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The confirmation of an update: 'Schedule #3 'disk check' now runs weekly (...); next: ...'."""
    head = f"Schedule #{after['id']} {after['name']!r}"
    if not after["enabled"]:
        text = f"{head} is paused: it will not run until resumed (when enabled it runs {cadence(after)}, " \
               f"{written(after)}, {after['timezone']})."
    else:
        again = " is enabled again and" if not before["enabled"] else ""
        text = f"{head}{again} now runs {timing(after)}."
    if before["channels"] != after["channels"]:
        text += f" Its alerts go to: {channels_text(after)}."
    return text


def _channel_args(channels: dict[str, list[str]]) -> dict[str, list[str]]:
    """Channel overrides in one spelling (channels in :data:`CHANNELS` order, once each), so the
    question and its confirmation compare equal however the model wrote them."""
    return {sev: [c for c in CHANNELS if c in channels[sev]] for sev in SEVERITIES if sev in channels}


def update_schedule(rt: Runtime, owner_id: int, run: dict[str, Any], schedule_id: int, fields: dict[str, Any],
                    confirm: bool) -> str:
    """Change the schedule (``fields`` as :class:`~zerg.schedules.spec.SchedulePatch` takes them), or
    ask first when its new channels silence it (:func:`silenced_schedule`, module rules)."""
    from zerg.inbound import pending
    from zerg.schedules import service
    from zerg.schedules.spec import SchedulePatch

    if "channels" in fields:
        fields = {**fields, "channels": _channel_args(fields["channels"])}
    try:
        before = service.get(rt, owner_id, schedule_id)
        question = None
        if "channels" in fields:
            with rt.pool.connection() as conn:
                why = silenced_schedule(get_policy(conn, owner_id), before, fields["channels"])
                if why:
                    args = {"schedule_id": schedule_id, **fields}
                    if not confirm:
                        shown_fields = "; ".join(f"{k} {v}" for k, v in fields.items() if k != "channels")
                        summary = (f"set schedule #{schedule_id} \"{before['name']}\" alert channels to "
                                   f"{channels_text({'channels': fields['channels']})}"
                                   f"{'; ' + shown_fields if shown_fields else ''} ({why})")
                        return _ask(conn, owner_id, run, "update_schedule", args, summary)
                    question = _confirmable(conn, owner_id, run, "update_schedule", args)
                    conn.commit()  # the lock ends here: the service takes its own connection
        after = service.update(rt, owner_id, schedule_id, SchedulePatch(**fields))
        if question is not None:
            with rt.pool.connection() as conn:
                pending.mark_done(conn, owner_id, question["id"])
    except service.ScheduleNotFound:
        raise DirectiveError(f"no schedule #{schedule_id}") from None
    except (service.ScheduleError, service.ScheduleConflict, service.ScheduleUnavailable) as exc:
        raise DirectiveError(str(exc)) from None
    return changed(before, after)


def delete_schedule(rt: Runtime, owner_id: int, run: dict[str, Any], schedule_id: int, confirm: bool) -> str:
    """Ask first; with ``confirm``, delete the schedule the user said yes to deleting (module rules)."""
    from zerg.inbound import pending
    from zerg.schedules import service

    args = {"schedule_id": schedule_id}
    try:
        if not confirm:
            schedule = service.get(rt, owner_id, schedule_id)
            summary = f"delete schedule #{schedule_id} \"{schedule['name']}\" ({written(schedule)})"
            with rt.pool.connection() as conn:
                return _ask(conn, owner_id, run, "delete_schedule", args, summary)
        service.get(rt, owner_id, schedule_id)  # another owner's id: "no schedule #N", as when asking
        with rt.pool.connection() as conn:
            question = _confirmable(conn, owner_id, run, "delete_schedule", args)
            conn.commit()  # the lock ends here: the service takes its own connection
        deleted = service.delete(rt, owner_id, schedule_id)
        with rt.pool.connection() as conn:
            pending.mark_done(conn, owner_id, question["id"])
    except service.ScheduleNotFound:
        raise DirectiveError(f"no schedule #{schedule_id}") from None
    except service.ScheduleUnavailable as exc:
        raise DirectiveError(str(exc)) from None
    return f"Schedule #{schedule_id} {deleted['name']!r} deleted ({written(deleted)}): it will not run again."
