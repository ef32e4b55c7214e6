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
- What only the owner decides (a new check, which runs commands unattended; deleting a schedule;
  a schedule's alert channels; the notification channels, quiet hours and the spending cap) is
  never done in the run that asks for it, whatever the model or the text it read says. It is
  recorded as a question, a ``directive`` approval of the one approvals table
  (:func:`zerg.approvals.requests.ask_directive`), whose words Zerg
  writes (:func:`question_text`, from the validated arguments and the rows they name, never from
  the model's prose) and appends, word for word, to that run's answer when the run closes
  (:func:`questions_of`, called by ``finalize``; the email or SMS that carries the answer carries it
  too, whole: :func:`zerg.approvals.question.split_question`). A model's answer that imitates the
  question's opening has it quoted (:func:`zerg.approvals.question.disarm`), so the last one is Zerg's. A run's
  questions are one question; asking supersedes the owner's older ones. The question also says how
  else to answer it (its SMS code, ``zerg approvals approve ID``, the approvals list): every channel
  answers it through :func:`zerg.approvals.wait.approve` / ``deny``, which makes the change through
  :func:`apply_approved` (registered as the ``directive`` applier by :mod:`zerg.wiring`).
- Only the owner decides: by approving the question's approval from any of their channels, or by a
  yes, decided here and never by a model (:func:`confirm`, called before
  the supervisor's first inference): the run was started by a person, its task (the owner's own
  words, :func:`zerg.runs.owner_words.owner_words`: never a worker retry's model-written task) is
  a yes as the whole message (:func:`zerg.inbound.words.is_affirmative`),
  it is the NEXT person-started run on the thread after the run that asked (no other request in
  between), it has read no untrusted text (``runs.read_untrusted``), and the question is the
  owner's latest, shown and unexpired. The confirmation names what was done. No tool takes a
  ``confirm``: a model, or text it read, can only ask.
- Order of a confirmation: each row is claimed (``pending`` → ``approved``, conditional) before its
  change is made, so two confirmations never do a change twice; a change that fails then (the
  schedule is gone, the name taken, Scheduler down) is said in the confirmation and not retried:
  the owner asks again.
- Every refusal is :class:`DirectiveError` with text for the model; nothing half-done.
"""

from __future__ import annotations

import json
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


OWNER_ONLY_KEYS = ("channels.info", "channels.warning", "channels.critical", "quiet_hours", "daily_usd_cap")
# ``approval.<tool>``: the owner's approval policy of one governed tool (docs/approvals.md). Always
# the owner's decision: it is only ever asked, whatever the value.
APPROVAL_KEY = "approval."


def _approval_preference(key: str, value: str) -> tuple[str, str]:
    """The governed tool and the mode ``approval.<tool>`` = ``value`` names; DirectiveError naming
    the tools or the modes."""
    from zerg.approvals.policy import GOVERNED

    tool = key.strip().lower().removeprefix(APPROVAL_KEY)
    if tool not in GOVERNED:
        raise DirectiveError(f"unknown approval key {key.strip()[:60]!r}; give approval.TOOL with TOOL one of: "
                             f"{', '.join(sorted(GOVERNED))}")
    mode = value.strip().lower()
    if mode not in ("allow", "ask", "deny"):
        raise DirectiveError(f"{APPROVAL_KEY}{tool}: {value.strip()[:60]!r} is not allow, ask or deny")
    return tool, mode


def _ask_approval(rt: Runtime, owner_id: int, run: dict[str, Any], key: str, value: str) -> str:
    from zerg import approvals

    tool, mode = _approval_preference(key, value)
    with rt.pool.connection() as conn:
        was = approvals.load_policy(conn, owner_id).mode(tool)
        if was == mode:
            return f"Approval of {tool} stays {was} (unchanged)."
        return _ask(conn, owner_id, run, "set_preference", {"key": f"{APPROVAL_KEY}{tool}", "value": mode},
                    f"set {APPROVAL_KEY}{tool} to {mode} (now {was})")


def _set_approval(rt: Runtime, owner_id: int, key: str, value: str) -> str:
    from zerg import approvals

    tool, mode = _approval_preference(key, value)
    with rt.pool.connection() as conn:
        policy = approvals.load_policy(conn, owner_id)
        was = policy.mode(tool)
        approvals.set_policy(conn, owner_id, policy.model_copy(update={"tools": {**policy.tools, tool: mode}}))
        conn.commit()
    return f"Approval of {tool} is now {mode} (was {was})."


def set_preference(rt: Runtime, owner_id: int, run: dict[str, Any], key: str, value: str) -> str:
    """Apply the preference (the time zone), or ask the owner first (channels, quiet hours, the
    spending cap, an ``approval.<tool>``: module rules)."""
    if key.strip().lower().startswith(APPROVAL_KEY):
        return _ask_approval(rt, owner_id, run, key, value)
    pref = parse_preference(key, value)
    with rt.pool.connection() as conn:
        before = get_policy(conn, owner_id)
        was = shown(before, pref.key)
        if pref.key in OWNER_ONLY_KEYS:
            if was == pref.value:
                return f"Preference {pref.key} stays {was} (unchanged)."
            why = destructive(before, pref)
            return _ask(conn, owner_id, run, "set_preference", {"key": pref.key, "value": pref.value},
                        f"set {pref.key} to {pref.value} (now {was}){'; ' + why if why else ''}")
        after = set_policy(conn, owner_id, pref.change)
        conn.commit()
    return _preference_changed(before, after, pref.key)


def _preference_changed(before: Policy, after: Policy, key: str) -> str:
    was, now = shown(before, key), shown(after, key)
    change = f"is now {now} (was {was})" if was != now else f"stays {now} (unchanged)"
    return f"Preference {key} {change}.{_effect(after, key)}"


# --- the owner's question and their yes -----------------------------------------------------------

def _ask(conn: Connection, owner_id: int, run: dict[str, Any], action: str, args: dict[str, Any], summary: str) -> str:
    from zerg.approvals import requests as approvals
    from zerg.approvals.question import TTL

    approvals.expire_directives(conn, owner_id)
    approvals.ask_directive(conn, owner_id, run["id"], action, args, summary, TTL)
    conn.commit()
    return (f"Not done: only the user can decide this. Zerg itself appends this question, word for word, to "
            f"the end of your answer: '{summary}'. It is done only if the user approves it (their next message "
            "is yes, or they approve it in their approvals). Do not ask it again or reword it; say in one sentence "
            "that it waits for their yes.")


def question_text(rows: list[dict[str, Any]]) -> str:
    """The question Zerg appends to the asking run's answer, from the rows (pending directive
    approvals: their summaries, ids and SMS codes; Zerg's words, never the model's)."""
    from zerg.approvals.question import QUESTION_START, TTL

    hours = int(TTL.total_seconds() // 3600)
    if len(rows) == 1:
        row = rows[0]
        sms = f"by SMS (Y {row['code']} or N {row['code']}), " if row["code"] else ""
        return (f"{QUESTION_START}: {row['summary']}. Reply yes as your next message to do it; anything else "
                f"leaves it undone (the question expires in {hours} hours). Until then you can also answer "
                f"approval {row['id']} {sms}with zerg approvals approve {row['id']} (or deny {row['id']}), "
                "or in your approvals list.")
    listed = "\n".join(f"{i}. {row['summary']} (approval {row['id']}"
                       f"{', SMS code ' + row['code'] if row['code'] else ''})" for i, row in enumerate(rows, 1))
    return (f"{QUESTION_START} to {len(rows)} changes:\n{listed}\nReply yes as your next message to do "
            f"all of them; anything else leaves them undone (the question expires in {hours} hours). Until then "
            "you can also answer each on its own: by SMS (Y CODE or N CODE), with zerg approvals approve ID "
            "(or deny ID), or in your approvals list.")


def questions_of(conn: Connection, run: dict[str, Any]) -> str | None:
    """The question the closing ``run`` asked (:func:`question_text`), or None."""
    from zerg.approvals import requests as approvals

    rows = approvals.directives_asked_by(conn, run["owner_id"], run["id"])
    return question_text(rows) if rows else None


def confirm(rt: Runtime, run: dict[str, Any]) -> str | None:
    """The confirmation of the owner's open question when ``run`` is their yes to it (module
    rules): each change approved through the one answer of every channel
    (:func:`zerg.approvals.wait.approve`: claimed, then done, once) and named with what was done;
    None when the run is not such a yes, so the supervisor answers it as any request (a yes to
    something the model asked in conversation, or to a question already answered elsewhere)."""
    from zerg.approvals import requests as approvals
    from zerg.approvals import wait
    from zerg.inbound.words import is_affirmative
    from zerg.runs import store as runs
    from zerg.runs.owner_words import owner_words
    from zerg.statuses import BACKGROUND_TRIGGERS, is_background

    # owner_words: the task as the person wrote it; "" for a scheduled run or a worker's retry, whose
    # task a model wrote.
    if is_background(run) or run.get("read_untrusted") or not is_affirmative(owner_words(run)):
        return None
    owner_id = run["owner_id"]
    with rt.pool.connection() as conn:
        approvals.expire_directives(conn, owner_id)
        rows = approvals.open_directive_question(conn, owner_id)
        asked_in = rows[0]["run_id"] if rows else None
        if (not rows or asked_in == run["id"] or rows[0]["created_at"] >= run["created_at"]
                or runs.next_run_on_thread(conn, owner_id, asked_in, excluding=BACKGROUND_TRIGGERS) != run["id"]):
            conn.commit()  # the expiries stay recorded
            return None
        conn.commit()
    answers = [(row, wait.approve(rt, owner_id, row["id"])) for row in rows]
    lines = [f"- {row['summary']}: {answer.done}" for row, answer in answers if answer.decided]
    if not lines:  # answered meanwhile (the API, an SMS code): nothing is done twice
        return None
    return "Confirmed by your yes:\n" + "\n".join(lines)


def apply_approved(rt: Runtime, owner_id: int, row: dict[str, Any]) -> str:
    """The applier of ``directive`` approvals (registered by :mod:`zerg.wiring`): make the change of
    the approval ``row``, already claimed (decided ``approved``), and say what was done, or why not
    (never raised; not retried: the owner asks again)."""
    try:
        return _do(rt, owner_id, row)
    except DirectiveError as exc:
        return f"not done: {exc}"
    except Exception as exc:  # the database or a provider went away: said, never a trace, not retried
        from zerg import observability

        observability.logger().warning("a confirmed directive failed", exc_info=True,
                                       extra={"owner_id": owner_id, "approval_id": row["id"]})
        return f"not done: {type(exc).__name__}; ask again"


def _do(rt: Runtime, owner_id: int, row: dict[str, Any]) -> str:
    """Make the change a confirmed row asked for; DirectiveError when it cannot be made."""
    args, action = row["arguments"], row["tool"]
    if action == "set_preference" and args["key"].startswith(APPROVAL_KEY):
        return _set_approval(rt, owner_id, args["key"], args["value"])
    if action == "set_preference":
        pref = parse_preference(args["key"], args["value"])
        with rt.pool.connection() as conn:
            before = get_policy(conn, owner_id)
            after = set_policy(conn, owner_id, pref.change)
            conn.commit()
        return _preference_changed(before, after, pref.key)
    from zerg.schedules import service
    from zerg.schedules.spec import SchedulePatch, ScheduleSpec

    try:
        if action == "create_schedule":
            return created(service.create(rt, owner_id, ScheduleSpec(**args)))
        schedule_id = args["schedule_id"]
        if action == "delete_schedule":
            deleted = service.delete(rt, owner_id, schedule_id)
            return f"Schedule #{schedule_id} {deleted['name']!r} deleted ({written(deleted)}): it will not run again."
        before = service.get(rt, owner_id, schedule_id)
        fields = {k: v for k, v in args.items() if k != "schedule_id"}
        return changed(before, service.update(rt, owner_id, schedule_id, SchedulePatch(**fields)))
    except service.ScheduleNotFound:
        raise DirectiveError(f"no schedule #{args.get('schedule_id')}") from None
    except (service.ScheduleError, service.ScheduleConflict, service.ScheduleUnavailable) as exc:
        raise DirectiveError(str(exc)) from None


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


def update_schedule(rt: Runtime, owner_id: int, run: dict[str, Any], schedule_id: int, fields: dict[str, Any]) -> str:
    """Change the schedule (``fields`` as :class:`~zerg.schedules.spec.SchedulePatch` takes them), or
    ask the owner first when its alert channels change (module rules; the whole change waits)."""
    from zerg.schedules import service
    from zerg.schedules.spec import SchedulePatch

    if "channels" in fields:
        fields = {**fields, "channels": _channel_args(fields["channels"])}
    try:
        before = service.get(rt, owner_id, schedule_id)
        if "channels" in fields and fields["channels"] != (before["channels"] or {}):
            with rt.pool.connection() as conn:
                why = silenced_schedule(get_policy(conn, owner_id), before, fields["channels"])
                others = "; ".join(f"{k} {v}" for k, v in fields.items() if k != "channels")
                summary = (f"set schedule #{schedule_id} \"{before['name']}\" alert channels to "
                           f"{channels_text({'channels': fields['channels']})} (now {channels_text(before)})"
                           f"{'; ' + others if others else ''}{'; ' + why if why else ''}")
                return _ask(conn, owner_id, run, "update_schedule", {"schedule_id": schedule_id, **fields}, summary)
        after = service.update(rt, owner_id, schedule_id, SchedulePatch(**fields))
    except service.ScheduleNotFound:
        raise DirectiveError(f"no schedule #{schedule_id}") from None
    except (service.ScheduleError, service.ScheduleConflict, service.ScheduleUnavailable) as exc:
        raise DirectiveError(str(exc)) from None
    return changed(before, after)


def delete_schedule(rt: Runtime, owner_id: int, run: dict[str, Any], schedule_id: int) -> str:
    """Ask the owner first (module rules): their yes deletes it."""
    from zerg.schedules import service

    try:
        schedule = service.get(rt, owner_id, schedule_id)
    except service.ScheduleNotFound:
        raise DirectiveError(f"no schedule #{schedule_id}") from None
    summary = f"delete schedule #{schedule_id} \"{schedule['name']}\" ({written(schedule)})"
    with rt.pool.connection() as conn:
        return _ask(conn, owner_id, run, "delete_schedule", {"schedule_id": schedule_id}, summary)


def create_schedule(rt: Runtime, owner_id: int, run: dict[str, Any], spec: Any) -> str:
    """Create a reminder or a digest; ask the owner first for a check, which runs commands on their
    servers unattended (module rules). ``spec`` is a :class:`~zerg.schedules.spec.ScheduleSpec`,
    validated (expression, zone, name, task) before anything is asked or written."""
    from zerg.schedules import service

    try:
        if spec.kind != "check":
            return created(service.create(rt, owner_id, spec))
        checked = service.validate(rt, owner_id, spec)
    except (service.ScheduleError, service.ScheduleConflict, service.ScheduleUnavailable) as exc:
        raise DirectiveError(str(exc)) from None
    args = spec.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    args.update(name=checked["name"], task=checked["task"], kind="check", timezone=checked["timezone"])
    # The task as JSON: every character of what will run, on one line (a newline in it can neither
    # hide a line of the script nor start a line that looks like Zerg's).
    task = json.dumps(checked["task"], ensure_ascii=False)
    summary = (f"create the check {json.dumps(checked['name'], ensure_ascii=False)} that runs {cadence(checked)} "
               f"({written(checked)}, {checked['timezone']}), unattended, with the worker tools (commands on your "
               f"servers), doing: {task}")
    with rt.pool.connection() as conn:
        return _ask(conn, owner_id, run, "create_schedule", args, summary)


def created(row: dict[str, Any]) -> str:
    """What creating the schedule ``row`` did, in words."""
    text = f"Schedule #{row['id']} {row['name']!r} created: a {row['kind']} that runs {timing(row)}."
    if row["kind"] == "check":
        text += " It runs unattended, with the worker tools (commands on the user's servers), doing its task as written."
    return text
