"""The writes after a run (the Remember step): the episode file, its fallbacks, its ordering after
supervisor_complete, idempotency, which runs get one, and parts that fail on their own."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pytest

from tests.support.factories import make_run, run_events
from tests.support.scripts import memory_call
from zerg.memory import episodic, facts, filesystem, writes
from zerg.runs import store as runs

EPISODE = {"title": "Disk check on cube", "topic": "home lab / storage", "outcome": "Disk at 78%, no action needed",
           "bullets": ["/ is 78% full", "no errors in the log", "next check in a week"], "tags": ["Disk", "cube"]}


def run_through_engine(engine, pool, owner_id, task):
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task)
    desc = engine.wait(engine.start_execution(started.run_id, owner_id, started.thread_id), timeout=60)
    assert desc["status"] == "SUCCEEDED", desc
    assert engine.drain(timeout=60)
    with pool.connection() as conn:
        return runs.get_run(conn, owner_id, started.run_id)


def finished_run(pool, owner_id, task, answer="Disk at 78%.\nNothing else to report.", trigger="api"):
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task, trigger=trigger)
        assert runs.complete_run(conn, runs.get_run(conn, owner_id, started.run_id), answer)
        return runs.get_run(conn, owner_id, started.run_id)


def episodes(rt, owner_id, prefix="episodes/"):
    return filesystem.ls(rt, owner_id, prefix).files


def test_the_episode_is_written_after_a_run_by_the_system_from_one_memory_call(runtime_env, llm, engine, pool, owner):
    rt = runtime_env()
    llm.respond_with(lambda r: {"content": json.dumps(EPISODE)} if memory_call(r) == "episode"
                     else {"content": "Disk at 78%."})
    run = run_through_engine(engine, pool, owner, "check disk on cube")
    day = run["started_at"].astimezone(timezone.utc).strftime("%Y-%m-%d")
    (listed,) = episodes(rt, owner)
    assert listed.path == f"episodes/{day}/{run['id']}-disk-check-on-cube.md"
    episode = filesystem.read(rt, owner, listed.path)
    assert (episode.writer, episode.writer_run_id, episode.title) == ("system", run["id"], "Disk check on cube")
    assert episode.tags == ["disk", "cube", "episode"]
    assert episode.content == "\n".join([
        "# Episode: Disk check on cube", f"Date: {day}", "Topic: home lab / storage",
        "Outcome: Disk at 78%, no action needed", f"Refs: thread_id={run['thread_id']}, run_id={run['id']}",
        'Tags: ["disk", "cube", "episode"]', "", "Summary:", "- / is 78% full", "- no errors in the log",
        "- next check in a week", ""])
    assert episode.metadata["episode"]["model"] == "gpt-4o-mini" and episode.metadata["episode"]["error"] is None
    (call,) = [r for r in llm.requests if memory_call(r) == "episode"]
    assert "check disk on cube" in call["messages"][1]["content"]
    assert "UNTRUSTED-DATA" in call["messages"][1]["content"]  # the answer is fenced as data
    with pool.connection() as conn:
        components = [r["component"] for r in conn.execute(
            "SELECT component FROM llm_calls WHERE run_id = %s ORDER BY id", (run["id"],)).fetchall()]
    assert components == ["supervisor", "memory"]  # "check disk" states no fact: no extraction call


@pytest.mark.parametrize("failure", ["model error", "timeout", "not json"])
def test_an_episode_failure_never_fails_the_run_nor_comes_before_supervisor_complete(
        runtime_env, llm, engine, pool, owner, failure):
    rt = runtime_env(ZERG_MEMORY_TIMEOUT_S="1")
    seen_at_episode_call = []

    def respond(request):
        if memory_call(request) != "episode":
            return {"content": "Disk at 78%.\nAll good."}
        with pool.connection() as conn:  # the state of the run at the moment the episode is asked for
            row = conn.execute("SELECT id, status FROM runs WHERE owner_id = %s ORDER BY id DESC LIMIT 1",
                               (owner,)).fetchone()
        seen_at_episode_call.append((row["status"], [e for e, _ in run_events(pool, row["id"])]))
        return {"model error": {"status": 500, "message": "model down"},
                "timeout": {"delay": 3, "content": json.dumps(EPISODE)},
                "not json": {"content": "Here is your episode: a disk check."}}[failure]

    llm.respond_with(respond)
    run = run_through_engine(engine, pool, owner, "check disk on cube")
    assert run["status"] == "success" and run["result"] == "Disk at 78%.\nAll good."
    ((status, events_then),) = seen_at_episode_call
    assert status == "success" and events_then[-1] == "supervisor_complete"  # recorded before the episode call
    (listed,) = episodes(rt, owner)
    episode = filesystem.read(rt, owner, listed.path)
    assert listed.path.startswith(f"episodes/{run['started_at'].astimezone(timezone.utc):%Y-%m-%d}/{run['id']}-check-disk-on-cube")
    assert episode.metadata["episode"]["model"] == episodic.FALLBACK_MODEL and episode.metadata["episode"]["error"]
    assert "- Asked: check disk on cube" in episode.content and "- Disk at 78%." in episode.content
    assert episode.tags == ["episode"] and episode.created_at >= run["finished_at"]
    assert [e for e, _ in run_events(pool, run["id"])][-1] == "supervisor_complete"  # nothing after it


def test_a_redelivered_remember_event_writes_no_second_episode_and_asks_no_model(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run = finished_run(pool, owner, "check disk on cube")
    llm.script({"content": json.dumps(EPISODE)})
    first = writes.remember_run(rt, run["id"], owner, run["thread_id"])
    assert first["episode"]["written"] is True
    llm.script({"content": json.dumps({**EPISODE, "title": "Another title"})})
    again = writes.remember_run(rt, run["id"], owner, run["thread_id"])
    assert again["episode"] == {"path": first["episode"]["path"], "written": False}
    assert len(llm.requests) == 1 and len(episodes(rt, owner)) == 1


def test_a_project_label_files_the_episode_under_the_project(runtime_env, llm, pool, owner):
    rt = runtime_env()
    run = finished_run(pool, owner, "project: HDRPop — why did the ads stop?")
    llm.script({"content": json.dumps({**EPISODE, "title": "Ads paused: low ROAS — été 2026"})})
    report = writes.remember_run(rt, run["id"], owner, run["thread_id"])
    day = run["started_at"].astimezone(timezone.utc).strftime("%Y-%m-%d")
    assert report["episode"]["path"] == f"projects/hdrpop/episodes/{day}/{run['id']}-ads-paused-low-roas-ete-2026.md"
    assert episodes(rt, owner) == [] and len(episodes(rt, owner, "projects/hdrpop/episodes/")) == 1


def test_scheduled_unfinished_and_foreign_runs_get_no_episode_and_no_model_call(runtime_env, llm, pool, owner, other_owner):
    rt = runtime_env()
    scheduled = finished_run(pool, owner, "hourly disk check", trigger="schedule")
    assert writes.remember_run(rt, scheduled["id"], owner, scheduled["thread_id"])["episode"] == {
        "skipped": "a scheduled run assessed without a severity (episodes need warning or above)"}
    running_id, thread_id = make_run(pool, owner, "still going")
    assert writes.remember_run(rt, running_id, owner, thread_id) == {"run_id": running_id, "skipped": "the run ended running"}
    mine = finished_run(pool, owner, "I prefer metric units")
    assert writes.remember_run(rt, mine["id"], other_owner, None) == {"run_id": mine["id"], "skipped": "run not found"}
    assert llm.requests == [] and episodes(rt, owner) == []


def test_each_part_of_remember_fails_on_its_own(runtime_env, llm, pool, owner, monkeypatch):
    rt = runtime_env()
    run = finished_run(pool, owner, "I prefer metric units", "Noted.")

    def broken(rt, run):
        raise RuntimeError("memory files unavailable")

    monkeypatch.setattr(writes, "write_episode", broken)
    llm.script({"content": json.dumps([{"category": "preference", "content": "Prefers metric units", "importance": 6}])})
    report = writes.remember_run(rt, run["id"], owner, run["thread_id"])
    assert report["episode"] == {"error": "RuntimeError: memory files unavailable"}
    assert report["facts"]["added"] == 1
    with pool.connection() as conn:
        assert [r["content"] for r in facts.list_facts(conn, owner)] == ["Prefers metric units"]


def test_slugs_and_project_names_are_safe_path_segments():
    assert episodic.slug("Disk check on cube — 78%!") == "disk-check-on-cube-78"
    assert episodic.slug("Été à Zürich") == "ete-a-zurich" and episodic.slug("日本語") == ""
    assert len(episodic.slug("word " * 30)) <= 40
    assert episodic.project_of("see project: ../etc") is None and episodic.project_of("project: a/b") == "a"
    assert episodic.project_of("Project:  Zerg.v2 next") == "zerg.v2" and episodic.project_of("no label") is None
    run = {"id": 7, "task": "x", "started_at": datetime(2026, 1, 17, 23, 30, tzinfo=timezone.utc)}
    assert episodic.path_for(run, "日本語") == "episodes/2026-01-17/7-episode.md"


def test_the_remember_step_compacts_a_long_thread_and_embeds_what_it_wrote(runtime_env, llm, pool, owner):
    from zerg.memory import summaries
    from zerg.runs import threads

    rt = runtime_env()
    run = finished_run(pool, owner, "check disk on cube")  # 2 messages on the thread
    with pool.connection() as conn:
        threads.append_messages(conn, owner, run["thread_id"], None,
                                [("user" if i % 2 == 0 else "assistant", f"message {i}", {}) for i in range(50)])
    llm.respond_with(lambda r: {"content": json.dumps(EPISODE)} if memory_call(r) == "episode"
                     else {"content": "They talked about disks."})
    report = writes.remember_run(rt, run["id"], owner, run["thread_id"])
    assert report["compacted"] is True and report["episode"]["written"]
    with pool.connection() as conn:
        assert summaries.last_summarised_id(conn, owner, run["thread_id"]) is not None
        stored = conn.execute("SELECT count(*) AS n FROM thread_messages WHERE thread_id = %s", (run["thread_id"],)).fetchone()
    assert stored["n"] == 52  # every message stays
    assert sorted(memory_call(r) for r in llm.requests) == ["compaction", "episode"]
    assert isinstance(report["embedded"], int)  # what the indexer embedded (0 without an embedder)


def test_two_concurrent_remember_calls_for_one_run_write_one_episode_and_bump_importance_once(
        runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    with pool.connection() as conn:
        known = facts.add_fact(conn, owner, "preference", "Prefers metric units", importance=6)
    run = finished_run(pool, owner, "I prefer metric units, as I said")
    extraction = {"content": json.dumps([{"category": "preference", "content": "prefers metric units", "importance": 6}])}
    # Whatever the interleaving, enough replies for both deliveries: the assertions are on what was written.
    llm.script(extraction, {"content": json.dumps(EPISODE)}, extraction,
               {"content": json.dumps({**EPISODE, "title": "Another title"})})
    barrier, reports = threading.Barrier(2), []

    def deliver():
        barrier.wait()
        reports.append(writes.remember_run(rt, run["id"], owner, run["thread_id"]))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(episodes(rt, owner)) == 1
    with pool.connection() as conn:
        (row,) = facts.list_facts(conn, owner)
    assert (row["id"], row["importance"]) == (known.id, 7)  # bumped once, not twice
    again = writes.remember_run(rt, run["id"], owner, run["thread_id"])  # a later re-delivery
    assert again["facts"] == {"skipped": "already remembered (the run has its episode)"}
    assert again["episode"]["written"] is False and len(episodes(rt, owner)) == 1


def test_the_episode_says_it_was_derived_from_the_run(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    run = finished_run(pool, owner, "check disk on cube")
    llm.script({"content": json.dumps(EPISODE)})
    path = writes.remember_run(rt, run["id"], owner, run["thread_id"])["episode"]["path"]
    f = filesystem.read(rt, owner, path)
    assert (f.writer, f.writer_run_id) == ("system", run["id"]) and f.metadata["derived_from"].startswith("the run's task")
