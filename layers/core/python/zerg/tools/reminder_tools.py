"""``create_reminder``: the supervisor turns "remind me tomorrow at 9 to renew the cert" into a
``reminder`` schedule, whose fire sends the text to the owner (:mod:`zerg.alerts.reminders`).

Invariants:
- Created through :func:`zerg.schedules.service.create`, the one path every caller uses, so the
  row and what fires it (EventBridge Scheduler on AWS) change together and the same checks apply.
- Only in a run a person started: a background run (trigger ``schedule``) never gets the tool, and
  the tool refuses one anyway, so text a scheduled run reads cannot plant alerts.
- The answer names the reminder's next fire in its time zone (the owner's policy zone unless the
  model names one), so the model can confirm "I'll remind you tomorrow at 09:00".
- Errors (a bad expression, a past time, a full schedule list) are text for the model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from zerg.loop.tool import Tool, ToolContext, ToolOutcome, error
from zerg.tools.person import person_run

NAME_CHARS = 70
NAME_TRIES = 5


class ReminderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=2_000, description="The reminder, as the user reads it")
    at: str | None = Field(default=None, description="Once: local time '2026-11-23T09:00'")
    cron: str | None = Field(default=None, description="Recurring: Unix cron '0 9 * * 1'")
    rate: str | None = Field(default=None, description="Recurring: '1 day', '2 hours'")
    timezone: str | None = Field(default=None, description="IANA zone; default: the user's")

    @model_validator(mode="after")
    def _one_time(self) -> "ReminderArgs":
        given = [f for f in ("at", "cron", "rate") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of at, cron or rate (got {' and '.join(given) or 'none'})")
        return self


def _name(text: str, attempt: int) -> str:
    line = " ".join(text.split())
    base = "reminder: " + (line if len(line) <= NAME_CHARS else line[: NAME_CHARS - 1].rstrip() + "…")
    return base if attempt == 0 else f"{base} ({attempt + 1})"


def create_reminder(args: ReminderArgs, ctx: ToolContext) -> ToolOutcome:
    from zoneinfo import ZoneInfo

    from zerg.schedules import service
    from zerg.schedules.spec import ScheduleSpec

    run = person_run(ctx, "create_reminder", "reminders can only be created in a run the user started, not in a scheduled run")
    if isinstance(run, ToolOutcome):
        return run
    rt = ctx.runtime
    for attempt in range(NAME_TRIES):
        spec = ScheduleSpec(name=_name(args.text, attempt), kind="reminder", task=args.text, at=args.at,
                            cron=args.cron, rate=args.rate, timezone=args.timezone)
        try:
            row = service.create(rt, ctx.owner_id, spec)
            break
        except service.ScheduleConflict as exc:
            if not str(exc).startswith("name:"):
                return error(str(exc))
        except (service.ScheduleError, service.ScheduleUnavailable) as exc:
            return error(str(exc))
    else:
        return error("a reminder with this text exists several times already; reword it")
    nxt = row["next_fire_at"]
    when = (f"{nxt.astimezone(ZoneInfo(row['timezone'])):%A %Y-%m-%d %H:%M} ({row['timezone']})" if nxt
            else "never (it has no future time)")
    repeat = "" if args.at is not None else f", then {args.cron and 'per cron ' + repr(args.cron) or 'every ' + args.rate}"
    return ToolOutcome(text=f"Reminder #{row['id']} {row['name']!r} created: it will be sent to the user's "
                            f"email/SMS on {when}{repeat}.")


TOOL = Tool(
    name="create_reminder",
    description="Remind the user later by email/SMS (the text as is). Exactly one of at, cron, rate; "
                "for 'tomorrow' call get_current_time first.",
    args=ReminderArgs,
    run=create_reminder,
)
