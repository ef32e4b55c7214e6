"""The usage ledger: every model call of a run, recorded by the model port under its component."""

from __future__ import annotations

from tests.support.scripts import run_script
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import MeteredChatModel, calls_of_run
from zerg.runs import store as runs


def test_every_model_call_of_a_run_is_in_the_ledger_under_its_component(runtime_env, llm, engine, pool, owner, other_owner):
    runtime_env()
    llm.respond_with(run_script(["check disk", "check memory"]))
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "two checks")
    assert engine.wait(engine.start_execution(started.run_id, owner, started.thread_id), timeout=60)["status"] == "SUCCEEDED"
    assert engine.drain(timeout=60)  # the Remember step's call (asynchronous, after the execution)
    with pool.connection() as conn:
        rows = calls_of_run(conn, owner, started.run_id)
        run = runs.get_run(conn, owner, started.run_id)
        assert calls_of_run(conn, other_owner, started.run_id) == []  # another owner sees nothing
    by_component = {}
    for r in rows:
        by_component.setdefault(r["component"], []).append(r)
    # plan + resume; two workers x (command, answer); one summary per worker
    assert len(by_component["supervisor"]) == 2
    assert len(by_component["worker"]) == 4 and len({r["job_id"] for r in by_component["worker"]}) == 2
    assert len(by_component["summary"]) == 2
    assert len(by_component["memory"]) == 1  # the episode ("two checks" states no fact: no extraction)
    assert len(rows) == len(llm.requests)
    assert all(r["tokens_in"] > 0 and r["latency_ms"] >= 0 for r in rows)
    # The ledger and the run's totals agree; the memory call comes after the run closed (the Remember
    # step): the ledger has it under the run, the totals set at the end do not.
    assert sum(r["tokens_in"] for r in rows if r["component"] != "memory") == run["tokens_in"]


class _Answer:
    def complete(self, messages, *, model, tag=None, **kwargs):
        return ChatResult(model=model, content="fine", usage=Usage(10, 2, 0.001))


class _BrokenPool:
    def connection(self):
        raise ConnectionError("database gone")


def test_a_ledger_row_that_cannot_be_written_never_fails_the_call():
    model = MeteredChatModel(_Answer(), lambda: _BrokenPool())
    reply = model.complete([{"role": "user", "content": "hi"}], model="gpt-4o-mini", tag=CallTag("summary", 1))
    assert reply.content == "fine"
