"""Budgets that stop spending (issue 27): a run's USD and token budget (the request's preference,
else the owner's default, else the agent default) and a schedule's (per fire, per day), checked
before every model call through the same seam as the daily cap; a run past its budget ends with a
partial answer from the workers that finished; a schedule's next fire is skipped once its day's
budget is spent; a budgeted run refuses a model of unknown price, naming the setting; the spend of
each worker in the run details and the usage API."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.support.api import call
from tests.support.factories import make_job, make_run, run_task
from tests.support.schedules import finished_run, fire_rows, make_schedule
from tests.support.scripts import assessment_json, has_tool_results, role_of, worker_task
from zerg.alerts import budget
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import calls_of_run, record_call, run_spend, usage_report
from zerg.notify.policy import PolicyChange, set_policy
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.schedules import fires
from zerg.schedules.firing import fire

QUICK, ENDLESS = "read the disk usage", "watch the logs until told to stop"


def one_answer(text: str = "Disk usage is at 41%."):
    return lambda request: {"content": "short summary" if role_of(request) == "summary" else text}


def quick_then_endless(request: dict) -> dict:
    """The supervisor spawns a quick worker, then (its outcome in) one that never stops calling tools."""
    role = role_of(request)
    if role == "supervisor":
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done == 0:
            return {"tool_calls": [("spawn_worker", {"task": QUICK})]}
        if done == 1:
            return {"tool_calls": [("spawn_worker", {"task": ENDLESS})]}
        return {"content": assessment_json("warning", "Logs watched")}
    if role == "worker":
        if worker_task(request) == QUICK:
            if has_tool_results(request):
                return {"content": "The disk is 41% full."}
            return {"tool_calls": [("container_exec", {"command": "echo 41%"})]}
        return {"tool_calls": [("container_exec", {"command": "seq 1 2000"})]}  # never answers
    if role == "summary":
        return {"content": "Disk 41% full."}
    return {"content": assessment_json()}


# --- unknown prices ------------------------------------------------------------------------------

def test_a_budgeted_run_refuses_a_model_of_unknown_price_naming_the_setting(runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MODEL="acme-large-2")
    llm.respond_with(one_answer())
    run = run_task(pool, engine, owner, "check disk", preferences={"budget_usd": 1.0})
    assert run["status"] == "failed"
    assert run["error"].startswith("Model 'acme-large-2' has no known price, so the run's budget ($1.00, the request)")
    assert "zerg policy set --model-price acme-large-2=IN,OUT" in run["error"]
    assert '{"model_prices": {"acme-large-2": [IN, OUT]}}' in run["error"]
    assert llm.requests == []  # refused before any call


def test_without_a_budget_an_unknown_price_runs_as_before_with_an_unknown_cost(runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MODEL="acme-large-2")
    llm.respond_with(one_answer())
    run = run_task(pool, engine, owner, "check disk")
    assert run["status"] == "success"
    with pool.connection() as conn:
        calls = [c for c in calls_of_run(conn, owner, run["id"]) if c["component"] == "supervisor"]
    assert calls and all(c["cost_usd"] is None for c in calls)


def test_the_owners_price_lets_a_budgeted_run_use_the_model_and_its_calls_cost_that(
        runtime_env, llm, engine, pool, owner):
    runtime_env(ZERG_SUPERVISOR_MODEL="acme-large-2")
    llm.respond_with(one_answer())
    with pool.connection() as conn:
        set_policy(conn, owner, PolicyChange(model_prices={"acme-large": [1.0, 2.0]}))  # a prefix names the family
    run = run_task(pool, engine, owner, "check disk", preferences={"budget_usd": 1.0})
    assert run["status"] == "success", run["error"]
    with pool.connection() as conn:
        (call,) = [c for c in calls_of_run(conn, owner, run["id"]) if c["component"] == "supervisor"]
    assert float(call["cost_usd"]) == pytest.approx((call["tokens_in"] * 1.0 + call["tokens_out"] * 2.0) / 1e6)


# --- a run's budget: where it comes from, and what stops ------------------------------------------

def test_a_runs_budget_is_the_requests_else_the_owners_default_else_the_agent_default(runtime_env, pool, owner):
    rt = runtime_env(ZERG_RUN_USD_BUDGET="0.50")
    with pool.connection() as conn:
        asked = runs.start_run(conn, owner, "a", preferences={"budget_tokens": 5000}).run_id
        plain = runs.start_run(conn, owner, "b").run_id
        agent = budget.run_budget(conn, rt.settings, runs.get_run(conn, owner, plain))
        set_policy(conn, owner, PolicyChange(run_usd_budget=Decimal(2), run_token_budget=100_000))
        mine = budget.run_budget(conn, rt.settings, runs.get_run(conn, owner, plain))
        request = budget.run_budget(conn, rt.settings, runs.get_run(conn, owner, asked))
    assert (agent.usd, agent.tokens, agent.source) == (Decimal("0.5"), None, "the agent default")
    assert (mine.usd, mine.tokens, mine.source) == (Decimal(2), 100_000, "the owner's default")
    assert (request.usd, request.tokens, request.source) == (None, 5000, "the request")


def test_a_token_budget_stops_the_run_before_its_next_model_call_with_a_partial_answer(
        runtime_env, llm, engine, pool, owner):
    runtime_env()
    llm.respond_with(quick_then_endless)
    run = run_task(pool, engine, owner, "watch it", preferences={"budget_tokens": 1})  # the plan call spends it
    assert run["status"] == "failed" and run["budget_stopped_at"] is not None
    assert run["error"].startswith("Run budget of 1 tokens (the request) reached: ")
    assert run["result"].startswith(run["error"]) and "No worker had started." not in run["result"]
    with pool.connection() as conn:
        (job,) = jobs.run_jobs(conn, owner, run["id"])
    assert job["status"] == "failed" and job["error"].startswith("Run budget of 1 tokens")
    assert f"Not finished: #{job['id']} (failed)." in run["result"]
    roles = [role_of(r) for r in llm.requests]
    assert roles == ["supervisor"]  # the worker's and the supervisor's next calls were refused


# --- a schedule's budgets: per fire and per day (the "must show") -------------------------

def test_a_scheduled_run_stops_at_its_per_fire_budget_with_a_partial_answer_and_the_next_fire_is_skipped(
        runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_SUPERVISOR_MODEL="gpt-4o-mini", ZERG_WORKER_MODEL="gpt-4o-mini",
                     ZERG_WORKER_MAX_ITERATIONS="100")
    llm.respond_with(quick_then_endless)
    schedule = make_schedule(rt, owner, cron="0 * * * *", fire_usd_budget=0.01, day_usd_budget=0.01)
    first = fire(rt, schedule["id"], datetime(2026, 11, 22, 6, tzinfo=UTC), source="ticker")
    assert first.outcome == "started"
    run = finished_run(pool, owner, first.run_id)

    assert (run["status"], run["trigger"]) == ("failed", "schedule") and run["budget_stopped_at"] is not None
    assert re.fullmatch(r"Run budget of \$0\.01 \(the schedule\) reached: \$0\.0[1-9] and [\d,]+ tokens spent\. The run "
                        r"stopped; its answer is what the finished workers found\.", run["error"]), run["error"]
    with pool.connection() as conn:
        quick, endless = jobs.run_jobs(conn, owner, run["id"])
        spent_usd, _ = run_spend(conn, owner, run["id"])
        document = runs.run_document(conn, owner, run["id"])
    assert (quick["task"], quick["status"]) == (QUICK, "success")
    assert (endless["task"], endless["status"]) == (ENDLESS, "failed") and endless["error"].startswith("Run budget of $0.01")
    # The partial answer: the finished worker's finding, the other named; Zerg's words, no model's.
    assert f"- worker #{quick['id']} ({QUICK}): Disk 41% full." in run["result"]
    assert f"Not finished: #{endless['id']} (failed)." in run["result"]
    # It kept calling tools until the budget was spent, and no call was made once it was.
    worker_calls = [r for r in llm.requests if role_of(r) == "worker" and worker_task(r) == ENDLESS]
    assert len(worker_calls) > 2 and Decimal("0.01") <= spent_usd
    with pool.connection() as conn:
        before_last = sum(Decimal(str(c["cost_usd"])) for c in calls_of_run(conn, owner, run["id"])[:-1])
    assert before_last < Decimal("0.01")  # the last call was made under the budget; nothing after it

    # Spend per worker in the run details.
    usage = {w["job_id"]: w["usage"] for w in document["workers"]}
    assert document["budget_stopped"] is True and document["result"] == run["result"]
    assert usage[endless["id"]]["calls"] == len(worker_calls) and usage[endless["id"]]["cost_usd"] > 0
    assert usage[quick["id"]]["calls"] >= 2 and usage[quick["id"]]["tokens_in"] > 0

    # The day's budget is spent: the next fire is skipped, with its reason recorded.
    second = fire(rt, schedule["id"], datetime(2026, 11, 22, 7, tzinfo=UTC), source="ticker")
    assert (second.outcome, second.run_id) == ("skipped", None)
    assert re.fullmatch(r"the schedule's daily budget of \$0\.01 is spent \(\$0\.0[1-9] and [\d,]+ tokens today, UTC time\)",
                        second.detail), second.detail
    assert [(f["outcome"], f["run_id"]) for f in fire_rows(pool, schedule["id"])] == [
        ("started", run["id"]), ("skipped", None)]


def test_a_fires_run_gets_what_the_day_has_left_when_that_is_less_than_its_per_fire_budget(runtime_env, pool, owner):
    rt = runtime_env()
    schedule = make_schedule(rt, owner, cron="0 * * * *", fire_usd_budget=0.05, day_usd_budget=0.08,
                             fire_token_budget=1000)
    with pool.connection() as conn:
        row = conn.execute("SELECT * FROM schedules WHERE id = %s", (schedule["id"],)).fetchone()
        fresh = budget.fire_budget(conn, row)
    assert fresh == budget.FireBudget(preferences={"budget_usd": 0.05, "budget_tokens": 1000})
    with pool.connection() as conn:  # a run of the schedule (its fire names it) spent $0.06 today
        started = runs.start_run(conn, owner, "check", trigger="schedule")
        fires.attach_run(conn, fires.claim(conn, schedule["id"], owner, datetime.now(UTC), "ticker"), started.run_id)
        record_call(conn, CallTag("supervisor", owner, started.run_id), ChatResult("gpt-4o", "", usage=Usage(10, 10, 0.06)),
                    1)
        left = budget.fire_budget(conn, row)
    assert left == budget.FireBudget(preferences={"budget_usd": 0.02, "budget_tokens": 1000})
    with pool.connection() as conn:  # a token budget per day, 20 tokens already spent: the next fire is skipped
        row = conn.execute("UPDATE schedules SET day_token_budget = 20 WHERE id = %s RETURNING *",
                           (schedule["id"],)).fetchone()
        spent = budget.fire_budget(conn, row)
        tomorrow = budget.fire_budget(conn, row, datetime.now(UTC) + timedelta(days=1))
    assert spent.skip == ("the schedule's daily budget of $0.08 and 20 tokens is spent ($0.06 and 20 tokens today, "
                          "UTC time)") and spent.preferences is None
    assert tomorrow == budget.FireBudget(preferences={"budget_usd": 0.05, "budget_tokens": 20})  # a new day


# --- owner isolation and the usage API ---------------------------------------------------------------

def test_the_usage_report_per_job_is_the_owners_own(runtime_env, pool, alice, bob):
    runtime_env()
    run_id, _ = make_run(pool, alice.owner_id)
    job_id = make_job(pool, alice.owner_id, run_id, "check disk")
    with pool.connection() as conn:
        for component in ("worker", "summary"):
            record_call(conn, CallTag(component, alice.owner_id, run_id, job_id),
                        ChatResult("gpt-4o", "", usage=Usage(100, 10, 0.001)), 1)
        record_call(conn, CallTag("supervisor", alice.owner_id, run_id), ChatResult("gpt-4o", "", usage=Usage(5, 5, 0.1)), 1)
        today = datetime.now(UTC).date()
        mine = usage_report(conn, alice.owner_id, today, today, "job")
        theirs = usage_report(conn, bob.owner_id, today, today, "job")
        document = runs.run_document(conn, bob.owner_id, run_id)
    assert mine == [{"key": str(job_id), "calls": 2, "tokens_in": 200, "tokens_out": 20, "cost_usd": 0.002,
                     "cost_known": True}]
    assert theirs == [] and document is None


# --- the settings: a schedule's budgets through the API, a run's through its request -----------------

def test_a_schedules_budgets_are_set_cleared_and_checked_through_the_api(runtime_env, alice):
    runtime_env()
    tok = call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})[1]["token"]
    status, created, _ = call("POST", "/api/jarvis/schedules", {
        "name": "disk", "task": "check disk", "rate": "1 hour", "fire_usd_budget": 0.01, "day_usd_budget": 0.05,
        "day_token_budget": 100000}, token=tok)
    assert status == 201, created
    assert {k: created[k] for k in ("fire_usd_budget", "fire_token_budget", "day_usd_budget", "day_token_budget",
                                    "idle_pause_days", "idle_paused_at")} == {
        "fire_usd_budget": 0.01, "fire_token_budget": None, "day_usd_budget": 0.05, "day_token_budget": 100000,
        "idle_pause_days": 14, "idle_paused_at": None}
    status, patched, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}",
                              {"day_usd_budget": None, "idle_pause_days": 3}, token=tok)
    assert status == 200 and (patched["day_usd_budget"], patched["idle_pause_days"], patched["fire_usd_budget"]) == (
        None, 3, 0.01)
    status, body, _ = call("PATCH", f"/api/jarvis/schedules/{created['id']}", {"fire_usd_budget": -1}, token=tok)
    assert status == 422 and "fire_usd_budget" in str(body)


def test_a_requests_budget_is_validated_and_kept_on_its_run(runtime_env, alice):
    runtime_env()
    tok = call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})[1]["token"]
    status, body, _ = call("POST", "/api/jarvis/supervisor", {"task": "check disk", "preferences": {"budget_usd": -2}},
                           token=tok)
    assert status == 422 and "budget_usd" in str(body)
    status, body, _ = call("POST", "/api/jarvis/supervisor",
                           {"task": "check disk", "preferences": {"budget_tokens": "many"}}, token=tok)
    assert status == 422 and "budget_tokens" in str(body)


def test_zerg_schedules_add_sets_a_checks_budgets_and_idle_pause(runtime_env, alice, capsys):
    from zerg.cli.main import main

    rt = runtime_env()
    who = ["--owner", alice.name]
    assert main(["schedules", "add", "disk", "--rate", "1 hour", "--fire-usd-budget", "0.01", "--day-usd-budget", "0.05",
                 "--day-token-budget", "100000", "--idle-pause-days", "never", "check disk", *who]) == 0
    assert "; budget per fire $0.01, per day $0.05, per day 100000 tokens" in capsys.readouterr().out
    from zerg.schedules import service

    assert service.find(rt, alice.owner_id, "disk")["idle_pause_days"] is None
    assert main(["schedules", "add", "mem", "--rate", "1 hour", "--fire-usd-budget", "-1", "check memory", *who]) == 2
    assert "fire_usd_budget" in capsys.readouterr().err
