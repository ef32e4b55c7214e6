"""The owner's notification policy (``notification_policies``): channels per severity, quiet hours
in the owner's time zone, daily limits, the daily spending cap, escalation repeats. Every SQL
statement on the table lives here.

Invariants:
- One policy per owner; no row means :data:`DEFAULTS` (the schema's defaults, said once more here
  so a read needs no row).
- Every change goes through :func:`set_policy` with a :class:`PolicyChange` (the API's PATCH body,
  ``zerg policy set`` and the reply directives' ``set_preference`` alike): only the fields given
  change; ``channels`` replaces the severities it names and keeps the others; null clears
  ``daily_usd_cap`` and ``quiet_hours`` and is refused for the rest.
- Quiet hours are wall-clock times in the policy's time zone and may wrap midnight (22:00-07:00);
  start == end is refused (it would mean "never" or "always").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from psycopg import Connection
from psycopg.types.json import Jsonb
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from zerg import timezones
from zerg.validation import json_int, null_only_for

Severity = Literal["info", "warning", "critical"]
Channel = Literal["email", "sms"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "critical")
CHANNELS: tuple[Channel, ...] = ("email", "sms")


class PolicyError(ValueError):
    """A policy change that cannot be made; the message names the field and why."""


@dataclass(frozen=True)
class Policy:
    timezone: str = "UTC"
    channels: dict[str, list[str]] = field(default_factory=lambda: {"info": [], "warning": ["email", "sms"],
                                                                   "critical": ["email", "sms"]})
    quiet_start: time | None = None
    quiet_end: time | None = None
    daily_email_limit: int = 50
    daily_sms_limit: int = 10
    push: list[str] = field(default_factory=lambda: ["warning", "critical"])  # severities pushed (with a subscription)
    daily_push_limit: int = 50
    daily_usd_cap: Decimal | None = None
    escalation_repeats: int = 3
    escalation_every_s: int = 900
    run_usd_budget: Decimal | None = None  # a run's budget unless its request sets one (issue 27)
    run_token_budget: int | None = None
    model_prices: dict[str, list[float]] = field(default_factory=dict)  # USD per 1M tokens [in, out], by model id
    updated_at: datetime | None = None  # None: never changed (the defaults)

    def limit(self, channel: str) -> int:
        return {"email": self.daily_email_limit, "push": self.daily_push_limit}.get(channel, self.daily_sms_limit)

    @property
    def quiet_hours(self) -> str | None:
        """``"22:00-07:00"``, or None when there are none."""
        if self.quiet_start is None or self.quiet_end is None:
            return None
        return f"{self.quiet_start:%H:%M}-{self.quiet_end:%H:%M}"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["quiet_start"], out["quiet_end"]
        out["quiet_hours"] = self.quiet_hours
        out["daily_usd_cap"] = None if self.daily_usd_cap is None else float(self.daily_usd_cap)
        out["run_usd_budget"] = None if self.run_usd_budget is None else float(self.run_usd_budget)
        return out


DEFAULTS = Policy()
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def parse_quiet_hours(text: str | None) -> tuple[time, time] | None:
    """``"22:00-07:00"`` → (22:00, 07:00); ``None``, ``""`` or ``"off"`` → no quiet hours."""
    if text is None or text.strip().lower() in ("", "off", "none"):
        return None
    m = _HHMM.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not HH:MM-HH:MM (24-hour clock, e.g. 22:00-07:00), nor 'off'")
    start, end = time(int(m[1]), int(m[2])), time(int(m[3]), int(m[4]))
    if start == end:
        raise ValueError(f"{text!r} starts and ends at the same minute: give two different times, or 'off'")
    return start, end


def check_timezone(name: str) -> str:
    """``name`` if it is a time zone an owner may give (:mod:`zerg.timezones` decides); ValueError otherwise."""
    timezones.check_timezone(name)
    return name


NULLABLE = ("daily_usd_cap", "quiet_hours", "run_usd_budget", "run_token_budget")  # null clears them


def _number_not_text(value: Any) -> Any:
    """A JSON number, or the Decimal a directive or ``zerg policy set`` parsed: never text or a bool,
    so the body means what its document says (a number of dollars, whole cents to 1/100 cent)."""
    if isinstance(value, bool | str):
        raise PydanticCustomError("decimal_type", "Input should be a number")
    return value


UsdAmount = Annotated[Decimal, Field(ge=0, le=1_000_000, max_digits=12, decimal_places=4),
                      BeforeValidator(_number_not_text),
                      WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1_000_000, "multipleOf": 0.0001})]


class PolicyChange(BaseModel):
    """The fields to change (all optional; absent = unchanged). ``quiet_hours``: "HH:MM-HH:MM" in
    ``timezone`` (may wrap midnight) or "off"; ``channels``: per severity, a subset of email/sms."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=null_only_for(*NULLABLE))

    timezone: str | None = Field(default=None, max_length=64, json_schema_extra={"format": "iana-time-zone"},
                                 description="IANA time zone of the quiet hours, e.g. Europe/Berlin")
    channels: dict[Severity, list[Channel]] | None = Field(
        default=None, description='Channels per severity, e.g. {"warning": ["email"], "critical": ["email", "sms"]}; '
                                  "severities not named keep theirs")
    quiet_hours: str | None = Field(default=None, max_length=20, json_schema_extra={"format": "quiet-hours"},
                                    description='"22:00-07:00" (may wrap midnight) or "off"')
    daily_email_limit: json_int(ge=0, le=10_000) | None = Field(default=None,
                                                                description="Emails per UTC day, every purpose")
    daily_sms_limit: json_int(ge=0, le=10_000) | None = Field(default=None,
                                                              description="SMS per UTC day, every purpose")
    push: list[Severity] | None = Field(
        default=None, max_length=3, description='Severities pushed to the owner\'s browsers (Web Push) when they have a '
                                                 'subscription, e.g. ["critical"]; [] turns push off')
    daily_push_limit: json_int(ge=0, le=10_000) | None = Field(default=None,
                                                               description="Pushes per UTC day, every purpose")
    daily_usd_cap: UsdAmount | None = Field(default=None,
                                          description="Model spending per day in the policy's time zone, USD; null: no cap")
    escalation_repeats: json_int(ge=0, le=20) | None = Field(
        default=None, description="Repeats of a critical alert until acknowledged")
    run_usd_budget: UsdAmount | None = Field(default=None, description=(
        "A run's model spending limit, USD, unless its request sets preferences.budget_usd; null: none"))
    run_token_budget: json_int(ge=0, le=10**12) | None = Field(default=None, description=(
        "A run's model token limit (in + out), unless its request sets preferences.budget_tokens; null: none"))
    model_prices: dict[Annotated[str, Field(min_length=1, max_length=100)],
                       Annotated[list[Annotated[float, Field(ge=0, le=100_000)]], Field(min_length=2, max_length=2)]
                       ] | None = Field(default=None, max_length=50, description=(
        'USD per million tokens [input, output] of models Zerg has no price for, e.g. {"my-model": [0.5, 1.5]}: '
        "a budgeted run refuses a model without a price. Replaces the whole map; {} clears it"))
    escalation_every_s: json_int(ge=1, le=86_400) | None = Field(default=None, description="Seconds between repeats")

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else check_timezone(value)

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str | None) -> str | None:
        if value is not None:
            parse_quiet_hours(value)
        return value

    @field_validator("push")
    @classmethod
    def _push(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [s for s in SEVERITIES if s in value]  # ordered, no repeats

    @field_validator("channels")
    @classmethod
    def _channels(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if value is None:
            return None
        return {sev: [c for c in CHANNELS if c in chans] for sev, chans in value.items()}  # ordered, no repeats


def change_from(values: dict[str, Any]) -> PolicyChange:
    """A :class:`PolicyChange` from plain values (CLI, directives), or :class:`PolicyError` naming the field.
    An amount may be text here ("2.50"); the API's body takes a JSON number."""
    for name in ("daily_usd_cap", "run_usd_budget"):
        cap = values.get(name)
        if isinstance(cap, str):
            try:
                values = {**values, name: Decimal(cap.strip())}
            except InvalidOperation:
                raise PolicyError(f"{name}: {cap[:40]!r} is not an amount of US dollars (e.g. 5 or 2.50)") from None
    try:
        return PolicyChange.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "policy"
        raise PolicyError(f"{where}: {err['msg'].removeprefix('Value error, ')}") from None


# --- reads and writes ---------------------------------------------------------------------------

_COLUMNS = ("timezone, channels, quiet_start, quiet_end, daily_email_limit, daily_sms_limit, push, daily_push_limit, "
            "daily_usd_cap, escalation_repeats, escalation_every_s, run_usd_budget, run_token_budget, model_prices, updated_at")


def _policy(row: dict[str, Any] | None) -> Policy:
    if row is None:
        return DEFAULTS
    channels = {**DEFAULTS.channels, **(row["channels"] or {})}
    return Policy(**{**row, "channels": channels})


def get_policy(conn: Connection, owner_id: int) -> Policy:
    """The owner's policy, or the defaults when they never changed it."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM notification_policies WHERE owner_id = %s", (owner_id,)).fetchone()
    return _policy(row)


def set_policy(conn: Connection, owner_id: int, change: PolicyChange) -> Policy:
    """Apply ``change`` (only its given fields) and return the whole policy. One statement: the row
    is created with the defaults plus the change, or updated, atomically."""
    given = change.model_dump(exclude_unset=True)
    for name, value in given.items():
        if value is None and name not in NULLABLE:
            raise PolicyError(f"{name}: may not be null (leave it out to keep it)")
    values: dict[str, Any] = {k: v for k, v in given.items() if k not in ("quiet_hours", "channels")}
    if "quiet_hours" in given:
        quiet = parse_quiet_hours(change.quiet_hours)
        values["quiet_start"], values["quiet_end"] = quiet if quiet else (None, None)
    with conn.transaction():
        current = conn.execute("SELECT channels FROM notification_policies WHERE owner_id = %s FOR UPDATE",
                               (owner_id,)).fetchone()
        if "model_prices" in values:
            values["model_prices"] = Jsonb(values["model_prices"])
        if change.channels:
            base = current["channels"] if current else DEFAULTS.channels
            values["channels"] = Jsonb({**DEFAULTS.channels, **base, **change.channels})
        if not values:
            return get_policy(conn, owner_id)
        names = list(values)
        row = conn.execute(
            f"""INSERT INTO notification_policies (owner_id, {", ".join(names)}) VALUES (%s, {", ".join(["%s"] * len(names))})
                ON CONFLICT (owner_id) DO UPDATE SET {", ".join(f"{n} = EXCLUDED.{n}" for n in names)}, updated_at = now()
                RETURNING {_COLUMNS}""",
            (owner_id, *values.values())).fetchone()
    return _policy(row)


def in_quiet_hours(policy: Policy, now: datetime) -> datetime | None:
    """When the quiet hours that ``now`` (aware) falls in end, as an aware UTC time; None when
    ``now`` is outside them or there are none. A wall-clock end that does not exist that day (a
    DST gap) is taken as the first instant after it."""
    from datetime import timezone
    from zoneinfo import ZoneInfo

    if policy.quiet_start is None or policy.quiet_end is None:
        return None
    zone = ZoneInfo(policy.timezone)
    local = now.astimezone(zone)
    start, end, clock = policy.quiet_start, policy.quiet_end, local.time().replace(tzinfo=None)
    if start < end:
        inside, end_day = start <= clock < end, local.date()
    else:  # wraps midnight: 22:00-07:00
        inside = clock >= start or clock < end
        end_day = local.date() + timedelta(days=1) if clock >= start else local.date()
    if not inside:
        return None
    ends = datetime.combine(end_day, end, tzinfo=zone)
    # A wall time in a DST gap: round-trip through UTC lands after the gap.
    ends = ends.astimezone(timezone.utc)
    return ends if ends > now else now


def export_notification_policies(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's policy row (none until changed), for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM notification_policies WHERE owner_id = %s ORDER BY id", (owner_id,))


def timezone_of(conn: Connection, owner_id: int) -> str | None:
    """The owner's policy time zone, or None when the owner has no policy row (new schedules then use UTC)."""
    row = conn.execute("SELECT timezone FROM notification_policies WHERE owner_id = %s", (owner_id,)).fetchone()
    return row["timezone"] if row else None
