"""Logs carry the invocation's correlation id, per thread; metrics are EMF lines in namespace Zerg."""

from __future__ import annotations

import threading

from zerg import observability


def test_each_thread_logs_with_its_own_run_id(log_lines):
    def invoke(run_id: int) -> None:
        with observability.invocation("worker", run_id) as log:
            barrier.wait()  # all invocations are open at once, as in the local engine
            log.info("working", extra={"mine": run_id})

    barrier = threading.Barrier(6)
    threads = [threading.Thread(target=invoke, args=(n,)) for n in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = [line for line in log_lines() if line["message"] == "working"]
    assert len(lines) == 6
    assert all(line["correlation_id"] == str(line["mine"]) and line["function"] == "worker" for line in lines)
    observability.logger().info("after")
    assert "correlation_id" not in log_lines()[-1]  # an ended invocation leaves no id behind


def test_metrics_are_emf_lines_with_their_dimensions(log_lines):
    observability.set_level("DEBUG")
    observability.metrics({"tool": "container_exec", "outcome": "ok"}, ("ToolCalls", 1, "Count"),
                          ("ToolDuration", 12.5, "Milliseconds"))
    emf = log_lines()[-1]["message"]  # Powertools keeps a JSON message as an object
    directive = emf["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Zerg"
    assert {m["Name"] for m in directive["Metrics"]} == {"ToolCalls", "ToolDuration"}
    assert set(directive["Dimensions"][0]) >= {"tool", "outcome"}
    assert emf["tool"] == "container_exec" and emf["ToolCalls"] == [1.0] and emf["ToolDuration"] == [12.5]


def test_a_worker_run_emits_tool_and_model_metrics(runtime_env, llm, pool, owner, log_lines):
    from tests.support.factories import make_job, make_run
    from tests.support.scripts import run_script
    from zerg.workers.runner import run_worker_job

    rt = runtime_env(ZERG_LOG_LEVEL="DEBUG")
    observability.reset()
    llm.respond_with(run_script([], commands={"t": "echo hi"}))
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "t")
    with observability.invocation("worker", run_id):
        assert run_worker_job(rt, job_id, owner, run_id).status == "success"
    emf = [line["message"] for line in log_lines() if isinstance(line["message"], dict) and "_aws" in line["message"]]
    names = {m["Name"] for e in emf for m in e["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"ToolCalls", "ModelCalls", "ModelTokensIn", "WorkerDuration"} <= names
    tool = next(e for e in emf if "ToolCalls" in e)
    assert tool["tool"] == "container_exec" and tool["outcome"] == "ok"
    assert all(line.get("correlation_id") == str(run_id) for line in log_lines() if isinstance(line["message"], dict))
