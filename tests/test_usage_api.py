"""GET /api/jarvis/usage: the owner's ledger per UTC day, model or component; a run's split by component."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from tests.support.api import call
from tests.support.factories import make_run
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import record_call


def _token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


def _ledger_row(pool, owner_id: int, component: str, model: str, at: datetime, tokens_in: int, tokens_out: int,
                cost: float | None, run_id: int | None = None) -> None:
    """One model call in the ledger, recorded as the port records it, dated ``at``."""
    with pool.connection() as conn:
        record_call(conn, CallTag(component, owner_id, run_id), ChatResult(model=model, content="x",
                    usage=Usage(tokens_in, tokens_out, cost)), latency_ms=5)
        conn.execute("UPDATE llm_calls SET created_at = %s WHERE id = (SELECT max(id) FROM llm_calls WHERE owner_id = %s)",
                     (at, owner_id))


def _utc(day: str, clock: str = "12:00:00") -> datetime:
    return datetime.fromisoformat(f"{day}T{clock}+00:00")


@pytest.fixture
def ledger(runtime_env, pool, alice, bob):
    """Alice's calls on 2026-03-01..03 (and just outside), Bob's on the same days."""
    runtime_env()
    rows = [
        ("supervisor", "gpt-a", _utc("2026-02-28", "23:59:59"), 1000, 1000, 1.0),  # before the range
        ("supervisor", "gpt-a", _utc("2026-03-01", "00:00:00"), 100, 10, 0.5),
        ("worker", "gpt-b", _utc("2026-03-01", "23:59:59"), 200, 20, 0.25),
        ("summary", "gpt-b", _utc("2026-03-02"), 300, 30, None),  # unknown price
        ("memory", "gpt-a", _utc("2026-03-03", "23:59:59"), 400, 40, 0.125),
        ("intent", "gpt-a", _utc("2026-03-04", "00:00:00"), 1000, 1000, 1.0),  # after the range
    ]
    for component, model, at, t_in, t_out, cost in rows:
        _ledger_row(pool, alice.owner_id, component, model, at, t_in, t_out, cost)
    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        _ledger_row(pool, bob.owner_id, "worker", "bob-model", _utc(day), 7, 7, 9.0)
    return _token(alice), _token(bob)


def _usage(token: str, query: str):
    return call("GET", f"/api/jarvis/usage?{query}", token=token)


def test_usage_by_day_counts_utc_days_inclusive_and_sums_tokens_and_cost(ledger):
    alice, _ = ledger
    status, body, _ = _usage(alice, "from=2026-03-01&to=2026-03-03&group_by=day")
    assert status == 200, body
    assert (body["from"], body["to"], body["group_by"]) == ("2026-03-01", "2026-03-03", "day")
    assert body["rows"] == [
        {"key": "2026-03-01", "calls": 2, "tokens_in": 300, "tokens_out": 30, "cost_usd": 0.75, "cost_known": True},
        {"key": "2026-03-02", "calls": 1, "tokens_in": 300, "tokens_out": 30, "cost_usd": 0.0, "cost_known": False},
        {"key": "2026-03-03", "calls": 1, "tokens_in": 400, "tokens_out": 40, "cost_usd": 0.125, "cost_known": True},
    ]


def test_usage_by_model_and_by_component(ledger):
    alice, _ = ledger
    _, by_model, _ = _usage(alice, "from=2026-03-01&to=2026-03-03&group_by=model")
    assert [(r["key"], r["calls"], r["tokens_in"], r["cost_usd"], r["cost_known"]) for r in by_model["rows"]] == [
        ("gpt-a", 2, 500, 0.625, True), ("gpt-b", 2, 500, 0.25, False)]
    _, by_component, _ = _usage(alice, "from=2026-03-01&to=2026-03-03&group_by=component")
    assert [(r["key"], r["calls"], r["tokens_out"]) for r in by_component["rows"]] == [
        ("memory", 1, 40), ("summary", 1, 30), ("supervisor", 1, 10), ("worker", 1, 20)]


def test_another_owners_calls_never_count(ledger):
    alice, bob = ledger
    for group_by in ("day", "model", "component"):
        _, body, _ = _usage(bob, f"from=2026-03-01&to=2026-03-03&group_by={group_by}")
        assert sum(r["calls"] for r in body["rows"]) == 3
        assert {r["key"] for r in body["rows"]} <= {"2026-03-01", "2026-03-02", "2026-03-03", "bob-model", "worker"}
    _, mine, _ = _usage(alice, "from=2026-03-01&to=2026-03-03&group_by=model")
    assert "bob-model" not in {r["key"] for r in mine["rows"]}


def test_without_dates_the_report_covers_the_last_30_utc_days(ledger, pool, alice):
    token, _ = ledger
    now = datetime.now(timezone.utc)
    _ledger_row(pool, alice.owner_id, "quick", "gpt-q", now, 11, 1, 0.01)
    _ledger_row(pool, alice.owner_id, "quick", "gpt-q", now - timedelta(days=40), 11, 1, 0.01)
    status, body, _ = _usage(token, "")
    today = now.date()
    assert status == 200 and body["group_by"] == "day"
    assert (body["from"], body["to"]) == ((today - timedelta(days=29)).isoformat(), today.isoformat())
    assert body["rows"] == [{"key": today.isoformat(), "calls": 1, "tokens_in": 11, "tokens_out": 1,
                             "cost_usd": 0.01, "cost_known": True}]


@pytest.mark.parametrize("query, fragment", [
    ("from=2026-03-05&to=2026-03-01", "from (2026-03-05) is after to (2026-03-01)"),
    ("from=2025-01-01&to=2026-01-02", "spans 367 days; the limit is 366"),
    ("from=2026-02-30", "from: '2026-02-30' is not a calendar date"),
    ("to=03/01/2026", "to"),
    ("from=20260301", "from"),
    ("group_by=week", "group_by"),
    ("from=9999-12-31", "from: '9999-12-31' is outside 1970-01-01 to 9998-12-31"),
    ("to=0001-01-05", "to: '0001-01-05' is outside"),
])
def test_bad_ranges_and_groupings_are_422_naming_the_parameter(ledger, query, fragment):
    alice, _ = ledger
    status, body, _ = _usage(alice, query)
    assert status == 422 and body["error"] == "validation_error", body
    assert fragment in body["message"]


def test_a_leap_year_span_of_366_days_is_allowed(ledger):
    alice, _ = ledger
    status, body, _ = _usage(alice, "from=2024-01-01&to=2024-12-31")
    assert status == 200 and body["rows"] == []


def test_usage_needs_a_session(runtime_env):
    runtime_env()
    status, body, _ = call("GET", "/api/jarvis/usage?from=2026-03-05&to=2026-03-01")
    assert status == 401 and body["error"] == "unauthorized"


def test_a_runs_details_split_its_usage_by_component_from_the_ledger(runtime_env, pool, alice, bob):
    runtime_env()
    run_id, _ = make_run(pool, alice.owner_id, "split me")
    now = datetime.now(timezone.utc)
    for component, t_in, cost in (("supervisor", 100, 0.1), ("supervisor", 50, 0.05), ("worker", 30, 0.03),
                                  ("summary", 20, None), ("memory", 10, 0.01), ("intent", 5, 0.005)):
        _ledger_row(pool, alice.owner_id, component, "gpt-a", now, t_in, 1, cost, run_id=run_id)
    _ledger_row(pool, alice.owner_id, "worker", "gpt-a", now, 999, 1, 9.0)  # outside the run
    status, doc, _ = call("GET", f"/api/jarvis/runs/{run_id}", token=_token(alice))
    assert status == 200, doc
    split = {u["component"]: u for u in doc["usage_by_component"]}
    assert list(split) == ["intent", "memory", "summary", "supervisor", "worker"]
    assert split["supervisor"] == {"component": "supervisor", "calls": 2, "tokens_in": 150, "tokens_out": 2,
                                   "cost_usd": 0.15, "cost_known": True}
    assert split["summary"]["cost_known"] is False and split["worker"]["tokens_in"] == 30
    assert call("GET", f"/api/jarvis/runs/{run_id}", token=_token(bob))[0] == 404


def test_a_missing_bound_defaults_around_the_given_one():
    from zerg.api.routes.usage import report_range

    assert report_range(None, "2026-03-10") == (date(2026, 2, 9), date(2026, 3, 10))  # 30 days ending at to
    assert report_range("2099-01-01", None) == (date(2099, 1, 1), date(2099, 1, 1))  # a future from: that day
    assert report_range(None, "1970-01-10") == (date(1970, 1, 1), date(1970, 1, 10))  # never before the earliest
    today = datetime.now(timezone.utc).date()
    assert report_range("2026-01-01", None)[1] == max(today, date(2026, 1, 1))
