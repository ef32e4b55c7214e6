"""Schedule expressions: Unix cron, rates and one-off times converted to EventBridge Scheduler's
forms, the refusals (each naming its field and why), and the fire times the ticker computes,
which follow Scheduler's daylight-saving rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from zerg.schedules.expressions import ScheduleError, parse_when, when_of

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("cron", "expression"), [
    ("0 6 * * 1", "cron(0 6 ? * 2 *)"),  # Monday: Unix 1, Scheduler 2 (SUN=1)
    ("0 6 * * *", "cron(0 6 * * ? *)"),  # neither day field restricted: day-of-week is the ?
    ("*/15 * * * *", "cron(0/15 * * * ? *)"),
    ("0 9-17 * * MON-FRI", "cron(0 9-17 ? * 2-6 *)"),
    ("0 9-17/2 * * *", "cron(0 9,11,13,15,17 * * ? *)"),
    ("5 4 * * SUN", "cron(5 4 ? * 1 *)"),
    ("5 4 * * 7", "cron(5 4 ? * 1 *)"),  # 7 is Sunday too
    ("0 0 * * 5-7", "cron(0 0 ? * 1,6-7 *)"),  # Fri-Sun wraps to Sunday = 1
    ("0 0 * * 0,6", "cron(0 0 ? * 1,7 *)"),
    ("0 0 * * */2", "cron(0 0 ? * 1,3,5,7 *)"),  # Scheduler has no step in day-of-week: listed
    ("0 0 * * MON-SUN", "cron(0 0 * * ? *)"),  # every day is no restriction
    ("0 12 1,15 * *", "cron(0 12 1,15 * ? *)"),
    ("0 0 1 */3 *", "cron(0 0 1 1/3 ? *)"),
    ("30 8 * jan,JUL *", "cron(30 8 * 1,7 ? *)"),
    ("0 0 ? * 1", "cron(0 0 ? * 2 *)"),  # a habitual ? reads as *
    ("@daily", "cron(0 0 * * ? *)"),
    ("@hourly", "cron(0 * * * ? *)"),
    ("  0   6 *  * 1 ", "cron(0 6 ? * 2 *)"),
])
def test_unix_cron_becomes_schedulers_cron_with_its_question_mark_rule(cron, expression):
    when = parse_when(cron=cron, timezone="Europe/Berlin", now=NOW)
    assert (when.kind, when.expression, when.timezone) == ("cron", expression, "Europe/Berlin")
    assert when.text == " ".join(cron.split())


@pytest.mark.parametrize(("cron", "message"), [
    ("0 6 1 * 1", "cron: both day-of-month (1) and day-of-week (1) are restricted: Unix cron then runs on days "
                  "matching EITHER, and EventBridge Scheduler cannot express that 'or'"),
    ("0 6 */2 * MON", "cron: both day-of-month (*/2) and day-of-week (MON) are restricted"),
    ("0 0 6 * * *", "cron: 6 fields given; write standard 5-field Unix cron"),
    ("0 6 * *", "cron: 4 fields given"),
    ("", "cron: 0 fields given"),
    ("cron(0 6 * * ? *)", "cron: write the 5-field Unix form ('0 6 * * 1'), not Scheduler's cron(...)"),
    ("@reboot", "cron: @reboot names no time"),
    ("@often", "cron: unknown macro '@often'"),
    ("0 0 L * *", "cron: day-of-month: 'L': L and W (last day, nearest weekday) are not standard Unix cron"),
    ("0 0 15W * *", "cron: day-of-month: '15W': L and W"),
    ("0 0 * * 5L", "cron: day-of-week: '5L': L and W"),
    ("0 0 * * 1#2", "cron: day-of-week: '#' (nth weekday of the month) is not standard Unix cron"),
    ("60 * * * *", "cron: minute: 60 is out of range 0-59"),
    ("0 24 * * *", "cron: hour: 24 is out of range 0-23"),
    ("0 0 0 * *", "cron: day-of-month: 0 is out of range 1-31"),
    ("0 0 * 13 *", "cron: month: 13 is out of range 1-12"),
    ("0 0 * * 8", "cron: day-of-week: 8 is out of range 0-7"),
    ("0 5-3 * * *", "cron: hour: the range '5-3' runs backwards"),
    ("*/0 * * * *", "cron: minute: the step in '*/0' must be a whole number of at least 1"),
    ("1,,2 * * * *", "cron: minute: empty item in '1,,2'"),
    ("x * * * *", "cron: minute: 'x' is not a number 0-59"),
    ("0 0 * * FUN", "cron: day-of-week: 'FUN' is not a number 0-7 or a name (SUN-SAT)"),
    ("0 0 30 2 *", "cron: day-of-month 30 never occurs in the month(s) given (2)"),
    ("\u00b2 * * * *", "cron: minute: '\u00b2' is not a number 0-59"),  # isdigit() says yes, int() no
    ("0 0 * * */\u00b2", "cron: day-of-week: the step in '*/\u00b2' must be a whole number of at least 1"),
])
def test_what_scheduler_cannot_run_is_refused_naming_the_field_and_why(cron, message):
    with pytest.raises(ScheduleError) as refused:
        parse_when(cron=cron, now=NOW)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(("rate", "expression", "after", "first"), [
    ("1 hour", "rate(1 hour)", utc(2026, 1, 15, 10, 7), utc(2026, 1, 15, 11, 0)),
    ("1 hours", "rate(1 hour)", utc(2026, 1, 15, 10, 7), utc(2026, 1, 15, 11, 0)),
    ("15 minutes", "rate(15 minutes)", utc(2026, 1, 15, 10, 7), utc(2026, 1, 15, 10, 15)),
    ("1 Minute", "rate(1 minute)", utc(2026, 1, 15, 10, 7, 30), utc(2026, 1, 15, 10, 8)),
    ("1 day", "rate(1 day)", utc(2026, 1, 15, 10, 7), utc(2026, 1, 16)),
    ("2 days", "rate(2 days)", utc(2026, 1, 15, 10, 7), utc(2026, 1, 17)),  # even days since the epoch
    ("15 minutes", "rate(15 minutes)", utc(2026, 1, 15, 10, 15), utc(2026, 1, 15, 10, 30)),  # strictly after
])
def test_rates_fire_at_multiples_of_the_period_since_the_epoch(rate, expression, after, first):
    when = parse_when(rate=rate)
    assert (when.kind, when.expression) == ("rate", expression)
    assert when.next_fire(after) == first
    assert when.next_fire(first) == first + when.period


@pytest.mark.parametrize(("rate", "message"), [
    ("0 minutes", "rate: must be at least 1 minute (got 0)"),
    ("400 days", "rate: at most 365 days (got 400 days)"),
    ("every hour", "rate: 'every hour' is not a rate; write a number and minutes, hours or days"),
    ("30 seconds", "rate: '30 seconds' is not a rate"),
    ("rate(5 minutes)", "rate: 'rate(5 minutes)' is not a rate"),
])
def test_bad_rates_are_refused(rate, message):
    with pytest.raises(ScheduleError) as refused:
        parse_when(rate=rate)
    assert str(refused.value).startswith(message)


def test_a_one_off_at_is_a_local_time_in_its_zone_and_fires_once():
    when = parse_when(at="2026-11-23T09:00", timezone="Europe/Berlin", now=NOW)
    assert (when.kind, when.expression, when.text) == ("at", "at(2026-11-23T09:00:00)", "2026-11-23T09:00:00")
    assert when.at_instant == utc(2026, 11, 23, 8, 0)
    assert when.next_fire(NOW) == utc(2026, 11, 23, 8, 0)
    assert when.next_fire(utc(2026, 11, 23, 8, 0)) is None
    assert parse_when(at="2026-11-23 09:00:30", timezone="UTC", now=NOW).expression == "at(2026-11-23T09:00:30)"


@pytest.mark.parametrize(("at", "message"), [
    ("2025-01-01T09:00", "at: 2025-01-01T09:00 in Europe/Berlin is in the past (it is now 2026-01-15T13:00 there)"),
    ("2026-03-29T02:30", "at: 2026-03-29T02:30 does not exist in Europe/Berlin (the clocks skip it that day)"),
    ("2026-11-23T09:00+01:00", "at: '2026-11-23T09:00+01:00' carries an offset"),
    ("2026-11-23T09:00Z", "at: '2026-11-23T09:00Z' carries an offset"),
    ("2026-13-01T00:00", "at: '2026-13-01T00:00' is not a valid date and time (month must be in 1..12)"),
    ("2026-11-23", "at: '2026-11-23' is not a local date and time; write YYYY-MM-DDTHH:MM"),
    ("tomorrow at 9", "at: 'tomorrow at 9' is not a local date and time"),
    ("9999-12-31T23:59", "at: the year must be 1970-2199 (got 9999)"),  # past UTC's end west of Greenwich
    ("0001-01-01T00:00", "at: the year must be 1970-2199 (got 1)"),
])
def test_bad_or_past_at_times_are_refused(at, message):
    with pytest.raises(ScheduleError) as refused:
        parse_when(at=at, timezone="Europe/Berlin", now=NOW)
    assert str(refused.value).startswith(message)


def test_a_stored_at_that_has_passed_still_reads():
    when = when_of({"cron": None, "rate": None, "at": datetime(2020, 1, 1, 9, 0), "timezone": "UTC"})
    assert when.expression == "at(2020-01-01T09:00:00)" and when.next_fire(NOW) is None
    assert when.latest_fire(NOW, since=utc(2019, 12, 31)) == utc(2020, 1, 1, 9, 0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "give exactly one of cron, rate or at: none was given"),
    ({"cron": "* * * * *", "rate": "1 hour"}, "give exactly one of cron, rate or at (got cron and rate)"),
    ({"rate": "1 hour", "timezone": "Europe/Berln"},
     "timezone: unknown time zone 'Europe/Berln'; give an IANA name such as Europe/Berlin"),
    ({"rate": "1 hour", "timezone": "../../etc/passwd"}, "timezone: unknown time zone '../../etc/passwd'"),
    ({"cron": "0 0 * * *" + " " * 300}, "cron: at most 200 characters"),
])
def test_one_expression_and_a_known_time_zone_are_required(kwargs, message):
    with pytest.raises(ScheduleError) as refused:
        parse_when(**kwargs)
    assert str(refused.value).startswith(message)


# --- daylight saving time, as Scheduler does it --------------------------------------------------

def test_a_0230_berlin_cron_is_skipped_on_the_spring_forward_day_as_scheduler_skips_it():
    when = parse_when(cron="30 2 * * *", timezone="Europe/Berlin", now=NOW)
    # 2026-03-29: clocks jump from 02:00 to 03:00 CEST; 02:30 does not exist that day.
    assert when.next_fire(utc(2026, 3, 28, 2, 0)) == utc(2026, 3, 30, 0, 30)  # 02:30 CEST the day after
    assert when.next_fire(utc(2026, 3, 27, 2, 0)) == utc(2026, 3, 28, 1, 30)  # 02:30 CET the day before
    assert when.latest_fire(utc(2026, 3, 29, 23, 0), since=utc(2026, 3, 28, 1, 30)) is None


def test_a_repeated_hour_fires_once_at_its_first_occurrence_when_clocks_fall_back():
    when = parse_when(cron="30 2 * * *", timezone="Europe/Berlin", now=NOW)
    # 2026-10-25: 02:00-03:00 happens twice (CEST, then CET); Scheduler runs once.
    assert when.next_fire(utc(2026, 10, 24, 12, 0)) == utc(2026, 10, 25, 0, 30)
    assert when.next_fire(utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)
    every_quarter = parse_when(cron="*/15 * * * *", timezone="Europe/Berlin", now=NOW)
    fires, moment = [], utc(2026, 10, 24, 23, 50)
    for _ in range(6):
        moment = every_quarter.next_fire(moment)
        fires.append(moment)
    assert fires == [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 15), utc(2026, 10, 25, 0, 30),
                     utc(2026, 10, 25, 0, 45), utc(2026, 10, 25, 2, 0), utc(2026, 10, 25, 2, 15)]
    # From inside the second 02:xx, the latest fire is the first occurrence's last one.
    assert every_quarter.latest_fire(utc(2026, 10, 25, 1, 40)) == utc(2026, 10, 25, 0, 45)


def test_next_fire_is_in_the_schedules_zone_and_latest_fire_finds_only_the_last_missed_one():
    when = parse_when(cron="0 6 * * 1", timezone="America/New_York", now=NOW)
    assert when.next_fire(NOW) == utc(2026, 1, 19, 11, 0)  # Monday 06:00 EST
    assert when.next_fire(utc(2026, 7, 1)) == utc(2026, 7, 6, 10, 0)  # Monday 06:00 EDT
    # Down for three weeks: only the latest missed Monday comes back.
    assert when.latest_fire(utc(2026, 2, 10), since=utc(2026, 1, 18)) == utc(2026, 2, 9, 11, 0)
    assert when.latest_fire(utc(2026, 2, 10), since=utc(2026, 2, 9, 11, 0)) is None
    rate = parse_when(rate="1 hour")
    assert rate.latest_fire(utc(2026, 1, 15, 12, 59), since=utc(2026, 1, 15, 9)) == utc(2026, 1, 15, 12, 0)
    assert rate.latest_fire(utc(2026, 1, 15, 12, 59), since=utc(2026, 1, 15, 12)) is None


def test_fire_times_are_utc_aware_and_naive_instants_are_a_programming_error():
    when = parse_when(cron="0 6 * * *", timezone="Asia/Kolkata", now=NOW)
    fire = when.next_fire(NOW)
    assert fire.tzinfo == UTC and fire == utc(2026, 1, 16, 0, 30)
    with pytest.raises(ValueError):
        when.next_fire(datetime(2026, 1, 1))
    assert when.next_fire(NOW + timedelta(seconds=0.5)) == fire
