"""Agent configuration per owner (seed 6.3, 8.3): GET/PUT /api/jarvis/agents and ``zerg agents``
validate with messages that name the field; an owner's supervisor and worker run with that owner's
model, temperature, max tokens, tools and standing instructions (asserted on what each request to
the scripted model carried), another owner's never; a tool the configuration removed is refused;
a scheduled run never gets the person-only tools, whatever the list says."""

from __future__ import annotations

import json

import pytest

from tests.support.api import call, login
from zerg.agents.settings import HEADING, STANDING_RULE
from zerg.runs import jobs
from zerg.runs import store as runs

SUPERVISOR_RULES_START = "You are the Zerg supervisor"
WORKER_RULES_START = "You are a Zerg worker"


def put(token: str, agent: str, body) -> tuple[int, dict]:
    status, answer, _ = call("PUT", f"/api/jarvis/agents/{agent}", body, token=token)
    return status, answer


def entries(token: str) -> dict[str, dict]:
    status, body, _ = call("GET", "/api/jarvis/agents", token=token)
    assert status == 200, body
    return {e["agent"]: e for e in body["agents"]}


# --- the API ------------------------------------------------------------------------------------

def test_unconfigured_agents_show_the_deployments_defaults_and_every_tool(runtime_env, alice):
    runtime_env(ZERG_SUPERVISOR_MODEL="sup-default", ZERG_WORKER_MODEL="wrk-default")
    from zerg.supervisor.turn import supervisor_tools
    from zerg.tools.catalog import worker_tools

    agents = entries(login(alice))
    assert list(agents) == ["supervisor", "worker"]
    sup, wrk = agents["supervisor"], agents["worker"]
    assert sup["defaults"] == {"model": "sup-default", "temperature": None, "max_tokens": None}
    assert (sup["model"], sup["temperature"], sup["max_tokens"], sup["instructions"], sup["updated_at"]) == \
        ("sup-default", None, None, "", None)
    assert sup["available_tools"] == sup["allowed_tools"] == list(supervisor_tools())  # person-run tools included
    assert "create_reminder" in sup["available_tools"] and "spawn_worker" in sup["available_tools"]
    assert wrk["model"] == "wrk-default" and wrk["available_tools"] == wrk["allowed_tools"] == list(worker_tools())


def test_put_changes_only_the_fields_given_and_null_resets_one_to_the_default(runtime_env, alice):
    runtime_env(ZERG_WORKER_MODEL="wrk-default")
    token = login(alice)
    status, entry = put(token, "worker", {"model": "tiny-1", "temperature": 0.2, "max_tokens": 700,
                                          "instructions": "Prefer read-only commands.",
                                          "allowed_tools": ["http_request", "get_current_time", "http_request"]})
    assert status == 200, entry
    assert (entry["model"], entry["temperature"], entry["max_tokens"]) == ("tiny-1", 0.2, 700)
    assert entry["allowed_tools"] == ["http_request", "get_current_time"]  # duplicates removed, the agent's order
    assert entry["instructions"] == "Prefer read-only commands." and entry["updated_at"] is not None

    status, entry = put(token, "worker", {"temperature": 1})  # the others stay
    assert status == 200 and (entry["model"], entry["temperature"], entry["max_tokens"]) == ("tiny-1", 1.0, 700)
    status, entry = put(token, "worker", {"model": None, "allowed_tools": None, "instructions": None})
    assert status == 200, entry
    assert entry["model"] == "wrk-default" and entry["allowed_tools"] == entry["available_tools"]
    assert entry["instructions"] == "" and entry["max_tokens"] == 700
    assert entries(token)["worker"] == entry
    status, same = put(token, "worker", {})  # nothing to change: the entry as it is
    assert status == 200 and same == entry


