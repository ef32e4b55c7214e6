"""Background runs (trigger ``schedule``): unattended, they end with an assessment that lands in the
inbox; warning and above join the thread, info does not; runs of one owner may overlap and each
commits its task and answer as an adjacent pair."""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import dict_row

from tests.support.waiting import wait_for
from zerg.runs import store as runs


def thread_rows(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT id, role, content, run_id FROM thread_messages WHERE owner_id = %s ORDER BY id",
                            (owner_id,)).fetchall()


def assert_adjacent_pairs(rows: list[dict]) -> None:
    """Every run's task is immediately followed by that run's answer."""
    assert len(rows) % 2 == 0
    for task, answer in zip(rows[::2], rows[1::2], strict=True):
        assert (task["role"], answer["role"]) == ("user", "assistant") and task["run_id"] == answer["run_id"], rows


# --- overlap: each run's pair is adjacent ----------------------------------------------------------

def test_a_closing_run_takes_the_thread_before_it_takes_message_ids(pool, owner, database_url):
    """Two runs of one owner end at once: the second waits for the thread before its first insert,
    so no id of its pair can fall between the first run's task and answer."""
    with pool.connection() as conn:
        chat = runs.start_run(conn, owner, "how is the disk?", trigger="api")
        scheduled = runs.start_run(conn, owner, "hourly check", trigger="schedule")
        chat_run, scheduled_run = (runs.get_run(conn, owner, r.run_id) for r in (chat, scheduled))
    first = psycopg.connect(database_url, row_factory=dict_row)
    try:
        first.execute("SELECT 1")  # a transaction in progress: complete_run's becomes a savepoint, held open
        assert runs.complete_run(first, chat_run, "Disk at 40%.")
        seq = lambda: first.execute("SELECT last_value FROM thread_messages_id_seq").fetchone()["last_value"]
        before = seq()
        done = threading.Event()

        def second() -> None:
            with pool.connection() as conn:
                runs.complete_run(conn, scheduled_run, "[WARNING] Disk at 91%")
            done.set()

        worker = threading.Thread(target=second)
        worker.start()
        with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as watcher:
            wait_for(lambda: watcher.execute(
                """SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                   AND query LIKE 'UPDATE threads%%'""").fetchone(), "the second closer to wait for the thread")
            assert seq() == before and not done.is_set()  # no id taken while it waits
        first.commit()
        worker.join(30)
        assert done.is_set()
    finally:
        first.close()
    rows = thread_rows(pool, owner)
    assert [r["content"] for r in rows] == ["how is the disk?", "Disk at 40%.", "hourly check", "[WARNING] Disk at 91%"]
    assert_adjacent_pairs(rows)


# --- a scheduled run end to end: the local engine, the real ASL, the scripted model --------------------

def scheduled_start(rt, pool, owner_id: int, name: str | None = None) -> dict:
    """A schedule's fire as the firing code writes it: the schedule, the run row (trigger schedule)
    and the fire naming it. The run row, not yet executing."""
    from datetime import datetime, timezone

    from tests.support.factories import unique_name
    from zerg.schedules import fires
    from zerg.schedules import service as schedules
    from zerg.schedules.spec import ScheduleSpec

    sched = schedules.create(rt, owner_id, ScheduleSpec(name=name or unique_name("health"), task="Daily health check",
                                                        cron="0 6 * * *"))
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, sched["task"], trigger="schedule")
        fires.attach_run(conn, fires.claim(conn, sched["id"], owner_id, datetime.now(timezone.utc), "ticker"),
                         started.run_id)
        return runs.get_run(conn, owner_id, started.run_id)


def execute(engine, pool, run: dict) -> dict:
    desc = engine.wait(engine.start_execution(run["id"], run["owner_id"], run["thread_id"]), timeout=90)
    assert desc["status"] == "SUCCEEDED", desc
    assert engine.drain(timeout=60)  # the Remember step too
    with pool.connection() as conn:
        return runs.get_run(conn, run["owner_id"], run["id"])


