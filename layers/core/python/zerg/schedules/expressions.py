"""Schedule expressions: what an owner writes (standard 5-field Unix cron, a rate, a one-off local
time) and what EventBridge Scheduler runs (``cron(m h dom mon dow y)``, ``rate(n unit)``, ``at(...)``).

Invariants:
- :func:`parse_when` accepts only what Scheduler can run with the same meaning and refuses the
  rest with a :class:`ScheduleError` whose message starts with the field it is about
  (``cron: day-of-week: ...``, ``rate: ...``, ``at: ...``, ``timezone: ...``).
- The ticker (:meth:`When.next_fire`, :meth:`When.latest_fire`) and Scheduler fire at the same
  instants, all returned as UTC-aware datetimes:
  * cron: wall-clock times in the schedule's time zone. A time that does not exist that day
    (clocks spring forward) is skipped; one that happens twice (clocks fall back) fires once, at
    its first occurrence: Scheduler's documented daylight-saving behaviour.
  * rate: every whole multiple of the period since the Unix epoch in UTC ("15 minutes" at :00,
    :15, :30 and :45, "1 hour" on the hour, "1 day" at 00:00 UTC). The anchor is stateless, so a
    change or a resume needs no stored anchor; Scheduler is given ``StartDate`` = the next such
    instant and then counts the period in elapsed time, as this module does.
  * at: the local time in the time zone, once.
- The day-of-month / day-of-week rule: Unix cron fires when EITHER matches if both are
  restricted; Scheduler needs one of them to be ``?``, so that combination is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from zerg import timezones

Kind = Literal["cron", "rate", "at"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_RATE = timedelta(days=365)
MAX_TEXT = 200
# More than any offset change (the largest in the tz database is 2 hours).
_DST_MARGIN = timedelta(hours=3)
_SECOND = timedelta(seconds=1)
_SCAN_LIMIT = 20_000  # candidate times looked at before giving up (a cron firing every minute needs ~200)

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() also takes '²', which int() refuses
_RATE = re.compile(r"^\s*([0-9]{1,7})\s*(minute|minutes|hour|hours|day|days)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_AT = re.compile(r"^\s*([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?\s*$")
AT_YEARS = (1970, 2199)  # Scheduler's years; far from datetime's limits in any zone


class ScheduleError(ValueError):
    """The schedule's expression, time zone or body is not acceptable; the message says exactly why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the number of the first name (JAN = 1, SUN = 0)

    @property
    def all(self) -> frozenset[int]:
        return frozenset(range(self.low, 7 if self.name == "day-of-week" else self.high + 1))


_FIELDS = (_Field("minute", 0, 59), _Field("hour", 0, 23), _Field("day-of-month", 1, 31),
           _Field("month", 1, 12, MONTHS, 1), _Field("day-of-week", 0, 7, DAYS, 0))


def _value(field: _Field, token: str) -> int:
    upper = token.upper()
    if upper in field.names:
        return field.names.index(upper) + field.name_base
    if _DIGITS.fullmatch(token):
        number = int(token)
        if not field.low <= number <= field.high:
            raise ScheduleError(f"cron: {field.name}: {number} is out of range {field.low}-{field.high}")
        return number
    if field.name in ("day-of-month", "day-of-week") and re.fullmatch(r"\d*[LW]|LW|L-\d+", upper):
        raise ScheduleError(f"cron: {field.name}: {token!r}: L and W (last day, nearest weekday) are not "
                            "standard Unix cron and are not accepted")
    named = f" or a name ({field.names[0]}-{field.names[-1]})" if field.names else ""
    raise ScheduleError(f"cron: {field.name}: {token!r} is not a number {field.low}-{field.high}{named}")


