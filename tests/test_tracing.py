"""One OpenTelemetry trace per run (issue 28 item 2), end to end: the real run ASL under moto's
interpreter on the local engine, the real handlers, the scripted model over loopback, the real
database and sandbox, and the real OpenTelemetry SDK exporting over OTLP/HTTP (protobuf) to a
loopback receiver that decodes what it gets with opentelemetry-proto. The spans of the supervisor's
steps and of every worker invocation (a worker resumed after an approval too) join the one trace
the run's traceparent named; the same spans are kept per run for ``GET /api/jarvis/runs/{id}/trace``.
No sleeps: each test waits for the spans (or rows) it expects, with a generous ceiling.
"""

from __future__ import annotations

import json

import pytest

from tests.support.factories import set_approval_policy
from tests.support.otlp import OTLPReceiver
from tests.support.scripts import has_tool_results, role_of, run_script, worker_task
from tests.support.waiting import wait_for
from zerg import observability, tracing
from zerg.approvals import requests as approvals
from zerg.approvals.wait import approve
from zerg.runs import store as runs
from zerg.runs.launch import start_execution

pytestmark = pytest.mark.e2e  # every run goes through the local engine (rt.starter's)

ROOT = f"invoke_workflow {tracing.WORKFLOW}"
LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


@pytest.fixture
def receiver():
    server = OTLPReceiver()
    yield server
    server.close()


@pytest.fixture
def traced(runtime_env, receiver):
    """A runtime exporting to the receiver and keeping spans in the database; tracing is removed after."""

    def configure(**env: str):
        # Spans are exported in the background (as in `zerg serve`), every 50 ms here.
        return runtime_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, ZERG_TRACE_STORE="on",
                           OTEL_BSP_SCHEDULE_DELAY="50", **env)

    yield configure
    from zerg.tracing.setup import shutdown

    shutdown()


