"""The directive tools: the supervisor lists, changes, creates and deletes the owner's schedules and
sets notification preferences when the owner asks ("make that check weekly", "pause the backup
check", "no SMS at night"). What they do is :mod:`zerg.inbound.directives`.

Invariants:
- Only in a run a person started (chat, API, CLI, a reply by email or SMS): a background run
  (trigger ``schedule``) never gets these tools (:func:`zerg.supervisor.turn.supervisor_tools`), and
  each tool refuses one anyway, so text a scheduled run reads cannot change its own alerts.
- Schedules are named by id (``list_schedules`` shows them); everything is scoped to the run's owner.
- What only the owner decides (a new check; ``delete_schedule``; a schedule's alert channels; the
  notification channels, quiet hours and spending cap) is only ever asked: the tool records the
  question, Zerg appends it word for word to the run's answer, and the owner's yes as their next
  message does it, in code, before any model reads anything (:mod:`zerg.inbound.directives`). No
  tool takes a ``confirm``: neither the model nor text it read can decide for the owner.
- Errors are text for the model, never exceptions.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from zerg.loop.tool import Tool, ToolContext, ToolOutcome, error
from zerg.notify.policy import Channel, Severity
from zerg.schedules.spec import NAME_MAX, TASK_MAX, ScheduleSpec
from zerg.tools.person import person_run

_CRON = "Unix cron in the time zone, e.g. '0 6 * * 1' (Mondays 06:00)"
_RATE = "e.g. '1 day', '2 hours', '15 minutes'"
_AT = "once, local time '2026-11-23T09:00'"
# Bounds on what the model writes, so a huge string is refused here and never echoed back in an error.
_EXPRESSION_MAX = 100  # the longest sensible cron, rate or at is far shorter
_ZONE_MAX = 64  # the longest IANA zone name is ~32 characters; the policy's bound


def _schedule_id() -> Any:
    return Field(ge=1, le=2**62, description="The schedule's id (list_schedules shows them)")


class ListSchedulesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UpdateScheduleArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schedule_id: int = _schedule_id()
    cron: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_CRON)
    rate: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_RATE)
    at: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_AT)
    timezone: str | None = Field(default=None, max_length=_ZONE_MAX, description="IANA zone")
    enabled: bool | None = Field(default=None, description="false pauses, true resumes")
    channels: dict[Severity, list[Channel]] | None = Field(
        default=None, description='Alert channels for this schedule, e.g. {"warning": ["email"]}; {}: the policy\'s')

    @model_validator(mode="after")
    def _something(self) -> "UpdateScheduleArgs":
        given = [f for f in ("cron", "rate", "at") if getattr(self, f) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of cron, rate or at (got {' and '.join(given)})")
        if not given and all(getattr(self, f) is None for f in ("timezone", "enabled", "channels")):
            raise ValueError("nothing to change: give cron, rate, at, timezone, enabled or channels")
        return self


class CreateScheduleArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=NAME_MAX, description="Short unique name, e.g. 'disk check'")
    task: str = Field(min_length=1, max_length=TASK_MAX, description="check: what the run does; reminder: the text sent")
    kind: Literal["check", "digest", "reminder"] = "check"
    cron: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_CRON)
    rate: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_RATE)
    at: str | None = Field(default=None, max_length=_EXPRESSION_MAX, description=_AT)
    timezone: str | None = Field(default=None, max_length=_ZONE_MAX, description="IANA zone; default: the user's")

    @model_validator(mode="after")
    def _one_time(self) -> "CreateScheduleArgs":
        given = [f for f in ("at", "cron", "rate") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of cron, rate or at (got {' and '.join(given) or 'none'})")
        return self


class DeleteScheduleArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schedule_id: int = _schedule_id()


class SetPreferenceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=40, description=(
        "channels.info|channels.warning|channels.critical (email, sms, email,sms, none); "
        "quiet_hours (HH:MM-HH:MM or off); timezone (IANA); daily_usd_cap (USD or off); "
        "approval.TOOL (allow, ask or deny; e.g. approval.send_email)"))
    value: str = Field(max_length=100)


def list_schedules(args: ListSchedulesArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.inbound.directives import listing
    from zerg.schedules import service

    run = person_run(ctx, "list_schedules")
    if isinstance(run, ToolOutcome):
        return run
    rows = service.list_schedules(ctx.runtime, ctx.owner_id)
    if not rows:
        return ToolOutcome(text="The user has no schedules.")
    return ToolOutcome(text=f"{len(rows)} schedule(s):\n" + "\n".join(listing(r) for r in rows))


def update_schedule(args: UpdateScheduleArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.inbound import directives

    run = person_run(ctx, "update_schedule")
    if isinstance(run, ToolOutcome):
        return run
    fields = {f: getattr(args, f) for f in ("cron", "rate", "at", "timezone", "enabled", "channels")
              if getattr(args, f) is not None}
    try:
        return ToolOutcome(text=directives.update_schedule(ctx.runtime, ctx.owner_id, run, args.schedule_id, fields))
    except directives.DirectiveError as exc:
        return error(str(exc))


def create_schedule(args: CreateScheduleArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.inbound import directives

    run = person_run(ctx, "create_schedule")
    if isinstance(run, ToolOutcome):
        return run
    spec = ScheduleSpec(name=args.name, task=args.task, kind=args.kind, cron=args.cron, rate=args.rate, at=args.at,
                        timezone=args.timezone)
    try:
        return ToolOutcome(text=directives.create_schedule(ctx.runtime, ctx.owner_id, run, spec))
    except directives.DirectiveError as exc:
        return error(str(exc))


def delete_schedule(args: DeleteScheduleArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.inbound import directives

    run = person_run(ctx, "delete_schedule")
    if isinstance(run, ToolOutcome):
        return run
    try:
        return ToolOutcome(text=directives.delete_schedule(ctx.runtime, ctx.owner_id, run, args.schedule_id))
    except directives.DirectiveError as exc:
        return error(str(exc))


def set_preference(args: SetPreferenceArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.inbound import directives

    run = person_run(ctx, "set_preference")
    if isinstance(run, ToolOutcome):
        return run
    try:
        return ToolOutcome(text=directives.set_preference(ctx.runtime, ctx.owner_id, run, args.key, args.value))
    except directives.DirectiveError as exc:
        return error(str(exc))


TOOLS = (
    Tool("list_schedules", "The user's schedules: id, name, kind, when (as written), zone, paused or not, next "
                           "run, alert channels.", ListSchedulesArgs, list_schedules),
    Tool("update_schedule", "Change a schedule by id: a new cron, rate or at; timezone; enabled (false pauses); "
                            "channels. A change of its channels only asks the user (Zerg shows them the question).",
         UpdateScheduleArgs, update_schedule),
    Tool("create_schedule", "Create a schedule: a check (a background run of task), a reminder or a digest; "
                            "exactly one of cron, rate, at. A check only asks the user (Zerg shows them the question).", CreateScheduleArgs, create_schedule),
    Tool("delete_schedule", "Delete a schedule by id. Only asks the user (Zerg shows them the question).",
         DeleteScheduleArgs, delete_schedule),
    Tool("set_preference", "Set a notification preference (documented keys only). Channels, quiet hours and the "
                           "spending cap only ask the user (Zerg shows them the question).", SetPreferenceArgs, set_preference),
)
