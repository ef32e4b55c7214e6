"""What an owner may ask for as a schedule: the body of POST (``ScheduleSpec``) and PATCH
(``SchedulePatch``) /api/jarvis/schedules, which ``zerg schedules add`` and the supervisor's
directives build too. Shapes and bounds here; the expression, the time zone and the rules between
fields are checked by :mod:`zerg.schedules.service` (one place for every caller)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.notify.policy import Channel, Severity
from zerg.validation import JsonBool, json_int, null_only_for

# Issue 27: a check's budgets (null: none) and its idle pause (null: never). Same in POST and PATCH.
BUDGET_FIELDS = ("fire_usd_budget", "fire_token_budget", "day_usd_budget", "day_token_budget", "idle_pause_days")
IDLE_PAUSE_DAYS_DEFAULT = 14

# A check's budgets and idle pause, alike in the schedule as created and in a patch (defaults apart).
FireUsdBudget = Annotated[float | None, Field(ge=0, le=1_000_000, description=(
    "check: the USD budget of each fire's run (checked before every model call; past it the run stops with a "
    "partial answer); null: none"))]
FireTokenBudget = Annotated[json_int(ge=0, le=10**12) | None, Field(description=(
    "check: the token budget (in + out) of each fire's run; null: none"))]
DayUsdBudget = Annotated[float | None, Field(ge=0, le=1_000_000, description=(
    "check: USD its runs may spend per day (its time zone); once spent, later fires that day are skipped"))]
DayTokenBudget = Annotated[json_int(ge=0, le=10**12) | None, Field(description=(
    "check: tokens its runs may spend per day; once spent, later fires that day are skipped"))]
IdlePauseDays = Annotated[json_int(ge=1, le=365) | None, Field(description=(
    "Pause the schedule when nobody opened or acknowledged its results for this many days (default 14); "
    "null: never"))]

KINDS = ("check", "digest", "reminder")
Kind = Literal["check", "digest", "reminder"]
Channels = dict[Severity, list[Channel]]

NAME_MAX = 100
TASK_MAX = 8192  # the table's bound; a check's task is also bounded by ZERG_TASK_MAX_BYTES
DIGEST_TASK = "Morning digest"

_EXPRESSIONS = {
    "cron": "Standard 5-field Unix cron in the time zone: '0 6 * * 1' (minute hour day-of-month month "
            "day-of-week; restrict day-of-month or day-of-week, not both)",
    "rate": "Every n minutes, hours or days: '15 minutes', '1 hour', '1 day' (at multiples of the period "
            "since 1970-01-01T00:00Z)",
    "at": "Once, at this local time in the time zone: '2026-11-23T09:00' (not in the past)",
}


# The document's names for the rules zerg.schedules.expressions and zerg.timezones apply (zerg.api.docs.FORMATS).
_FORMATS = {"cron": {"format": "cron-expression"}, "rate": {"format": "rate-expression"},
            "at": {"format": "schedule-time"}, "timezone": {"format": "iana-time-zone"}}


def _dedupe(channels: Channels | None) -> Channels | None:
    if channels is None:
        return None
    return {severity: list(dict.fromkeys(values)) for severity, values in channels.items()}


class ScheduleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_MAX, json_schema_extra={"format": "schedule-name"},
                      description="Unique among the owner's schedules; not all digits")
    task: str | None = Field(default=None, max_length=TASK_MAX, description=(
        "check: what the background run does; reminder: the text sent; digest: optional (default 'Morning digest')"))
    kind: Kind = Field(default="check", description="check: a background run; digest: the morning digest email; "
                                                    "reminder: sends task to the owner's channels, no run")
    cron: str | None = Field(default=None, description=_EXPRESSIONS["cron"], json_schema_extra=_FORMATS["cron"])
    rate: str | None = Field(default=None, description=_EXPRESSIONS["rate"], json_schema_extra=_FORMATS["rate"])
    at: str | None = Field(default=None, description=_EXPRESSIONS["at"], json_schema_extra=_FORMATS["at"])
    timezone: str | None = Field(default=None, json_schema_extra=_FORMATS["timezone"],
                                 description="IANA time zone; default: the owner's notification policy's, else UTC")
    enabled: JsonBool = True
    channels: Channels | None = Field(default=None, description=(
        "Per-severity channel overrides for this schedule's alerts, e.g. {\"warning\": [\"email\"]}; "
        "absent or null: the notification policy's"))
    fire_usd_budget: FireUsdBudget = None
    fire_token_budget: FireTokenBudget = None
    day_usd_budget: DayUsdBudget = None
    day_token_budget: DayTokenBudget = None
    idle_pause_days: IdlePauseDays = IDLE_PAUSE_DAYS_DEFAULT

    @field_validator("channels")
    @classmethod
    def _channels(cls, value: Channels | None) -> Channels | None:
        return _dedupe(value)


class SchedulePatch(BaseModel):
    """Any subset of the fields; giving cron, rate or at replaces the expression."""

    # Null is refused for every field but channels (the service says "must not be null").
    model_config = ConfigDict(extra="forbid", json_schema_extra=null_only_for("channels", *BUDGET_FIELDS))

    name: str | None = Field(default=None, min_length=1, max_length=NAME_MAX,
                             json_schema_extra={"format": "schedule-name"})
    task: str | None = Field(default=None, max_length=TASK_MAX)
    kind: Kind | None = None
    cron: str | None = Field(default=None, description=_EXPRESSIONS["cron"], json_schema_extra=_FORMATS["cron"])
    rate: str | None = Field(default=None, description=_EXPRESSIONS["rate"], json_schema_extra=_FORMATS["rate"])
    at: str | None = Field(default=None, description=_EXPRESSIONS["at"], json_schema_extra=_FORMATS["at"])
    timezone: str | None = Field(default=None, json_schema_extra=_FORMATS["timezone"])
    enabled: JsonBool | None = None
    channels: Channels | None = Field(default=None, description="null: back to the notification policy's")
    fire_usd_budget: FireUsdBudget = None
    fire_token_budget: FireTokenBudget = None
    day_usd_budget: DayUsdBudget = None
    day_token_budget: DayTokenBudget = None
    idle_pause_days: IdlePauseDays = None

    @field_validator("channels")
    @classmethod
    def _channels(cls, value: Channels | None) -> Channels | None:
        return _dedupe(value)


PREVIEW_MAX = 10


class SchedulePreviewSpec(BaseModel):
    """An expression as the schedule form has it so far: the fires it would make (nothing is written)."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(default=None, description=_EXPRESSIONS["cron"], json_schema_extra=_FORMATS["cron"])
    rate: str | None = Field(default=None, description=_EXPRESSIONS["rate"], json_schema_extra=_FORMATS["rate"])
    at: str | None = Field(default=None, description=_EXPRESSIONS["at"], json_schema_extra=_FORMATS["at"])
    timezone: str | None = Field(default=None, json_schema_extra=_FORMATS["timezone"],
                                 description="IANA time zone; default: the owner's notification policy's, else UTC")
    count: json_int(ge=1, le=PREVIEW_MAX) = Field(default=5, description=f"How many fires, 1 to {PREVIEW_MAX}")