def run_to_end(rt, pool, owner, task):
    """Start ``task`` through the one launch path (its traceparent included); wait for the execution,
    its Remember step included. Returns the run row."""
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, task, trigger="cli")
        run = runs.get_run(conn, owner, started.run_id)
    arn = start_execution(rt, run)
    desc = rt.starter.engine().wait(arn, timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    rt.starter.drain(timeout=120)  # the asynchronous Remember step
    with pool.connection() as conn:
        return runs.get_run(conn, owner, run["id"])


def of_run(spans, run):
    return [s for s in spans if s["attributes"].get(tracing.RUN_ID) == run["id"]]


def named(spans, name):
    return [s for s in spans if s["name"] == name]


def closed_trace(receiver, run, workers: int):
    """The run's spans once its root span, its workers and its memory step have arrived."""
    def done(spans):
        mine = of_run(spans, run)
        return (named(mine, ROOT) and len(named(mine, "invoke_agent worker")) == workers
                and named(mine, "supervisor remember"))
    return of_run(receiver.wait_for(done), run)


def test_a_run_is_one_trace_across_the_supervisor_and_its_workers(traced, receiver, llm, pool, owner):
    rt = traced(**LATEST)
    llm.respond_with(run_script(["Check disk usage", "Check memory"],
                                commands={"Check disk usage": "echo DISK-SECRET-78pct",
                                          "Check memory": "echo MEM-2GB"}))
    run = run_to_end(rt, pool, owner, "check disk and memory")
    assert run["status"] == "success"
    spans = closed_trace(receiver, run, workers=2)
    trace_id, root_id = tracing.ids_for(run["id"], run["created_at"])

    assert {s["trace_id"] for s in spans} == {trace_id}  # one trace, the one the traceparent named
    assert len({s["span_id"] for s in spans}) == len(spans)
    by_id = {s["span_id"]: s for s in spans}
    (root,) = [s for s in spans if s["parent_span_id"] is None]
    assert (root["name"], root["span_id"]) == (ROOT, root_id)
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
    assert root["attributes"]["zerg.run.status"] == "success"
    assert root["resource"]["service.name"] == "zerg" and root["schema_url"].endswith("/1.41.0")
    assert all(s["parent_span_id"] in by_id for s in spans if s is not root)  # nothing dangles
    # From the run's creation to its close (inside finalize; the Remember step comes after).
    assert root["start_ns"] <= min(s["start_ns"] for s in spans)
    assert root["end_ns"] >= max(s["end_ns"] for s in named(spans, "invoke_agent worker"))

    supervisor = named(spans, "invoke_agent supervisor")
    assert [s["attributes"]["zerg.action"] for s in sorted(supervisor, key=lambda s: s["start_ns"])] == [
        "plan", "resume", "finalize"]
    workers = named(spans, "invoke_agent worker")
    for agent in supervisor + workers:  # every Lambda invocation is a child of the run's root span
        assert agent["parent_span_id"] == root_id
        assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert agent["attributes"]["gen_ai.provider.name"] == "openai"
    with pool.connection() as conn:
        jobs = conn.execute("SELECT id, worker_id FROM worker_jobs WHERE run_id = %s ORDER BY id",
                            (run["id"],)).fetchall()
    assert sorted((w["attributes"][tracing.JOB_ID], w["attributes"]["gen_ai.agent.id"]) for w in workers) == [
        (j["id"], j["worker_id"]) for j in jobs]
    assert {w["attributes"]["zerg.worker.status"] for w in workers} == {"success"}

    # Each worker: a chat span per model call and an execute_tool span for its command, all its own.
    for worker in workers:
        children = [s for s in spans if s["parent_span_id"] == worker["span_id"]]
        chats = [s for s in children if s["attributes"].get("gen_ai.operation.name") == "chat"]
        (tool,) = [s for s in children if s["name"] == "execute_tool container_exec"]
        assert len(chats) == 2 and all(c["kind"] == "client" for c in chats)
        for chat in chats:
            attrs = chat["attributes"]
            assert chat["name"] == f"chat {attrs['gen_ai.request.model']}"
            assert attrs["gen_ai.provider.name"] == "openai" and "gen_ai.system" not in attrs
            assert attrs["gen_ai.response.model"] and attrs["gen_ai.usage.input_tokens"] > 0
            assert attrs["gen_ai.usage.output_tokens"] > 0 and "gen_ai.usage.cache_read.input_tokens" in attrs
            assert attrs[tracing.JOB_ID] == worker["attributes"][tracing.JOB_ID]
            assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
        assert sorted(c["attributes"]["gen_ai.response.finish_reasons"][0] for c in chats) == ["stop", "tool_call"]
        assert tool["attributes"]["gen_ai.tool.name"] == "container_exec"
        assert tool["attributes"]["gen_ai.tool.call.id"] and tool["attributes"]["zerg.tool.outcome"] == "ok"
        # content capture is off: neither the command nor its output is on the span
        assert "gen_ai.tool.call.arguments" not in tool["attributes"]
        assert "gen_ai.tool.call.result" not in tool["attributes"]
    assert "DISK-SECRET" not in json.dumps(spans)

    plan, resume = sorted(supervisor, key=lambda s: s["start_ns"])[:2]
    spawns = [s for s in spans if s["name"] == "execute_tool spawn_worker"]
    assert len(spawns) == 2 and {s["parent_span_id"] for s in spawns} == {plan["span_id"]}
    mounts = named(spans, "evidence_mount")
    assert mounts and {m["parent_span_id"] for m in mounts} <= {plan["span_id"], resume["span_id"]}
    assert any(m["attributes"]["zerg.evidence.bytes"] > 0 for m in mounts
               if m["parent_span_id"] == resume["span_id"])  # the workers' evidence was mounted on resume
    summaries = named(spans, "summarize worker")
    assert len(summaries) == 2 and {s["parent_span_id"] for s in summaries} == {root_id}

    def stored():  # the same spans kept for the waterfall (their own batch processor: waited for too)
        with pool.connection() as conn:
            return conn.execute("SELECT span_id, trace_id FROM run_spans WHERE run_id = %s", (run["id"],)).fetchall()
    wait_for(lambda: len(stored()) >= len(spans), "the run's spans in the database", limit_s=60)
    assert {r["span_id"] for r in stored()} == {s["span_id"] for s in spans}
    assert {r["trace_id"] for r in stored()} == {trace_id}


def test_two_runs_are_two_traces_and_the_default_conventions_name_the_system(traced, receiver, llm, pool, owner):
    rt = traced()  # no opt-in: the GenAI conventions of 1.36.0
    llm.respond_with(run_script(["only task"]))
    first = run_to_end(rt, pool, owner, "first")
    second = run_to_end(rt, pool, owner, "second")
    one, two = closed_trace(receiver, first, workers=1), closed_trace(receiver, second, workers=1)
    assert len({s["trace_id"] for s in one}) == len({s["trace_id"] for s in two}) == 1
    assert one[0]["trace_id"] != two[0]["trace_id"]
    chats = [s for s in one if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert chats and all(c["attributes"]["gen_ai.system"] == "openai" for c in chats)
    assert not any("gen_ai.provider.name" in c["attributes"] for c in chats)
    assert named(one, ROOT)[0]["schema_url"].endswith("/1.36.0")


def test_content_is_on_the_spans_only_when_capture_opts_in(traced, receiver, llm, pool, owner):
    rt = traced(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true", **LATEST)
    llm.respond_with(run_script(["Check disk"], commands={"Check disk": "echo CAPTURED-OUTPUT-7"}))
    run = run_to_end(rt, pool, owner, "check the disk")
    spans = closed_trace(receiver, run, workers=1)
    (tool,) = named(spans, "execute_tool container_exec")
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"command": "echo CAPTURED-OUTPUT-7"}
    assert "CAPTURED-OUTPUT-7" in tool["attributes"]["gen_ai.tool.call.result"]
    worker = named(spans, "invoke_agent worker")[0]
    chat = next(s for s in spans if s["parent_span_id"] == worker["span_id"] and s["name"].startswith("chat "))
    sent = json.loads(chat["attributes"]["gen_ai.input.messages"])
    assert any(m.get("content") == "Check disk" for m in sent)
    assert json.loads(chat["attributes"]["gen_ai.output.messages"])[0]["role"] == "assistant"


def _approval_script(request):
    role = role_of(request)
    if role == "supervisor":
        return {"content": "done"} if has_tool_results(request) else {
            "tool_calls": [("spawn_worker", {"task": "Restart nginx"})]}
    if role == "worker":
        assert worker_task(request) == "Restart nginx"
        if not has_tool_results(request):
            return {"tool_calls": [("container_exec", {"command": "echo RESTARTED"})]}
        return {"content": "nginx restarted"}
    return {"content": "short summary"}


def test_a_worker_resumed_after_an_approval_joins_the_same_trace(traced, receiver, llm, pool, owner):
    llm.respond_with(_approval_script)
    set_approval_policy(pool, owner, tools={"container_exec": "ask"}, expiry_s=3600)
    rt = traced(**LATEST)
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "restart nginx", trigger="cli")
        run = runs.get_run(conn, owner, started.run_id)
    arn = start_execution(rt, run)

    def token_stored():
        with pool.connection() as conn:
            rows = approvals.pending(conn, owner, run["id"])
        return rows[0] if rows and rows[0]["task_token"] else None

    row = wait_for(token_stored, "the approval's task token", limit_s=60)
    assert approve(rt, owner, row["id"]).decided
    assert rt.starter.engine().wait(arn, timeout=120)["status"] == "SUCCEEDED"
    spans = closed_trace(receiver, run, workers=2)  # the held invocation and the resumed one
    trace_id, root_id = tracing.ids_for(run["id"], run["created_at"])
    assert {s["trace_id"] for s in spans} == {trace_id}
    held, resumed = sorted(named(spans, "invoke_agent worker"), key=lambda s: s["start_ns"])
    assert (held["attributes"]["zerg.action"], resumed["attributes"]["zerg.action"]) == ("run", "resume_approval")
    assert held["attributes"]["zerg.worker.status"] == "awaiting_approval"
    assert held["parent_span_id"] == resumed["parent_span_id"] == root_id
    tools = named(spans, "execute_tool container_exec")
    (asked,) = [s for s in tools if s["parent_span_id"] == held["span_id"]]
    assert asked["attributes"]["zerg.tool.outcome"] == "held"
    (ran,) = [s for s in tools if s["parent_span_id"] == resumed["span_id"]]
    assert ran["attributes"]["zerg.tool.outcome"] == "ok"
    (wait,) = named(spans, "approval_wait")
    assert wait["parent_span_id"] == root_id and wait["attributes"]["zerg.approval.status"] == "approved"
    assert wait["attributes"]["gen_ai.tool.call.id"] == asked["attributes"]["gen_ai.tool.call.id"]
    assert held["end_ns"] <= wait["end_ns"] <= resumed["end_ns"]


def test_every_log_line_of_the_run_carries_its_trace_id_and_so_do_its_details(traced, receiver, llm, pool, owner,
                                                                                log_lines):
    rt = traced()
    llm.respond_with(run_script(["a task", "another task"]))
    run = run_to_end(rt, pool, owner, "two tasks")
    trace_id, _ = tracing.ids_for(run["id"], run["created_at"])
    mine = [line for line in log_lines() if line.get("correlation_id") == str(run["id"])]
    functions = {line["function"] for line in mine}
    assert {"supervisor", "worker", "summary"} <= functions
    assert mine and all(line.get("trace_id") == trace_id for line in mine)
    observability.logger().info("after the run")
    assert "trace_id" not in log_lines()[-1]  # an ended invocation leaves no trace id behind

    from zerg.api.routes.runs import _trace_id

    with pool.connection() as conn:
        assert _trace_id(conn, owner, run) == trace_id


def test_the_trace_route_nests_the_runs_spans_for_its_owner_only(traced, receiver, llm, pool, alice, bob):
    from tests.support.api import call, login

    rt = traced(**LATEST)
    llm.respond_with(run_script(["Check disk", "Check memory"]))
    run = run_to_end(rt, pool, alice.owner_id, "check disk and memory")
    closed_trace(receiver, run, workers=2)
    trace_id, root_id = tracing.ids_for(run["id"], run["created_at"])

    def stored():  # the receiver has them: the database exporter was flushed at the same points
        with pool.connection() as conn:
            return conn.execute("SELECT count(*) AS n FROM run_spans WHERE run_id = %s", (run["id"],)).fetchone()["n"]
    wait_for(lambda: stored() == len(of_run(receiver.spans, run)), "the run's spans in the database", limit_s=60)

    token = login(alice)
    status, body, _ = call("GET", f"/api/jarvis/runs/{run['id']}/trace", token=token)
    assert status == 200, body
    assert body["run_id"] == run["id"] and body["trace_id"] == trace_id
    (root,) = body["spans"]  # everything hangs under the run's root span
    assert (root["span_id"], root["name"], root["operation"], root["status"]) == (
        root_id, ROOT, "invoke_workflow", "unset")
    kids = {c["name"] for c in root["children"]}
    assert {"invoke_agent supervisor", "invoke_agent worker", "summarize worker", "supervisor remember"} <= kids
    worker = next(c for c in root["children"] if c["name"] == "invoke_agent worker")
    assert {g["name"] for g in worker["children"]} >= {"execute_tool container_exec"}
    assert all(c["start"] >= root["start"] and c["duration_ms"] >= 0 for c in root["children"])
    with pool.connection() as conn:  # tokens and cost roll up: the root's are the whole run's ledger
        ledger = conn.execute("""SELECT sum(tokens_in) AS tin, sum(tokens_out) AS tout, sum(cost_usd) AS usd
                                 FROM llm_calls WHERE run_id = %s""", (run["id"],)).fetchone()
    assert (root["tokens_in"], root["tokens_out"]) == (ledger["tin"], ledger["tout"]) and root["tokens_in"] > 0
    assert root["cost_usd"] == pytest.approx(float(ledger["usd"] or 0), abs=1e-6)
    chat = next(g for g in worker["children"] if g["operation"] == "chat")
    assert chat["tokens_in"] == chat["attributes"]["gen_ai.usage.input_tokens"] and chat["kind"] == "client"

    status, details, _ = call("GET", f"/api/jarvis/runs/{run['id']}", token=token)
    assert status == 200 and details["trace_id"] == trace_id

    other = login(bob)  # another owner's run is not found, on both routes
    for path in (f"/api/jarvis/runs/{run['id']}/trace", f"/api/jarvis/runs/{run['id']}"):
        status, body, _ = call("GET", path, token=other)
        assert status == 404 and body["error"] == "not_found", body
    status, body, _ = call("GET", "/api/jarvis/runs/987654/trace", token=token)
    assert status == 404
    status, body, _ = call("GET", "/api/jarvis/runs/0/trace", token=token)
    assert status == 422  # a bad id is a validation error, never a trace


def test_a_collector_that_does_not_answer_never_fails_the_run(runtime_env, llm, pool, owner):
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    rt = runtime_env(OTEL_EXPORTER_OTLP_ENDPOINT=dead, OTEL_EXPORTER_OTLP_TIMEOUT="1", ZERG_TRACE_STORE="on",
                     OTEL_BSP_SCHEDULE_DELAY="50")
    try:
        llm.respond_with(run_script(["only task"]))
        run = run_to_end(rt, pool, owner, "one task")
        assert run["status"] == "success" and run["result"] == "Both checks are fine."

        def kept():  # the database still gets them: each exporter has its own batch processor
            with pool.connection() as conn:
                return {r["name"] for r in conn.execute("SELECT name FROM run_spans WHERE run_id = %s",
                                                         (run["id"],)).fetchall()}
        wait_for(lambda: {ROOT, "invoke_agent worker"} <= kept(), "the run's spans in the database", limit_s=60)
    finally:
        from zerg.tracing.setup import shutdown

        shutdown()


def test_a_malformed_traceparent_is_ignored_and_the_step_runs(traced, receiver, llm, pool, owner, engine):
    traced(**LATEST)
    llm.respond_with(run_script(["only task"]))
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "malformed", trigger="cli")
    arn = engine.start_execution(started.run_id, owner, started.thread_id, traceparent="00-not-a-trace-context")
    assert engine.wait(arn, timeout=120)["status"] == "SUCCEEDED"
    assert _run_status(pool, owner, started.run_id) == "success"
    tracing.flush()
    # nothing of its steps was traced (the root span alone is written at the close, from the run row)
    assert {s["name"] for s in receiver.spans if s["attributes"].get(tracing.RUN_ID) == started.run_id} <= {ROOT}


def _run_status(pool, owner, run_id):
    with pool.connection() as conn:
        return runs.get_run(conn, owner, run_id)["status"]