@pytest.mark.parametrize(("agent", "body", "message"), [
    ("worker", {"model": "gpt 4o"}, "model: Value error, must be printable characters without spaces"),
    ("worker", {"model": ""}, "model: String should have at least 1 character"),
    ("worker", {"model": "m" * 101}, "model: String should have at most 100 characters"),
    ("worker", {"model": "bad\u0007bell"}, "model: Value error, must be printable characters without spaces"),
    ("worker", {"temperature": 2.5}, "temperature: Input should be less than or equal to 2"),
    ("worker", {"temperature": -0.1}, "temperature: Input should be greater than or equal to 0"),
    ("worker", {"temperature": "0.5"}, "temperature: Input should be a valid number"),
    ("worker", {"temperature": True}, "temperature: Input should be a valid number"),
    ("worker", {"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    ("worker", {"max_tokens": 100_001}, "max_tokens: Input should be less than or equal to 100000"),
    ("worker", {"max_tokens": 1.5}, "max_tokens: Input should be a valid integer"),
    ("worker", {"instructions": "x" * 4001}, "instructions: String should have at most 4000 characters"),
    ("worker", {"colour": "blue"}, "colour: Extra inputs are not permitted"),
    ("worker", {"allowed_tools": ["http_request", "spawn_worker", "nope"]},
     "allowed_tools: unknown tool(s) for the worker: nope, spawn_worker (available: "),
    ("supervisor", {"allowed_tools": ["get_current_time", "ssh_exec"]},
     "allowed_tools: unknown tool(s) for the supervisor: ssh_exec (available: "),
    ("supervisor", {"allowed_tools": ["get_current_time"]},
     "allowed_tools: the supervisor must keep spawn_worker: without it there is no delegation"),
    ("supervisor", {"allowed_tools": [""]}, "allowed_tools: Value error, each tool name must be 1-100 characters"),
])
def test_bad_changes_are_refused_with_a_422_that_names_the_field_and_change_nothing(runtime_env, alice, agent, body,
                                                                                   message):
    runtime_env()
    token = login(alice)
    before = entries(token)
    status, answer = put(token, agent, body)
    assert status == 422 and answer["error"] == "validation_error", answer
    assert answer["message"].startswith(message), answer["message"]
    assert entries(token) == before


def test_an_unknown_agent_is_404_and_a_missing_session_401(runtime_env, alice):
    runtime_env()
    token = login(alice)
    status, answer = put(token, "robot", {"model": "x"})
    assert (status, answer) == (404, {"error": "not_found", "message": "agent 'robot' (supervisor or worker) not found"})
    assert call("GET", "/api/jarvis/agents")[0] == 401
    assert call("PUT", "/api/jarvis/agents/worker", {"model": "x"})[0] == 401
    assert call("PUT", "/api/jarvis/agents/worker", raw=b'{"model": ', token=token)[0] == 400
    status, answer, _ = call("PUT", "/api/jarvis/agents/worker", raw=b'{"instructions": "a\\u0000b"}', token=token)
    assert status == 422 and answer["message"].startswith("instructions: must not contain the NUL character")


def test_another_owners_configuration_is_never_shown_or_changed(runtime_env, alice, bob):
    runtime_env()
    mine, theirs = login(alice), login(bob)
    assert put(mine, "supervisor", {"model": "alice-model", "instructions": "alice only"})[0] == 200
    bob_view = entries(theirs)["supervisor"]
    assert bob_view["model"] != "alice-model" and bob_view["instructions"] == "" and bob_view["updated_at"] is None
    assert put(theirs, "supervisor", {"model": "bob-model"})[0] == 200
    assert entries(mine)["supervisor"]["model"] == "alice-model"


# --- runs use the owner's configuration ---------------------------------------------------------

def _system(request) -> str:
    return request["messages"][0]["content"]


def _tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def _responder(request):
    """Both owners' supervisors spawn one worker and try http_request in the same step; alice's
    worker tries container_exec first; every worker then answers."""
    system = _system(request)
    tool_results = [m for m in request["messages"] if m["role"] == "tool"]
    if system.startswith(SUPERVISOR_RULES_START):
        if tool_results:
            return {"content": "All done."}
        return {"tool_calls": [("spawn_worker", {"task": "look around"}),
                               ("http_request", {"url": "http://127.0.0.1:9/never"})]}
    if system.startswith(WORKER_RULES_START):
        if "alice-mark" in system and not tool_results:
            return {"tool_calls": [("container_exec", {"command": "echo should never run"})]}
        return {"content": f"Looked around ({len(tool_results)} tool results)."}
    return {"content": "short summary"}


def _one_run(rt, pool, owner_id: int, task: str) -> tuple[dict, dict]:
    """Plan (spawns one worker), the worker, resume (answers): (the run, its job)."""
    from zerg.supervisor import turn
    from zerg.workers.runner import run_worker_job

    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task, trigger="api")
    planned = turn.plan(rt, started.run_id, owner_id, started.thread_id)
    assert len(planned["jobs"]) == 1, planned
    (job_id,) = planned["jobs"]
    assert run_worker_job(rt, job_id, owner_id, started.run_id).status == "success"
    assert turn.resume(rt, started.run_id, owner_id, started.thread_id)["done"] is True
    with pool.connection() as conn:
        return runs.get_run(conn, owner_id, started.run_id), jobs.get_run_job(conn, job_id, owner_id, started.run_id)


def test_each_owners_runs_carry_that_owners_configuration_and_never_the_others(runtime_env, llm, pool, alice, bob):
    rt = runtime_env(ZERG_SUPERVISOR_MODEL="sup-default", ZERG_WORKER_MODEL="wrk-default")
    mine = login(alice)
    assert put(mine, "supervisor", {"model": "sup-alice", "temperature": 0.3, "max_tokens": 900,
                                    "allowed_tools": ["spawn_worker", "get_current_time", "create_reminder"],
                                    "instructions": "Answer in French. alice-sup-mark"})[0] == 200
    assert put(mine, "worker", {"model": "wrk-alice", "temperature": 0, "max_tokens": 500,
                                "allowed_tools": ["get_current_time"], "instructions": "Be brief. alice-mark"})[0] == 200
    llm.respond_with(_responder)

    alice_run, alice_job = _one_run(rt, pool, alice.owner_id, "alice asks")
    alice_requests, llm.requests[:] = list(llm.requests), []
    bob_run, bob_job = _one_run(rt, pool, bob.owner_id, "bob asks")
    bob_requests = list(llm.requests)

    def split(requests):
        sup = [r for r in requests if _system(r).startswith(SUPERVISOR_RULES_START)]
        wrk = [r for r in requests if _system(r).startswith(WORKER_RULES_START)]
        return sup, wrk

    sup, wrk = split(alice_requests)
    assert len(sup) == 2 and len(wrk) == 2  # plan + resume; the refused call + the answer
    for r in sup:
        assert (r["model"], r["temperature"], r["max_tokens"]) == ("sup-alice", 0.3, 900)
        assert _tool_names(r) == ["spawn_worker", "get_current_time", "create_reminder"]
        assert _system(r).endswith(f"{HEADING}\nAnswer in French. alice-sup-mark")
        assert _system(r).index("Be concise") < _system(r).index(STANDING_RULE) < _system(r).index(HEADING)
    for r in wrk:
        assert (r["model"], r["temperature"], r["max_tokens"]) == ("wrk-alice", 0, 500)
        assert _tool_names(r) == ["get_current_time"]
        assert _system(r).endswith(f"{HEADING}\nBe brief. alice-mark")
    assert alice_job["model"] == "wrk-alice"  # spawn_worker named no model: the owner's worker model

    refusals = [m["content"] for m in alice_run["working_messages"] if m.get("role") == "tool"]
    assert "ERROR: tool http_request is not allowed for this agent" in refusals
    thread = rt.store.read_file(alice_job["worker_id"], "thread.jsonl")
    assert "ERROR: tool container_exec is not allowed for this agent" in thread
    assert not any(f.path.startswith("tool_calls/") for f in rt.store.list_files(alice_job["worker_id"]))

    sup, wrk = split(bob_requests)
    assert len(sup) == 2 and len(wrk) == 1
    for r in sup:
        assert r["model"] == "sup-default" and "temperature" not in r and "max_tokens" not in r
        assert "http_request" in _tool_names(r) and "create_reminder" in _tool_names(r)
        assert HEADING not in _system(r) and "alice" not in json.dumps(r)
    assert wrk[0]["model"] == "wrk-default" and "container_exec" in _tool_names(wrk[0])
    assert "temperature" not in wrk[0] and HEADING not in _system(wrk[0]) and "alice" not in json.dumps(wrk[0])
    assert bob_job["model"] == "wrk-default"
    # bob's supervisor had http_request: its call ran (and failed on the closed port), it was not refused
    bob_tools = [m["content"] for m in bob_run["working_messages"] if m.get("role") == "tool"]
    assert not any("is not allowed for this agent" in (c or "") for c in bob_tools)


def test_a_scheduled_run_never_gets_person_only_tools_even_when_the_config_lists_them(runtime_env, llm, pool, alice):
    from tests.support.scripts import assessment_json
    from zerg.supervisor import turn

    rt = runtime_env()
    assert put(login(alice), "supervisor", {"allowed_tools": ["spawn_worker", "create_reminder", "update_schedule",
                                                              "get_current_time"]})[0] == 200
    llm.respond_with(lambda request: {"content": assessment_json()})
    with pool.connection() as conn:
        started = runs.start_run(conn, alice.owner_id, "nightly check", trigger="schedule")
    assert turn.plan(rt, started.run_id, alice.owner_id, started.thread_id)["done"] is True
    (request,) = [r for r in llm.requests if _system(r).startswith(SUPERVISOR_RULES_START)]
    assert _tool_names(request) == ["spawn_worker", "get_current_time"]


def test_a_disallowed_call_never_runs_even_when_a_hook_would_handle_it(runtime_env, pool, owner):
    """The refusal comes before the tool set and before the hooks (spawn_worker is a hook's call)."""
    from zerg.llm import CallTag, ChatResult, ToolCall
    from zerg.loop.agent_loop import AgentLoop, AgentUsage, LoopHooks
    from zerg.loop.tool import ToolContext
    from zerg.tools.clock import TOOL as CLOCK

    rt = runtime_env()
    handled: list[str] = []

    class Hooks(LoopHooks):
        def handle(self, call):
            handled.append(call.name)
            return None

    class Model:
        def __init__(self):
            self.calls = 0

        def complete(self, messages, *, model, **kwargs):
            self.calls += 1
            if self.calls == 1:
                return ChatResult(model, "", [ToolCall("c1", "get_current_time", "{}"), ToolCall("c2", "ssh_exec", "{}")])
            return ChatResult(model, "done")

    messages: list[dict] = [{"role": "user", "content": "go"}]
    spent = AgentUsage()
    result = AgentLoop(llm=Model(), model="m", tools={CLOCK.name: CLOCK}, ctx=ToolContext(settings=rt.settings),
                       tag=CallTag("worker", owner), max_steps=3, hooks=Hooks(), refused=frozenset({"ssh_exec"})
                       ).run(messages, spent)
    assert result.answer == "done" and handled == ["get_current_time"]
    assert messages[3] == {"role": "tool", "tool_call_id": "c2", "content": "ERROR: tool ssh_exec is not allowed for this agent"}
    assert [(t.tool, t.ok) for t in spent.tool_runs] == [("get_current_time", True), ("ssh_exec", False)]


def test_the_supervisor_context_budget_still_holds_with_standing_instructions(runtime_env):
    from zerg.supervisor.context import SupervisorContext, Thread, request_bytes

    runtime_env()
    ctx = SupervisorContext(budget=20_000, thread=Thread(), task="check", instructions="i" * 4000)
    view = ctx.messages([])
    assert view[0]["content"].endswith("i" * 4000) and request_bytes(view) <= 20_000
    assert ctx.layout.fixed > 4000  # counted as the fixed cost it is: the other layers shrink, not the budget


# --- the CLI ------------------------------------------------------------------------------------

def test_cli_set_show_and_reset(runtime_env, alice, capsys):
    from zerg.cli.main import main

    runtime_env(ZERG_WORKER_MODEL="wrk-default")
    owner = ["--owner", alice.name]
    assert main(["agents", "set", "worker", "--model", "cli-model", "--temperature", "0.4", "--max-tokens", "321",
                 "--tools", "get_current_time,http_request", "--instructions", "Keep it short.", *owner]) == 0
    out = capsys.readouterr().out
    assert "cli-model" in out and "0.4" in out and "321" in out and "Keep it short." in out
    assert "tools:         http_request, get_current_time" in out and "not allowed:" in out

    assert main(["agents", "show", "worker", *owner]) == 0
    shown = capsys.readouterr().out
    assert "cli-model" in shown and "supervisor:" not in shown

    assert main(["agents", "set", "worker", "--temperature", "3", *owner]) == 2
    assert "temperature: Input should be less than or equal to 2" in capsys.readouterr().err
    assert main(["agents", "set", "worker", "--max-tokens", "lots", *owner]) == 2
    assert "--max-tokens 'lots': not a whole number (or default)" in capsys.readouterr().err
    assert main(["agents", "set", "supervisor", "--tools", "get_current_time", *owner]) == 2
    assert "must keep spawn_worker" in capsys.readouterr().err

    assert main(["agents", "reset", "worker", *owner]) == 0
    reset = capsys.readouterr().out
    assert "wrk-default (default)" in reset and "tools:         all: " in reset and "instructions:  none" in reset