def _parse_field(field: _Field, text: str) -> frozenset[int]:
    """The set of values ``text`` selects (day-of-week 7 is Sunday, 0)."""
    if text == "?" and field.name in ("day-of-month", "day-of-week"):
        return field.all  # Scheduler's "no value" written by habit: the same as *
    if "#" in text:
        raise ScheduleError(f"cron: {field.name}: '#' (nth weekday of the month) is not standard Unix cron "
                            "and is not accepted")
    values: set[int] = set()
    for term in text.split(","):
        if not term:
            raise ScheduleError(f"cron: {field.name}: empty item in {text!r}")
        base, slash, step_text = term.partition("/")
        step = 1
        if slash:
            if not _DIGITS.fullmatch(step_text) or int(step_text) == 0:
                raise ScheduleError(f"cron: {field.name}: the step in {term!r} must be a whole number of at least 1")
            step = int(step_text)
        if base == "*":
            start, end = field.low, field.high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _value(field, first), _value(field, last)
            if field.name == "day-of-week" and end == 0 and start > 0:
                end = 7  # MON-SUN: Sunday as the week's end
            if end < start:
                raise ScheduleError(f"cron: {field.name}: the range {base!r} runs backwards")
        else:
            start = _value(field, base)
            end = field.high if slash else start  # "5/15": from 5 to the end, every 15
        values.update(range(start, end + 1, step))
    if field.name == "day-of-week" and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _render(values: frozenset[int], low: int, high: int, *, steps: bool = True) -> str:
    """Scheduler's text for a set of values: ``*``, ``start/step`` (not in day-of-week: Scheduler
    has no step there) or a list of ranges."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if steps and len(ordered) > 2:
        step = ordered[1] - ordered[0]
        if step > 1 and ordered == list(range(ordered[0], high + 1, step)):
            return f"{ordered[0]}/{step}"
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(ordered))


@dataclass(frozen=True)
class _Cron:
    unix: str  # the canonical 5-field form cronsim runs (full fields as *, so the day rule is AND)
    scheduler: str  # cron(m h dom mon dow *)


def _parse_cron(text: str) -> _Cron:
    stripped = " ".join(text.split())
    if stripped.lower().startswith("cron("):
        raise ScheduleError("cron: write the 5-field Unix form ('0 6 * * 1'), not Scheduler's cron(...); "
                            "Zerg converts it")
    if stripped.startswith("@"):
        if stripped.lower() == "@reboot":
            raise ScheduleError("cron: @reboot names no time; a schedule needs one (e.g. '0 6 * * *')")
        if stripped.lower() not in MACROS:
            raise ScheduleError(f"cron: unknown macro {stripped!r}; known: {', '.join(MACROS)}")
        stripped = MACROS[stripped.lower()]
    parts = stripped.split(" ") if stripped else []
    if len(parts) != 5:
        raise ScheduleError(f"cron: {len(parts)} field{'s' if len(parts) != 1 else ''} given; write standard "
                            "5-field Unix cron 'minute hour day-of-month month day-of-week' (no seconds or "
                            "year field), e.g. '0 6 * * 1'")
    sets = [_parse_field(field, part) for field, part in zip(_FIELDS, parts, strict=True)]
    minute, hour, dom, month, dow = sets
    dom_field, dow_field = _FIELDS[2], _FIELDS[4]
    dom_restricted, dow_restricted = dom != dom_field.all, dow != dow_field.all
    if dom_restricted and dow_restricted:
        raise ScheduleError(
            f"cron: both day-of-month ({parts[2]}) and day-of-week ({parts[4]}) are restricted: Unix cron then "
            "runs on days matching EITHER, and EventBridge Scheduler cannot express that 'or' (one of the two "
            "must be '?'); set one of them to '*' (or make two schedules)")
    if dom_restricted and min(dom) > max(_DAYS_IN_MONTH[m - 1] for m in month):
        raise ScheduleError(f"cron: day-of-month {min(dom)} never occurs in the month(s) given ({parts[3]})")
    unix = " ".join("*" if values == field.all else ",".join(map(str, sorted(values)))
                    for field, values in zip(_FIELDS, sets, strict=True))
    if dow_restricted:
        day_fields = f"? {_render(month, 1, 12)} {_render(frozenset(d + 1 for d in dow), 1, 7, steps=False)}"
    else:
        day_fields = f"{_render(dom, 1, 31)} {_render(month, 1, 12)} ?"
    scheduler = f"cron({_render(minute, 0, 59)} {_render(hour, 0, 23)} {day_fields} *)"
    return _Cron(unix, scheduler)


def _parse_rate(text: str) -> tuple[str, timedelta]:
    match = _RATE.match(text)
    if not match:
        raise ScheduleError(f"rate: {text.strip()[:MAX_TEXT]!r} is not a rate; write a number and minutes, hours "
                            "or days, e.g. '15 minutes', '1 hour', '1 day'")
    number, unit = int(match[1]), match[2].lower().rstrip("s")
    if number == 0:
        raise ScheduleError("rate: must be at least 1 minute (got 0)")
    period = timedelta(seconds=number * _UNIT_SECONDS[unit])
    if period > MAX_RATE:
        raise ScheduleError(f"rate: at most {MAX_RATE.days} days (got {number} {unit}s)")
    return f"{number} {unit}{'' if number == 1 else 's'}", period


def check_timezone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (ScheduleError naming it otherwise; :mod:`zerg.timezones` decides)."""
    try:
        return timezones.check_timezone(name)
    except ValueError:
        shown = name[:MAX_TEXT] if isinstance(name, str) else name
        raise ScheduleError(f"timezone: unknown time zone {shown!r}; give an IANA name such as Europe/Berlin, "
                            "America/New_York or UTC") from None


