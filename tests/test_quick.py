"""Quick mode: POST /api/jarvis/quick answers the clock by code, memory questions from the owner's
memory, anything else with one model call that sees the owner's thread; each turn lands on the
owner's one thread marked quick (no run), nothing when the model fails; a failed run's fallback
apologises; another owner's thread, memory and runs are never used."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest

from tests.support.api import call, login
from tests.support.factories import make_run
from zerg.jarvis import quick
from zerg.llm.untrusted import WORD
from zerg.notify.policy import PolicyChange, set_policy
from zerg.runs import threads

QUICK = "/api/jarvis/quick"


@pytest.fixture
def tokens(runtime_env, alice, bob):
    runtime_env(ZERG_EMBEDDINGS="off", ZERG_QUICK_TIMEOUT_S="1")
    return login(alice), login(bob)


def thread_rows(pool, owner_id):
    with pool.connection() as conn:
        return conn.execute(
            "SELECT id, role, content, metadata, run_id, thread_id FROM thread_messages WHERE owner_id = %s ORDER BY id",
            (owner_id,)).fetchall()


def ledger(pool, owner_id):
    with pool.connection() as conn:
        return [(r["component"], r["run_id"]) for r in conn.execute(
            "SELECT component, run_id FROM llm_calls WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()]


def set_status(pool, run_id, status):
    with pool.connection() as conn:
        conn.execute("UPDATE runs SET status = %s, finished_at = now() WHERE id = %s", (status, run_id))


def test_the_time_is_computed_in_the_owners_zone_without_a_model_and_stored_as_a_quick_turn(tokens, llm, pool, alice):
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(timezone="Asia/Tokyo"))
    before = datetime.now(timezone.utc).astimezone(ZoneInfo("Asia/Tokyo"))
    status, body, _ = call("POST", QUICK, {"utterance": "What time is it?"}, token=tokens[0])
    after = datetime.now(timezone.utc).astimezone(ZoneInfo("Asia/Tokyo"))
    assert status == 200 and body["mode"] == "quick", body
    assert body["answer"] in {quick.clock_answer(t, "Asia/Tokyo") for t in (before, after)}
    assert "(Asia/Tokyo time)" in body["answer"]
    assert llm.requests == [] and ledger(pool, alice.owner_id) == []
    rows = thread_rows(pool, alice.owner_id)
    assert [r["id"] for r in rows] == body["message_ids"] and {r["thread_id"] for r in rows} == {body["thread_id"]}
    assert [(r["role"], r["content"], r["metadata"], r["run_id"]) for r in rows] == [
        ("user", "What time is it?", {"mode": "quick"}, None), ("assistant", body["answer"], {"mode": "quick"}, None)]


def test_a_general_question_is_one_quick_model_call_that_sees_the_owners_thread_and_nobody_elses(
        tokens, llm, pool, alice, bob):
    with pool.connection() as conn:
        for owner, text in ((alice, "my cat is called Miso"), (bob, "bob-private-marker")):
            thread_id = threads.find_or_create_thread(conn, owner.owner_id)
            threads.append_messages(conn, owner.owner_id, thread_id, None, [("user", text, {})])
    llm.script({"content": "Mount Everest is 8,849 m tall."})
    status, body, _ = call("POST", QUICK, {"utterance": "how tall is mount everest"}, token=tokens[0])
    assert (status, body["answer"]) == (200, "Mount Everest is 8,849 m tall."), body
    (request,) = llm.requests
    shown = [(m["role"], m["content"]) for m in request["messages"]]
    assert shown[0][0] == "system" and "quick mode" in shown[0][1] and "Asia" not in shown[0][1]
    assert shown[1:] == [("user", "my cat is called Miso"), ("user", "how tall is mount everest")]
    assert "bob-private-marker" not in str(request)
    assert request["max_tokens"] == quick.MAX_TOKENS and request["model"] == "gpt-4o"  # the supervisor model
    assert ledger(pool, alice.owner_id) == [("quick", None)] and ledger(pool, bob.owner_id) == []
    assert [r["content"] for r in thread_rows(pool, alice.owner_id)][-2:] == [
        "how tall is mount everest", "Mount Everest is 8,849 m tall."]


def test_the_quick_model_sees_only_the_newest_turns_and_says_how_many_are_left_out(tokens, llm, pool, alice):
    with pool.connection() as conn:
        thread_id = threads.find_or_create_thread(conn, alice.owner_id)
        threads.append_messages(conn, alice.owner_id, thread_id, None,
                                [("user", f"message {i}", {}) for i in range(quick.THREAD_MESSAGES + 5)])
    llm.script({"content": "ok"})
    assert call("POST", QUICK, {"utterance": "how tall is mount everest"}, token=tokens[0])[0] == 200
    contents = [m["content"] for m in llm.requests[0]["messages"][1:]]
    assert contents[0].startswith("[Zerg] 5 older message(s)") and contents[1] == "message 5"
    assert contents[-2:] == [f"message {quick.THREAD_MESSAGES + 4}", "how tall is mount everest"]


def test_quick_model_setting_is_used(runtime_env, alice, llm):
    runtime_env(ZERG_QUICK_MODEL="gpt-quick-test")
    llm.script({"content": "42"})
    assert call("POST", QUICK, {"utterance": "meaning of life"}, token=login(alice))[0] == 200
    assert llm.requests[0]["model"] == "gpt-quick-test"


def _remember(token, path, content):
    status, body, _ = call("PUT", f"/api/jarvis/memory/file?path={quote(path, safe='')}", {"content": content},
                           token=token)
    assert status in (200, 201), body


def test_what_do_you_remember_reads_only_the_owners_memory_fenced_as_data(tokens, llm, pool, alice, bob):
    _remember(tokens[0], "infra/backup.md", "The backup server is cube, it runs restic nightly.")
    _remember(tokens[1], "infra/backup.md", "bob-secret: the backup server is vault9")
    llm.script({"content": "You told me the backup server is cube, running restic nightly."})
    status, body, _ = call("POST", QUICK, {"utterance": "What do you remember about the backup server?"},
                           token=tokens[0])
    assert status == 200 and body["answer"].startswith("You told me"), body
    (request,) = llm.requests
    memory = next(m["content"] for m in request["messages"] if "restic" in (m.get("content") or ""))
    assert memory.startswith(f"<<<{WORD} ") and "memory recall" in memory  # a fenced, labelled user message
    assert "bob-secret" not in str(request) and "vault9" not in str(request)
    assert request["messages"][-1] == {"role": "user", "content": "What do you remember about the backup server?"}


def test_nothing_remembered_is_said_without_a_model_call(tokens, llm, pool, alice):
    status, body, _ = call("POST", QUICK, {"utterance": "what do you remember about zebras?"}, token=tokens[0])
    assert (status, body["answer"]) == (200, "I don't remember anything about zebras."), body
    assert llm.requests == [] and len(thread_rows(pool, alice.owner_id)) == 2


@pytest.mark.parametrize(("status", "said"), [("failed", "failed"), ("timeout", "timed out")])
def test_after_a_failed_run_the_quick_answer_starts_with_an_apology(tokens, llm, pool, alice, status, said):
    run_id, _ = make_run(pool, alice.owner_id, "check the disks")
    set_status(pool, run_id, status)
    llm.script({"content": "Disks are usually checked with df -h."})
    code, body, _ = call("POST", QUICK, {"utterance": "are my disks ok", "failed_run_id": run_id}, token=tokens[0])
    assert code == 200, body
    assert body["answer"] == (f"Sorry, the deeper check (run {run_id}) {said}, so here is a quick answer instead.\n\n"
                              "Disks are usually checked with df -h.")
    assert thread_rows(pool, alice.owner_id)[-1]["metadata"] == {"mode": "quick", "failed_run_id": run_id}


def test_failed_run_id_of_another_owner_is_404_of_a_running_run_409_and_nothing_is_stored(
        tokens, llm, pool, alice, bob):
    bobs_run, _ = make_run(pool, bob.owner_id, "check")
    set_status(pool, bobs_run, "failed")
    status, body, _ = call("POST", QUICK, {"utterance": "hi", "failed_run_id": bobs_run}, token=tokens[0])
    assert (status, body) == (404, {"error": "not_found", "message": f"run {bobs_run} not found"})
    running, _ = make_run(pool, alice.owner_id, "check")
    status, body, _ = call("POST", QUICK, {"utterance": "hi", "failed_run_id": running}, token=tokens[0])
    assert status == 409 and body["error"] == "conflict" and "is running" in body["message"]
    assert llm.requests == [] and thread_rows(pool, alice.owner_id) == []


def test_a_run_stopped_at_its_budget_gets_no_quick_answer_in_its_place(tokens, llm, pool, alice):
    run_id, _ = make_run(pool, alice.owner_id, "check the disks")
    with pool.connection() as conn:
        conn.execute("UPDATE runs SET status = 'failed', budget_stopped_at = now() WHERE id = %s", (run_id,))
    status, body, _ = call("POST", QUICK, {"utterance": "are my disks ok", "failed_run_id": run_id}, token=tokens[0])
    assert (status, body["error"]) == (409, "budget_reached") and "stopped at its budget" in body["message"]
    assert llm.requests == [] and thread_rows(pool, alice.owner_id) == []


@pytest.mark.parametrize("said", ["HAND-OFF", " hand-off. ", "`HAND-OFF`"])
def test_a_hand_off_is_409_needs_supervisor_and_nothing_is_stored(tokens, llm, pool, alice, said):
    llm.script({"content": said})
    status, body, _ = call("POST", QUICK, {"utterance": "is my disk full"}, token=tokens[0])
    assert (status, body["error"]) == (409, "needs_supervisor"), body
    assert "supervisor" in body["message"] and "nothing was stored" in body["message"]
    assert "HAND-OFF" in llm.requests[0]["messages"][0]["content"]  # the prompt asks for the word
    assert thread_rows(pool, alice.owner_id) == []  # no hand-off sentence on the thread


def test_a_hand_off_standing_in_for_a_failed_run_is_a_sentence_not_a_loop(tokens, llm, pool, alice):
    run_id, _ = make_run(pool, alice.owner_id, "check the disk")
    set_status(pool, run_id, "failed")
    llm.script({"content": "HAND-OFF"})
    status, body, _ = call("POST", QUICK, {"utterance": "check the disk", "failed_run_id": run_id}, token=tokens[0])
    assert status == 200, body
    assert body["answer"] == f"{quick.apology(run_id, 'failed')}\n\n{quick.NEEDS_TOOLS}"
    assert "HAND-OFF" not in thread_rows(pool, alice.owner_id)[-1]["content"]


@pytest.mark.parametrize("answer", [{"status": 503, "message": "overloaded"}, {"delay": 3.0, "content": "late"},
                                    {"content": "   "}])
def test_the_model_down_slow_or_empty_is_503_and_the_thread_is_untouched(tokens, llm, pool, alice, answer):
    llm.script(answer)
    status, body, _ = call("POST", QUICK, {"utterance": "how tall is mount everest"}, token=tokens[0])
    assert status == 503 and body["error"] == "unavailable", body
    assert "nothing was stored" in body["message"] and "Traceback" not in body["message"]
    assert thread_rows(pool, alice.owner_id) == []


def test_the_spending_cap_stops_the_quick_call_with_429(tokens, llm, pool, alice):
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(daily_usd_cap=0))
    status, body, _ = call("POST", QUICK, {"utterance": "how tall is mount everest"}, token=tokens[0])
    assert status == 429 and body["error"] == "spending_cap_reached" and "no quick answer" in body["message"]
    assert llm.requests == [] and thread_rows(pool, alice.owner_id) == []


@pytest.mark.parametrize(("body", "message"), [
    ({}, "utterance: Field required"),
    ({"utterance": " "}, "utterance: Value error, must not be blank"),
    ({"utterance": "x" * 4001}, "utterance: String should have at most 4000 characters"),
    ({"utterance": "hi", "failed_run_id": 0}, "failed_run_id: Input should be greater than or equal to 1"),
    ({"utterance": "hi", "failed_run_id": "x"},
     "failed_run_id: Input should be a valid integer, not text"),
])
def test_bad_quick_bodies_are_422_naming_the_field(tokens, llm, pool, alice, body, message):
    assert call("POST", QUICK, body, token=tokens[0])[:2] == (422, {"error": "validation_error", "message": message})
    assert llm.requests == [] and thread_rows(pool, alice.owner_id) == []


def test_a_later_supervisor_run_sees_the_quick_turn_on_the_thread(api_server, llm, alice):
    from httpx_sse import connect_sse

    from tests.support.api import http_login
    from tests.support.scripts import run_script

    base, _ = api_server
    client = http_login(base, alice)
    llm.script({"content": "Your cat is called Miso."})
    assert client.post(QUICK, json={"utterance": "my cat is called Miso, remember?"}).status_code == 200
    llm.respond_with(run_script(["Check disk"], answer=lambda r: "Disk fine."))
    run = client.post("/api/jarvis/supervisor", json={"task": "check the disk"}).json()
    with connect_sse(client, "GET", run["stream_url"]) as source:
        assert [e.event for e in source.iter_sse() if e.id][-1] == "supervisor_complete"
    supervisor = next(r for r in llm.requests[1:] if any(t["function"]["name"] == "spawn_worker"
                                                       for t in r.get("tools") or []))
    said = [(m["role"], m["content"]) for m in supervisor["messages"]]
    assert ("user", "my cat is called Miso, remember?") in said and ("assistant", "Your cat is called Miso.") in said


def test_offline_quick_mode_answers_without_a_model(runtime_env, monkeypatch, alice, pool):
    from zerg import config, wiring

    runtime_env(ZERG_EMBEDDINGS="off")
    monkeypatch.delenv("OPENAI_BASE_URL")  # no key, no endpoint: the offline playbook
    config.get_settings.cache_clear()
    wiring.reset_runtime()
    token = login(alice)
    _remember(token, "infra/backup.md", "The backup server is cube.")
    status, body, _ = call("POST", QUICK, {"utterance": "how tall is mount everest"}, token=token)
    assert (status, body["answer"]) == (200, quick.OFFLINE_ANSWER)
    status, body, _ = call("POST", QUICK, {"utterance": "what do you remember about the backup server"}, token=token)
    assert status == 200 and body["answer"].startswith("Here is what I remember about the backup server:\n")
    assert "The backup server is cube" in body["answer"] and "[MEMORY CONTEXT]" not in body["answer"]
    assert ledger(pool, alice.owner_id) == []
