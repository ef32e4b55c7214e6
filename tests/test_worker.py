"""Worker runs driven by the scripted model through the real openai client."""

from __future__ import annotations

import json

import pytest

from functions.worker.handler import handler as worker_handler
from tests.support.factories import make_job, make_run, run_events, set_approval_policy
from tests.support.hosts import add_host
from tests.support.ssh_server import _keypair
from zerg.artifacts.store import SYNTHESISED_MARK
from zerg.handler_input import InvalidEvent
from zerg.workers.runner import JobNotFound


def _job_row(pool, job_id):
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM worker_jobs WHERE id = %s", (job_id,)).fetchone()


def test_two_tool_calls_are_persisted_in_order_and_the_final_message_is_the_result(
    runtime_env, llm, pool, owner, ssh_server
):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)  # the owner's own host: sealed key, pinned host key
    set_approval_policy(pool, owner, ssh_allow={"cube": ["echo *"]})  # echo is on no built-in allowlist
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "Check disk on cube", model="gpt-4o-mini")
    llm.script(
        {"tool_calls": [("ssh_exec", {"host": "cube", "command": "echo 'sda1 78%'"})]},
        {"tool_calls": [("container_exec", {"command": "echo local-ok"})]},
        {"content": "Cube disk is 78% full."},
    )
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "success" and set(out) == {"job_id", "worker_id", "status", "approval_id",
                                                        "approval_timeout_s"}
    assert out["approval_id"] is None and out["approval_timeout_s"] is None  # present, null: the run ASL reads them

    store, wid = rt.store, out["worker_id"]
    files = {f.path for f in store.list_files(wid)}
    assert {"tool_calls/001_ssh_exec.txt", "tool_calls/002_container_exec.txt", "result.txt"} <= files
    assert "sda1 78%" in store.read_file(wid, "tool_calls/001_ssh_exec.txt")
    assert "local-ok" in store.read_file(wid, "tool_calls/002_container_exec.txt")
    thread = [json.loads(line) for line in store.read_file(wid, "thread.jsonl").splitlines()]
    assert [m["role"] for m in thread] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert thread[2]["tool_calls"][0]["function"]["name"] == "ssh_exec"
    assert store.read_file(wid, "result.txt") == "Cube disk is 78% full."
    meta = store.read_metadata(wid)
    assert meta["status"] == "success" and meta["job_id"] == job_id
    assert [c["path"] for c in meta["tool_calls"]] == ["tool_calls/001_ssh_exec.txt", "tool_calls/002_container_exec.txt"]

    # The model was shown the real SSH output in its second request, and the worker's tools.
    second = llm.requests[1]
    assert any("sda1 78%" in (m.get("content") or "") for m in second["messages"] if m["role"] == "tool")
    assert {t["function"]["name"] for t in llm.requests[0]["tools"]} == {
        "ssh_exec", "container_exec", "http_request", "get_current_time", "memory_ls", "memory_read", "memory_write",
        "memory_grep", "memory_search", "send_email", "send_sms"}  # no memory edit or delete: a worker reads
    # untrusted output; send_email/send_sms reach only the owner's own verified contacts
    assert llm.requests[0]["model"] == "gpt-4o-mini"

    row = _job_row(pool, job_id)
    assert row["status"] == "success" and row["worker_id"] == wid
    assert row["tokens_in"] > 0 and row["tokens_out"] > 0 and row["cost_usd"] is not None
    assert run_events(pool, run_id) == [
        ("worker_started", {"job_id": job_id, "worker_id": wid}),
        ("worker_complete", {"job_id": job_id, "worker_id": wid, "status": "success", "duration_ms": meta["duration_ms"]}),
    ]


def test_wrong_ssh_key_fails_the_job_fast_with_the_reason(runtime_env, llm, pool, owner, ssh_server, tmp_path):
    wrong = tmp_path / "wrong"
    _keypair(wrong)
    add_host(runtime_env(), owner, "cube", ssh_server, key_file=wrong)
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "Check cube")
    llm.script(
        {"tool_calls": [("ssh_exec", {"host": "cube", "command": "df -h"})]},
        {"content": "should never be asked"},
    )
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    row = _job_row(pool, job_id)
    assert out["status"] == "failed" and row["status"] == "failed"
    assert "authentication failed" in row["error"]
    assert len(llm.requests) == 1  # failed fast: the model was not asked again


def test_timeout_keeps_earlier_outputs_and_emits_the_event(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_WORKER_TIMEOUT_S="2")
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "slow task")
    llm.script(
        {"tool_calls": [("container_exec", {"command": "echo early-evidence"})]},
        {"content": "All done, success!", "tool_calls": [("container_exec", {"command": "sleep 30", "timeout_s": 60})]},
        {"content": "Success: everything completed."},
    )
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "timeout"
    wid = out["worker_id"]
    assert "early-evidence" in rt.store.read_file(wid, "tool_calls/001_container_exec.txt")
    assert "timeout" in rt.store.read_file(wid, "tool_calls/002_container_exec.txt")
    result = rt.store.read_file(wid, "result.txt")
    assert result.startswith("[Worker timeout:") and "early-evidence" in result
    assert run_events(pool, run_id)[-1][1]["status"] == "timeout"
    assert _job_row(pool, job_id)["status"] == "timeout"