def _exists(naive: datetime, zone: ZoneInfo) -> bool:
    """False for a wall time the clocks skip in ``zone`` (spring forward)."""
    local = naive.replace(tzinfo=zone)
    return local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive


def _parse_at(value: str | datetime, zone: ZoneInfo, timezone: str) -> datetime:
    """The local wall time (naive) ``value`` names."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ScheduleError("at: a local time without an offset; the time zone goes in timezone")
        naive = value.replace(microsecond=0)
    else:
        match = _AT.match(value)
        if not match:
            if re.search(r"(Z|[+-]\d{2}:?\d{2})\s*$", value.strip()):
                raise ScheduleError(f"at: {value.strip()[:MAX_TEXT]!r} carries an offset; give the local time "
                                    "(2026-11-23T09:00) and its zone in timezone")
            raise ScheduleError(f"at: {value.strip()[:MAX_TEXT]!r} is not a local date and time; write "
                                "YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS, e.g. 2026-11-23T09:00")
        try:
            naive = datetime(*(int(g) for g in match.groups(default="0")))
        except ValueError as exc:
            raise ScheduleError(f"at: {value.strip()!r} is not a valid date and time ({exc})") from None
    if not AT_YEARS[0] <= naive.year <= AT_YEARS[1]:
        raise ScheduleError(f"at: the year must be {AT_YEARS[0]}-{AT_YEARS[1]} (got {naive.year})")
    if not _exists(naive, zone):
        raise ScheduleError(f"at: {naive:%Y-%m-%dT%H:%M} does not exist in {timezone} (the clocks skip it that day)")
    return naive


@dataclass(frozen=True)
class When:
    """A parsed schedule expression in its time zone."""

    kind: Kind
    text: str  # what the owner wrote, tidied: '0 6 * * 1', '15 minutes', '2026-11-23T09:00:00'
    expression: str  # Scheduler's form: cron(...), rate(...), at(...)
    timezone: str
    cron_unix: str | None = None
    period: timedelta | None = None
    at_local: datetime | None = None  # naive wall time in timezone

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware), or None when there is none (a past at)."""
        after = _aware(after)
        if self.kind == "rate":
            assert self.period is not None
            return EPOCH + ((after - EPOCH) // self.period + 1) * self.period
        if self.kind == "at":
            instant = self.at_instant
            return instant if instant > after else None
        return self._scan(after, forward=True)

    def latest_fire(self, now: datetime, since: datetime | None = None) -> datetime | None:
        """The latest fire in ``(since, now]`` (after downtime only that one runs), or None."""
        now = _aware(now)
        since = _aware(since) if since is not None else None
        if self.kind == "rate":
            assert self.period is not None
            latest = EPOCH + ((now - EPOCH) // self.period) * self.period
        elif self.kind == "at":
            latest = self.at_instant if self.at_instant <= now else None
        else:
            latest = self._scan(now, forward=False)
        if latest is None or (since is not None and latest <= since):
            return None
        return latest

    @property
    def at_instant(self) -> datetime:
        assert self.at_local is not None
        return self.at_local.replace(tzinfo=self.zone).astimezone(UTC)

    def _scan(self, instant: datetime, *, forward: bool) -> datetime | None:
        """Walk the cron's wall-clock times in the zone from a margin before (after) ``instant``;
        skipped times are not fires, a repeated time is its first occurrence (fold 0)."""
        from cronsim import CronSim, CronSimError

        zone = self.zone
        local = instant.astimezone(zone)
        # Wall times map to instants in order (fold 0), so forward no time before the instant's own
        # wall time can follow it; backward, only a second occurrence (fold 1) has earlier-instant
        # wall times after its own, within one offset change.
        start = local.replace(tzinfo=None) + (-_SECOND if forward else _SECOND)
        if not forward and local.fold:
            start += _DST_MARGIN
        try:
            times = CronSim(self.cron_unix, start, reverse=not forward)
            for _ in range(_SCAN_LIMIT):
                naive = next(times)
                if not _exists(naive, zone):
                    continue
                fire = naive.replace(tzinfo=zone).astimezone(UTC)
                if (fire > instant) if forward else (fire <= instant):
                    return fire
        except (StopIteration, CronSimError):
            return None
        return None


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("a schedule instant must be timezone-aware")
    return moment.astimezone(UTC)


def parse_when(*, cron: str | None = None, rate: str | None = None, at: str | datetime | None = None,
               timezone: str = "UTC", allow_past: bool = False, now: datetime | None = None) -> When:
    """The one expression among ``cron``, ``rate`` and ``at``, checked and converted.

    ``at`` is refused when it is not after ``now`` (default: the current time) unless
    ``allow_past`` (a stored row: :func:`when_of`)."""
    given = [name for name, value in (("cron", cron), ("rate", rate), ("at", at)) if value is not None]
    if len(given) != 1:
        raise ScheduleError("give exactly one of cron, rate or at" +
                            (f" (got {' and '.join(given)})" if given else ": none was given"))
    zone = check_timezone(timezone)
    if isinstance(cron, str) or isinstance(rate, str) or isinstance(at, str):
        text = next(v for v in (cron, rate, at) if isinstance(v, str))
        if len(text) > MAX_TEXT:
            raise ScheduleError(f"{given[0]}: at most {MAX_TEXT} characters")
        if "\x00" in text:
            raise ScheduleError(f"{given[0]}: must not contain NUL characters")
    if cron is not None:
        if not isinstance(cron, str):
            raise ScheduleError("cron: must be text such as '0 6 * * 1'")
        parsed = _parse_cron(cron)
        when = When("cron", " ".join(cron.split()), parsed.scheduler, timezone, cron_unix=parsed.unix)
        if when.next_fire(now or datetime.now(UTC)) is None:
            raise ScheduleError(f"cron: {when.text!r} never fires")
        return when
    if rate is not None:
        if not isinstance(rate, str):
            raise ScheduleError("rate: must be text such as '15 minutes'")
        text, period = _parse_rate(rate)
        return When("rate", text, f"rate({text})", timezone, period=period)
    local = _parse_at(at, zone, timezone)  # type: ignore[arg-type]
    when = When("at", local.isoformat(), f"at({local:%Y-%m-%dT%H:%M:%S})", timezone, at_local=local)
    current = now or datetime.now(UTC)
    if not allow_past and when.at_instant <= current:
        raise ScheduleError(f"at: {local:%Y-%m-%dT%H:%M} in {timezone} is in the past (it is now "
                            f"{current.astimezone(zone):%Y-%m-%dT%H:%M} there)")
    return when


def when_of(row: dict) -> When:
    """The expression of a stored ``schedules`` row (an at already past is fine here)."""
    return parse_when(cron=row.get("cron"), rate=row.get("rate"), at=row.get("at"),
                      timezone=row.get("timezone") or "UTC", allow_past=True)
