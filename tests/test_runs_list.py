"""GET /api/jarvis/runs (newest first, filtered, paged) and GET /api/jarvis/runs/{id}/events (the timeline)."""

from __future__ import annotations

import re

import pytest

from tests.support.api import call
from zerg.runs import events
from zerg.runs import store as runs


def _token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


@pytest.fixture
def alices_runs(runtime_env, pool, alice, bob):
    """Alice: an api run (cancelled), a schedule run (running), an email run (running); Bob: one run."""
    runtime_env()
    with pool.connection() as conn:
        first = runs.start_run(conn, alice.owner_id, "first, cancelled").run_id
        runs.cancel_run(conn, alice.owner_id, first)
        second = runs.start_run(conn, alice.owner_id, "second, scheduled", trigger="schedule").run_id
        third = runs.start_run(conn, alice.owner_id, "third, a reply", trigger="email").run_id
        bobs = runs.start_run(conn, bob.owner_id, "bob's").run_id
    return _token(alice), _token(bob), [first, second, third], bobs


def _list(token: str, query: str = ""):
    return call("GET", f"/api/jarvis/runs?{query}", token=token)


def test_the_runs_list_is_newest_first_with_the_contract_fields(alices_runs):
    alice, _, (first, second, third), _ = alices_runs
    status, body, _ = _list(alice)
    assert status == 200, body
    assert [r["id"] for r in body["runs"]] == [third, second, first] and body["next_before_id"] is None
    top = body["runs"][0]
    assert set(top) == {"id", "thread_id", "task", "trigger", "status", "created_at", "started_at", "finished_at",
                        "duration_ms", "tokens_in", "tokens_out", "cost_usd"}
    assert (top["task"], top["trigger"], top["status"], top["finished_at"]) == ("third, a reply", "email", "running", None)
    cancelled = body["runs"][2]
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"] and cancelled["duration_ms"] is not None


def test_the_runs_list_filters_by_status_and_trigger_and_pages_by_before_id(alices_runs):
    alice, _, (first, second, third), _ = alices_runs
    assert [r["id"] for r in _list(alice, "status=cancelled")[1]["runs"]] == [first]
    assert [r["id"] for r in _list(alice, "trigger=schedule")[1]["runs"]] == [second]
    assert [r["id"] for r in _list(alice, "status=running&trigger=email")[1]["runs"]] == [third]
    assert _list(alice, "status=success")[1]["runs"] == []
    page1 = _list(alice, "limit=2")[1]
    assert [r["id"] for r in page1["runs"]] == [third, second] and page1["next_before_id"] == second
    page2 = _list(alice, f"limit=2&before_id={page1['next_before_id']}")[1]
    assert [r["id"] for r in page2["runs"]] == [first] and page2["next_before_id"] is None


def test_another_owner_lists_none_of_alices_runs(alices_runs):
    _, bob, alices, bobs = alices_runs
    listed = [r["id"] for r in _list(bob, "limit=100")[1]["runs"]]
    assert listed == [bobs] and not set(alices) & set(listed)
    assert _list(bob, f"before_id={alices[-1] + 1}&trigger=schedule")[1]["runs"] == []


@pytest.mark.parametrize("query, name", [
    ("status=done", "status"), ("trigger=web", "trigger"), ("limit=0", "limit"), ("limit=101", "limit"),
    ("before_id=0", "before_id"), ("before_id=abc", "before_id"),
])
def test_bad_list_parameters_are_422_naming_them(alices_runs, query, name):
    alice, *_ = alices_runs
    status, body, _ = _list(alice, query)
    assert status == 422 and body["error"] == "validation_error" and name in body["message"], body


def test_the_trigger_filter_accepts_exactly_the_schemas_triggers(pool):
    with pool.connection() as conn:
        check = conn.execute("SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
                             "WHERE conrelid = 'runs'::regclass AND conname = 'runs_trigger_check'").fetchone()["d"]
    assert set(re.findall(r"'(\w+)'", check)) == set(runs.RUN_TRIGGERS)


def test_the_timeline_holds_every_event_of_the_run_in_order_with_times(alices_runs, pool, alice):
    token, _, (first, second, _), _ = alices_runs
    with pool.connection() as conn:
        events.emit(conn, second, alice.owner_id, "supervisor_thinking", {"message": "thinking"})
        runs.fail_run(conn, runs.get_run(conn, alice.owner_id, second), "failed", "it broke")
    status, body, _ = call("GET", f"/api/jarvis/runs/{second}/events", token=token)
    assert status == 200, body
    assert body["run_id"] == second and body["truncated"] is False
    assert [e["event_type"] for e in body["events"]] == ["supervisor_started", "supervisor_thinking", "error"]
    ids = [e["id"] for e in body["events"]]
    assert ids == sorted(ids) and all(e["created_at"] for e in body["events"])
    assert body["events"][2]["payload"]["status"] == "failed"
    cancelled = call("GET", f"/api/jarvis/runs/{first}/events", token=token)[1]
    assert [e["event_type"] for e in cancelled["events"]] == ["supervisor_started", "error"]


def test_a_long_timeline_is_cut_and_says_so(alices_runs, pool, alice, monkeypatch):
    token, _, (_, second, _), _ = alices_runs
    with pool.connection() as conn:
        for i in range(4):
            events.emit(conn, second, alice.owner_id, "supervisor_thinking", {"message": f"step {i}"})
    monkeypatch.setattr(events, "TIMELINE_MAX", 3)
    body = call("GET", f"/api/jarvis/runs/{second}/events", token=token)[1]
    assert body["truncated"] is True
    assert [e["event_type"] for e in body["events"]] == ["supervisor_started", "supervisor_thinking", "supervisor_thinking"]


def test_another_owners_timeline_is_404_like_a_missing_run(alices_runs):
    _, bob, (first, _, _), _ = alices_runs
    status, body, _ = call("GET", f"/api/jarvis/runs/{first}/events", token=bob)
    assert status == 404 and body == {"error": "not_found", "message": f"run {first} not found"}
    assert call("GET", "/api/jarvis/runs/999999999/events", token=bob)[1]["message"] == "run 999999999 not found"
    assert call("GET", "/api/jarvis/runs/0/events", token=bob)[0] == 422
    assert call("GET", f"/api/jarvis/runs/{first}/events")[0] == 401