def test_model_prose_claiming_success_never_sets_the_status(runtime_env, llm, pool, owner):
    runtime_env(ZERG_WORKER_MAX_ITERATIONS="2")
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "loop forever")
    llm.respond_with(lambda req: {
        "content": "STATUS: success. Task completed successfully.",
        "tool_calls": [("container_exec", {"command": "true"})],
    })
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    row = _job_row(pool, job_id)
    assert out["status"] == "failed" and "without a final answer" in row["error"]


def test_a_failing_command_with_a_final_answer_is_still_a_successful_worker(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "check something")
    llm.script(
        {"tool_calls": [("container_exec", {"command": "exit 7"})]},
        {"content": "FAILED: the check returned exit 7."},
    )
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "success"  # the worker did its job; the finding is in the result
    meta = rt.store.read_metadata(out["worker_id"])
    assert meta["tool_calls"][0]["ok"] is False and meta["tool_calls"][0]["exit_code"] == 7


def test_empty_final_message_yields_a_marked_synthesised_result(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "uptime")
    llm.script({"tool_calls": [("container_exec", {"command": "echo up 3 days"})]}, {"content": ""})
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    result = rt.store.read_file(out["worker_id"], "result.txt")
    assert out["status"] == "success"
    assert result.startswith(SYNTHESISED_MARK) and "up 3 days" in result


def test_model_errors_are_retried_then_fail_the_job_clearly(runtime_env, llm, pool, owner):
    runtime_env(ZERG_LLM_MAX_RETRIES="2")
    run_id, _ = make_run(pool, owner)
    ok_job = make_job(pool, owner, run_id, "flaky model")
    llm.script({"status": 503, "message": "overloaded"}, {"status": 429, "message": "slow down"}, {"content": "fine"})
    assert worker_handler({"job_id": ok_job, "run_id": run_id, "owner_id": owner})["status"] == "success"
    assert len(llm.requests) == 3

    bad_job = make_job(pool, owner, run_id, "dead model")
    llm.script(*[{"status": 500, "message": "boom"}] * 3)
    out = worker_handler({"job_id": bad_job, "run_id": run_id, "owner_id": owner})
    row = _job_row(pool, bad_job)
    assert out["status"] == "failed"
    assert "HTTP 500 after 2 retries" in row["error"] and "boom" in row["error"]


def test_unknown_model_counts_tokens_with_null_cost(runtime_env, llm, pool, owner):
    runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "t", model="my-local-llama")
    llm.script({"content": "done"})
    worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    row = _job_row(pool, job_id)
    assert row["tokens_in"] > 0 and row["cost_usd"] is None


def test_reinvoking_a_finished_job_returns_its_outcome_without_running_again(runtime_env, llm, pool, owner):
    runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "t")
    llm.script({"content": "done"})
    first = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    again = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert first == again and len(llm.requests) == 1


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({}, "job_id: Field required"),
        ({"job_id": "x", "run_id": 1, "owner_id": 1}, "job_id: Input should be a valid integer"),
        ({"job_id": 1, "run_id": 1, "owner_id": 0}, "owner_id: Input should be greater than 0"),
        ({"job_id": 1, "run_id": 1, "owner_id": 1, "action": "explode"},
         "action: Input should be 'run', 'mark_failed', 'await_approval' or 'resume_approval'"),
    ],
)
def test_invalid_events_are_refused_with_the_field_named(event, message):
    with pytest.raises(InvalidEvent) as err:
        worker_handler(event)
    assert message in str(err.value)


def test_another_owners_job_is_not_found(runtime_env, pool, owner, other_owner):
    runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "mine")
    with pytest.raises(JobNotFound):
        worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": other_owner})
    assert _job_row(pool, job_id)["status"] == "queued"


def test_mark_failed_records_the_crash_once(runtime_env, pool, owner):
    runtime_env()
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "crashy")
    error = {"Error": "Lambda.Unknown", "Cause": json.dumps({"errorMessage": "segfault in tool"})}
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner, "action": "mark_failed", "error": error})
    again = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner, "action": "mark_failed", "error": error})
    assert out["status"] == again["status"] == "failed"
    row = _job_row(pool, job_id)
    assert row["error"] == "worker crashed: Lambda.Unknown: segfault in tool"
    assert [e for e, _ in run_events(pool, run_id)] == ["worker_complete"]


def test_a_bounded_model_call_never_retries_past_its_budget(llm):
    from zerg.llm import LLMError
    from zerg.llm.openai_provider import OpenAIChatModel

    model = OpenAIChatModel(api_key=None, base_url=llm.base_url, max_retries=5, timeout=60)
    llm.respond_with(lambda req: {"delay": 0.4, "status": 503, "message": "busy"})
    with pytest.raises(LLMError) as err:
        model.complete([{"role": "user", "content": "hi"}], model="gpt-4o-mini", timeout=1.0)
    # Each attempt takes 0.4 s: a 1 s budget leaves room for at most 3 of the 6 allowed.
    assert len(llm.requests) <= 3
    assert "no time left" in str(err.value) or "timed out" in str(err.value)


def test_retry_after_from_the_server_is_honoured(llm):
    from zerg.llm.openai_provider import OpenAIChatModel

    model = OpenAIChatModel(api_key=None, base_url=llm.base_url, max_retries=2, timeout=10)
    llm.script({"status": 429, "message": "slow down"}, {"content": "ok"})
    assert model.complete([{"role": "user", "content": "hi"}], model="m").content == "ok"
    assert len(llm.requests) == 2