def inbox_item(pool, owner_id: int, run_id: int) -> dict | None:
    from zerg.alerts import inbox

    with pool.connection() as conn:
        return inbox.get(conn, owner_id, run_id)


def episodes(rt, owner_id: int) -> list:
    from zerg.memory import filesystem

    return filesystem.ls(rt, owner_id, "episodes/").files


def test_the_supervisor_of_a_scheduled_run_is_told_it_is_unattended_and_a_warning_lands_on_the_thread(
        runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import background_script, role_of
    from zerg.supervisor.prompts import BACKGROUND_PROMPT, COMMON_PROMPT, SUPERVISOR_PROMPT

    rt = runtime_env()
    llm.respond_with(background_script(["Check disk usage"], "warning", "Disk at 91% on this machine",
                                       "worker: / is 91% full", commands={"Check disk usage": "echo 91%"}))
    run = execute(engine, pool, scheduled_start(rt, pool, owner))
    supervisor = [r for r in llm.requests if role_of(r) == "supervisor"]
    assert supervisor and all(r["messages"][0] == {"role": "system", "content": BACKGROUND_PROMPT} for r in supervisor)
    assert BACKGROUND_PROMPT.startswith(COMMON_PROMPT) and SUPERVISOR_PROMPT.startswith(COMMON_PROMPT)  # cacheable
    assert "set_preference" in SUPERVISOR_PROMPT and "set_preference" not in BACKGROUND_PROMPT  # no directives
    item = inbox_item(pool, owner, run["id"])
    assert (item["severity"], item["headline"], item["assessed_by"]) == ("warning", "Disk at 91% on this machine", "model")
    assert run["status"] == "success" and run["result"].startswith('{"severity": "warning"')  # the run keeps the answer
    assert [(m["role"], m["content"]) for m in thread_rows(pool, owner)] == [
        ("user", "Daily health check"), ("assistant", "[WARNING] Disk at 91% on this machine\n\nworker: / is 91% full")]
    assert len(episodes(rt, owner)) == 1  # warning or worse: remembered


def test_an_info_result_goes_to_the_inbox_not_the_thread_and_writes_no_episode(runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import background_script

    rt = runtime_env()
    llm.respond_with(background_script(["Check disk usage"], "info", "All fine", "disk 40%"))
    run = execute(engine, pool, scheduled_start(rt, pool, owner))
    assert inbox_item(pool, owner, run["id"])["severity"] == "info"
    assert run["status"] == "success" and thread_rows(pool, owner) == []
    assert episodes(rt, owner) == []


def test_an_answer_that_is_not_an_assessment_falls_back_to_a_warning(runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import background_script

    rt = runtime_env()
    llm.respond_with(background_script(["Check disk usage"], answer="Everything looks fine to me!\nDisk 40%."))
    run = execute(engine, pool, scheduled_start(rt, pool, owner))
    item = inbox_item(pool, owner, run["id"])
    assert (item["severity"], item["headline"], item["details"], item["assessed_by"]) == (
        "warning", "Everything looks fine to me!", "Everything looks fine to me!\nDisk 40%.", "fallback")
    assert len(thread_rows(pool, owner)) == 2


def test_a_failed_worker_makes_the_models_info_a_warning(runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import background_script

    rt = runtime_env()
    llm.respond_with(background_script(["Check disk usage", "Check backups"], "info", "All fine", failing=("Check backups",)))
    run = execute(engine, pool, scheduled_start(rt, pool, owner, name="nightly"))
    item = inbox_item(pool, owner, run["id"])
    assert (item["severity"], item["assessed_by"]) == ("warning", "system")
    assert item["headline"] == "Scheduled check 'nightly': 1 worker(s) failed or timed out"
    assert "The check itself said: All fine" in item["details"] and "(Check backups)" in item["details"]


def test_a_chat_and_a_scheduled_run_at_once_each_commit_an_adjacent_pair(runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import assessment_json, run_script
    from zerg.llm.port import BACKGROUND_MARKER

    rt = runtime_env()
    chat_script = run_script(["Check memory"], answer=lambda req: "Memory: 2 GB free.")
    background = run_script(["Check disk usage"], answer=lambda req: assessment_json("warning", "Disk full"))

    def respond(request):
        system = request["messages"][0]
        unattended = system["role"] == "system" and BACKGROUND_MARKER in system["content"]
        return (background if unattended else chat_script)(request)

    llm.respond_with(respond)
    scheduled = scheduled_start(rt, pool, owner)
    with pool.connection() as conn:
        chat = runs.get_run(conn, owner, runs.start_run(conn, owner, "how much memory is free?").run_id)
    arns = [engine.start_execution(r["id"], owner, r["thread_id"]) for r in (chat, scheduled)]
    assert all(engine.wait(arn, timeout=90)["status"] == "SUCCEEDED" for arn in arns)
    rows = thread_rows(pool, owner)
    assert_adjacent_pairs(rows)
    assert {(r["run_id"], r["content"]) for r in rows if r["role"] == "assistant"} == {
        (chat["id"], "Memory: 2 GB free."), (scheduled["id"], "[WARNING] Disk full\n\nNothing to report.")}
    assert inbox_item(pool, owner, scheduled["id"])["severity"] == "warning"
    assert inbox_item(pool, owner, chat["id"]) is None


def test_offline_a_scheduled_run_ends_with_a_valid_assessment(runtime_env, monkeypatch, engine, pool, owner):
    from zerg import config, wiring

    runtime_env()
    monkeypatch.delenv("OPENAI_BASE_URL")  # no model configured: the offline provider
    config.get_settings.cache_clear()
    wiring.reset_runtime()
    rt = wiring.get_runtime()
    assert rt.settings.offline
    run = execute(engine, pool, scheduled_start(rt, pool, owner))
    item = inbox_item(pool, owner, run["id"])
    assert (item["severity"], item["assessed_by"]) == ("info", "model")
    assert item["headline"] == "Offline check: all 3 worker(s) succeeded"  # disk, memory, load
    assert "- worker #" in item["details"]


def test_offline_answers_a_warning_when_a_worker_did_not_succeed():
    import json

    from zerg.llm.offline import OfflineChatModel
    from zerg.supervisor.prompts import BACKGROUND_PROMPT, SUPERVISOR_PROMPT

    outcomes = [{"role": "tool", "tool_call_id": "1", "content": "Worker job 7 finished: status success in 1.0s."},
                {"role": "tool", "tool_call_id": "2", "content": "Worker job 8 finished: status failed in 2.0s.\nError: boom"}]
    ask = lambda prompt: OfflineChatModel().complete(
        [{"role": "system", "content": prompt}, {"role": "user", "content": "Daily health check"}, *outcomes],
        model="offline", tools=[{"type": "function", "function": {"name": "spawn_worker"}}]).content
    answer = json.loads(ask(BACKGROUND_PROMPT))
    assert (answer["severity"], answer["headline"]) == ("warning", "Offline check: 1 of 2 worker(s) did not succeed")
    assert "worker #8 (failed)" in answer["details"]
    assert not ask(SUPERVISOR_PROMPT).startswith("{")  # a chat gets its usual synthesis


def test_a_scheduled_check_whose_execution_cannot_start_is_a_warning_in_the_inbox(runtime_env, pool, owner):
    import pytest

    from zerg.runs.launch import LaunchError, start_execution

    class Unreachable:
        def start(self, run_id, owner_id, thread_id):
            raise ConnectionError("Step Functions is unreachable")

        def close(self) -> None:  # the runtime closes its starter when the test ends
            pass

    rt = runtime_env()
    rt.__dict__["starter"] = Unreachable()  # the runtime's starter, as its cached property holds it
    run = scheduled_start(rt, pool, owner, name="nightly")
    with pytest.raises(LaunchError):
        start_execution(rt, run)
    item = inbox_item(pool, owner, run["id"])
    assert (item["severity"], item["assessed_by"]) == ("warning", "system")
    assert item["headline"] == "Scheduled check 'nightly' failed: could not start the run: ConnectionError"
