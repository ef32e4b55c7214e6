"""Usage analytics: the owner's model calls (the usage ledger) per UTC day, model, component or
worker job (``job``: each worker's own and its summary's calls; calls of no job are left out), with
the period's totals and those of the period of equal length just before it (the page's "change")."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from zerg.api.deps import Owner, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import UsageReport, responses

router = Router()

DEFAULT_DAYS = 30  # without from/to: the last 30 UTC days, today included
MAX_SPAN_DAYS = 366
EARLIEST, LATEST = date(1970, 1, 1), date(9998, 12, 31)  # any real ledger day; no date arithmetic overflows
_DAY = r"^\d{4}-\d{2}-\d{2}$"


def _day(name: str, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ApiError(422, "validation_error", f"{name}: {value!r} is not a calendar date (YYYY-MM-DD)") from None
    if not EARLIEST <= day <= LATEST:
        raise ApiError(422, "validation_error", f"{name}: {value!r} is outside {EARLIEST} to {LATEST}")
    return day


def report_range(from_text: str | None, to_text: str | None) -> tuple[date, date]:
    """The inclusive UTC day range a report covers: ``to`` defaults to today, ``from`` to the
    30 days ending at ``to``. 422 when ``from`` is after ``to`` or the span is over 366 days."""
    first, last = _day("from", from_text), _day("to", to_text)
    if last is None:
        last = max(datetime.now(timezone.utc).date(), first or date.min)
    if first is None:
        first = max(last - timedelta(days=DEFAULT_DAYS - 1), EARLIEST)
    if first > last:
        raise ApiError(422, "validation_error", f"from ({first}) is after to ({last})")
    span = (last - first).days + 1
    if span > MAX_SPAN_DAYS:
        raise ApiError(422, "validation_error",
                       f"from ({first}) to ({last}) spans {span} days; the limit is {MAX_SPAN_DAYS}")
    return first, last


@router.get("/api/jarvis/usage", summary="The owner's model usage and cost per UTC day, model, component or job",
            description=f"from must not be after to, and from-to spans at most {MAX_SPAN_DAYS} days (422 otherwise).",
            responses=responses(200, "One row per key, sorted by key", UsageReport, 401))
def usage(
    owner_id: Owner,
    rt: Rt,
    from_day: Annotated[str | None, Query(alias="from", pattern=_DAY, json_schema_extra={"format": "ledger-day"},
                                          description=(
        "The first UTC day, YYYY-MM-DD (inclusive); default: 29 days before to"))] = None,
    to_day: Annotated[str | None, Query(alias="to", pattern=_DAY, json_schema_extra={"format": "ledger-day"},
                                        description=(
        "The last UTC day, YYYY-MM-DD (inclusive); default: today (UTC)"))] = None,
    group_by: Annotated[Literal["day", "model", "component", "job"], Query(description=(
        "What each row is; job: one row per worker job (tokens and USD per job)"))] = "day",
):
    from zerg.llm import ledger

    first, last = report_range(from_day, to_day)
    before_last = first - timedelta(days=1)  # the period of equal length just before (the page's "change")
    before_first = before_last - (last - first)
    with rt.pool.connection() as conn:
        rows = ledger.usage_report(conn, owner_id, first, last, group_by)
        totals = ledger.usage_totals(conn, owner_id, first, last)
        previous = (ledger.usage_totals(conn, owner_id, before_first, before_last) if before_first >= EARLIEST
                    else None)
    return json_response({"from": first.isoformat(), "to": last.isoformat(), "group_by": group_by, "rows": rows,
                          "totals": totals, "previous": previous and {
                              "from": before_first.isoformat(), "to": before_last.isoformat(), **previous}})
