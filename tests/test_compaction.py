"""Thread compaction: past 50 unsummarised messages the oldest 30 become one summary that replaces
them in the supervisor's prompt; every stored message stays. Scripted model, real PostgreSQL."""

from __future__ import annotations

import threading

from tests.support.scripts import role_of
from zerg.llm.ledger import calls_of_run
from zerg.llm.untrusted import fenced_parts
from zerg.memory import summaries
from zerg.memory.compaction import compact
from zerg.runs import store as runs
from zerg.runs import threads
from zerg.supervisor import turn
from zerg.supervisor.context import SUMMARY_HEADER, load_thread, request_bytes

SUMMARY = "SUMMARY-TEXT: the user asked about topics 0 to 29; Zerg answered each."


def fill_thread(pool, owner, count, start=0):
    with pool.connection() as conn:
        thread_id = threads.find_or_create_thread(conn, owner)
        threads.append_messages(conn, owner, thread_id, None, [
            ("user" if i % 2 == 0 else "assistant", f"message {i}: a few words about topic {i}.", {})
            for i in range(start, start + count)])
    return thread_id


def count_messages(pool, owner, thread_id):
    with pool.connection() as conn:
        return threads.count_messages_after(conn, owner, thread_id, 0)


def rows_of(pool, owner, thread_id):
    with pool.connection() as conn:
        return summaries.list_summaries(conn, owner, thread_id)


def plan_request(rt, llm, pool, owner, task="and now?"):
    """The request of a fresh run's plan (the model answers at once)."""
    llm.requests.clear()
    llm.script({"content": "ok"})
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, task)
    turn.plan(rt, started.run_id, owner, started.thread_id)
    (request,) = llm.requests
    return request, started


def test_compaction_at_51_messages_keeps_every_stored_message_and_shrinks_the_prompt(runtime_env, llm, pool, owner):
    rt = runtime_env()
    thread_id = fill_thread(pool, owner, 51)
    before, started = plan_request(rt, llm, pool, owner)
    assert sum("message 0: " in (m["content"] or "") for m in before["messages"]) == 1  # all 51 are shown
    stored_before = count_messages(pool, owner, thread_id)

    llm.requests.clear()
    llm.script({"content": SUMMARY})
    assert compact(rt, owner, thread_id, run_id=started.run_id) is True

    assert count_messages(pool, owner, thread_id) == stored_before == 51  # nothing deleted
    with pool.connection() as conn:
        assert threads.find_or_create_thread(conn, owner) == thread_id  # the same thread
        first_ids = [m["id"] for m in threads.messages_after(conn, owner, thread_id, 0, limit=31)]
        ledger = calls_of_run(conn, owner, started.run_id)
    (row,) = rows_of(pool, owner, thread_id)
    assert (row["first_message_id"], row["last_message_id"], row["message_count"], row["summary"]) == (
        first_ids[0], first_ids[29], 30, SUMMARY)
    # One model call, the summary model's, on the ledger as "memory"; the transcript went as data.
    (call,) = llm.requests
    assert role_of(call) == "summary" and call["model"] == rt.settings.summary_model
    transcript = fenced_parts(call["messages"][-1]["content"])[0]
    assert "message 0: " in transcript and "message 29: " in transcript and "message 30: " not in transcript
    assert [c["component"] for c in ledger if c["component"] == "memory"] == ["memory"]

    after, _ = plan_request(rt, llm, pool, owner)
    assert request_bytes(after["messages"]) < request_bytes(before["messages"])
    shown = [m["content"] for m in after["messages"]]
    summary_block = next(c for c in shown if SUMMARY in c)
    assert fenced_parts(summary_block)[0].startswith(SUMMARY_HEADER)  # a model's text: fenced as data
    assert not any(f"message {i}: " in c for c in shown for i in range(30))
    assert all(any(f"message {i}: " in c for c in shown) for i in range(30, 51))

    assert compact(rt, owner, thread_id) is False  # 21 left unsummarised: nothing to do


def test_fifty_messages_are_not_compacted_and_no_model_is_called(runtime_env, llm, pool, owner):
    rt = runtime_env()
    thread_id = fill_thread(pool, owner, 50)
    assert compact(rt, owner, thread_id) is False
    assert llm.requests == [] and rows_of(pool, owner, thread_id) == []


def test_a_failed_timed_out_or_empty_summary_writes_nothing_never_raises_and_the_next_call_retries(
        runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_LLM_TIMEOUT_S="1")
    thread_id = fill_thread(pool, owner, 60)
    llm.script({"status": 500, "message": "the model is down"}, {"delay": 3, "content": "too late"}, {"content": "  "})
    assert [compact(rt, owner, thread_id) for _ in range(3)] == [False, False, False]
    assert rows_of(pool, owner, thread_id) == []
    llm.script({"content": SUMMARY})
    assert compact(rt, owner, thread_id) is True
    assert [r["summary"] for r in rows_of(pool, owner, thread_id)] == [SUMMARY]
    assert count_messages(pool, owner, thread_id) == 60


def test_a_database_failure_is_logged_and_returns_false(runtime_env, pool, owner, monkeypatch):
    rt = runtime_env()
    thread_id = fill_thread(pool, owner, 60)

    def broken(*args, **kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(summaries, "last_summarised_id", broken)
    assert compact(rt, owner, thread_id) is False


def test_concurrent_compactions_write_one_summary_and_never_overlap(runtime_env, llm, pool, owner):
    rt = runtime_env()
    thread_id = fill_thread(pool, owner, 55)
    gate = threading.Barrier(2)

    def respond(request):
        gate.wait(timeout=20)  # both compactions have read the same range before either writes
        return {"content": SUMMARY}

    llm.respond_with(respond)
    results = []
    workers = [threading.Thread(target=lambda: results.append(compact(rt, owner, thread_id))) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert sorted(results) == [False, True]
    (row,) = rows_of(pool, owner, thread_id)
    # A range that overlaps the written one is refused by the database, whatever its first id.
    with pool.connection() as conn:
        assert summaries.add_summary(conn, owner, thread_id, row["first_message_id"] + 1,
                                     row["last_message_id"] + 5, 5, "overlapping") is None
        assert summaries.add_summary(conn, owner, thread_id, row["last_message_id"] + 1,
                                     row["last_message_id"] + 5, 5, "next") is not None


def test_another_owner_gets_nothing_of_a_thread_and_cannot_compact_it(runtime_env, llm, pool, owner, other_owner):
    rt = runtime_env()
    thread_id = fill_thread(pool, owner, 60)
    llm.script({"content": SUMMARY})
    assert compact(rt, owner, thread_id) is True

    assert compact(rt, other_owner, thread_id) is False and len(llm.requests) == 1
    with pool.connection() as conn:
        assert summaries.list_summaries(conn, other_owner, thread_id) == []
        assert summaries.last_summarised_id(conn, other_owner, thread_id) == 0
        assert threads.messages_after(conn, other_owner, thread_id, 0, limit=100) == []
        assert threads.count_messages_after(conn, other_owner, thread_id, 0) == 0
        empty = load_thread(conn, other_owner, thread_id)
    assert (empty.summaries, empty.messages, empty.unloaded) == ([], [], 0)
