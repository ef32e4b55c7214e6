"""Recall: the [MEMORY CONTEXT] layer (owner-scoped, bounded, fenced, never stored), "remember that"
notes written before the first model call, and the must-show: a fact remembered in run 1 is in the
memory layer of run 2's supervisor request while the thread never holds the layer."""

from __future__ import annotations

import json
import pytest

from tests.support.factories import make_run
from tests.support.scripts import memory_call, role_of
from zerg.llm.untrusted import WORD, fenced_parts
from zerg.memory import facts, filesystem, notes, recall
from zerg.runs import store as runs
from zerg.supervisor import turn


def layer_of(request: dict) -> dict | None:
    """The request's memory-layer message (the one fenced message holding [MEMORY CONTEXT]; the
    system prompt names the block too)."""
    return next((m for m in request["messages"] if m["role"] != "system" and recall.HEADER in (m.get("content") or "")), None)


def run_through_engine(engine, pool, owner_id, task) -> dict:
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, task)
    desc = engine.wait(engine.start_execution(started.run_id, owner_id, started.thread_id), timeout=60)
    assert desc["status"] == "SUCCEEDED", desc
    assert engine.drain(timeout=60)  # the Remember step (asynchronous) is done too
    with pool.connection() as conn:
        return runs.get_run(conn, owner_id, started.run_id)


def test_a_fact_remembered_in_run_1_is_in_the_memory_layer_of_run_2_and_never_on_the_thread(
        runtime_env, llm, engine, pool, owner):
    runtime_env()

    def respond(request):
        if memory_call(request) == "facts":
            return {"content": "[]"}  # so "cube" in run 2 can only come from the note file
        if memory_call(request) == "episode":
            return {"content": json.dumps({"title": "Backup server name", "topic": "home lab", "outcome": "Noted",
                                           "bullets": ["a", "b", "c"], "tags": ["backup"]})}
        if "what is the backup server" in json.dumps(request["messages"]):
            return {"content": "Your backup server is called cube."}
        return {"content": "Noted."}

    llm.respond_with(respond)
    first = run_through_engine(engine, pool, owner, "Remember that the backup server is called cube")
    second = run_through_engine(engine, pool, owner, "what is the backup server?")
    assert (first["result"], second["result"]) == ("Noted.", "Your backup server is called cube.")

    (plan_2,) = [r for r in llm.requests if role_of(r) == "supervisor"
                 and {"role": "user", "content": "what is the backup server?"} in r["messages"]]
    layer = layer_of(plan_2)
    assert layer is not None and layer["role"] == "user"
    assert layer["content"].startswith(f"<<<{WORD} ") and "memory recall" in layer["content"].splitlines()[0]
    (inside,) = fenced_parts(layer["content"])
    assert inside.startswith(recall.HEADER) and "cube" in inside
    note = next(p for p in inside.split() if p.startswith("notes/") and p.endswith("-the-backup-server-is-called-cube.md"))
    assert f"written by user in run {first['id']}" in inside, inside
    assert [m for m in plan_2["messages"] if "cube" in (m.get("content") or "") and m["role"] == "system"] == []

    with pool.connection() as conn:
        stored = conn.execute("SELECT content FROM thread_messages WHERE owner_id = %s", (owner,)).fetchall()
        working = [runs.get_run(conn, owner, r["id"])["working_messages"] for r in (first, second)]
    assert len(stored) == 4 and not any(recall.HEADER in m["content"] for m in stored)
    assert not [m for w in working for m in w if m["role"] != "system" and recall.HEADER in json.dumps(m)]
    assert filesystem.read(runtime_env(), owner, note).content == "Remember that the backup server is called cube"


def test_remember_that_is_written_before_the_first_model_call_with_no_model_call_of_its_own(
        runtime_env, llm, pool, owner):
    rt = runtime_env()
    task = "Check the NAS. Remember that the NAS is called cube! Keep in mind: I am on call this week"
    run_id, thread_id = make_run(pool, owner, task)
    seen = []

    def respond(request):  # what exists in memory at the moment of the first model call
        seen.append(sorted(f.path for f in filesystem.ls(rt, owner, "notes/").files))
        return {"content": "Noted both."}

    llm.respond_with(respond)
    assert turn.plan(rt, run_id, owner, thread_id) == {"jobs": [], "done": True}
    (request,) = llm.requests  # the supervisor's own call, nothing else
    (paths,) = seen
    assert len(paths) == 2 and any(p.endswith("-the-nas-is-called-cube.md") for p in paths)
    note = filesystem.read(rt, owner, next(p for p in paths if p.endswith("-the-nas-is-called-cube.md")))
    assert note.content == "Remember that the NAS is called cube!" and note.tags == ["remembered"]
    assert (note.writer, note.writer_run_id, note.title) == ("user", run_id, "the NAS is called cube")
    zerg_line = request["messages"][-1]
    assert zerg_line["role"] == "user" and zerg_line["content"].startswith("[Zerg] Saved to the owner's memory as notes/")
    assert request["messages"][-2] == {"role": "user", "content": task}

    assert turn.plan(rt, run_id, owner, thread_id)["done"]  # a repeated plan writes no second note
    assert len(filesystem.ls(rt, owner, "notes/").files) == 2


def test_only_sentences_that_ask_to_remember_become_notes():
    assert notes.explicit_notes("remember when we fixed cube?") == []  # a question, not a request
    assert notes.explicit_notes("Please remember that backups run at 2am.")[0][1] == "backups run at 2am."
    assert [r for _, r in notes.explicit_notes("SAVE THIS: the VPN key rotates monthly")] == ["the VPN key rotates monthly"]
    assert notes.explicit_notes("I want you to remember that") == [] and notes.explicit_notes("Remember that") == []


def test_the_layer_shows_profile_files_and_top_memories_and_nothing_of_another_owner(runtime_env, pool, owner, other_owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")  # full-text only: which method finds the file is then certain
    run_id, _ = make_run(pool, owner)
    filesystem.write(rt, owner, "projects/cube/status.md", "The backup server cube runs restic nightly.",
                     writer="worker", run_id=run_id)
    filesystem.write(rt, other_owner, "notes/theirs.md", "Their backup server is called zeus.", writer="user")
    with pool.connection() as conn:
        facts.add_fact(conn, owner, "profile", "Lives in Lisbon", importance=9)
        facts.add_fact(conn, owner, "decision", "Backups go to cube", importance=7)
        facts.add_fact(conn, other_owner, "profile", "Lives in Oslo", importance=10)
    layer = recall.memory_layer(rt, owner, "how are the backup server's backups doing?")
    assert layer.startswith(recall.HEADER)
    assert f"- projects/cube/status.md (written by worker in run {run_id}; found by fulltext)\n" \
           "  The backup server cube runs restic nightly" in layer
    assert "Lives in Lisbon" in layer and "[#" in layer and "decision] Backups go to cube" in layer
    assert "zeus" not in layer and "Oslo" not in layer
    assert recall.memory_layer(rt, other_owner, "anything at all") is not None
    assert "cube" not in recall.memory_layer(rt, other_owner, "how are the backup server's backups doing?")


def test_an_owner_without_memories_gets_no_layer_and_recall_failures_never_raise(runtime_env, owner, monkeypatch):
    rt = runtime_env()
    assert recall.memory_layer(rt, owner, "check disk") is None

    def broken(*args, **kwargs):
        raise RuntimeError("search exploded")

    monkeypatch.setattr(filesystem, "search", broken)
    with rt.pool.connection() as conn:
        facts.add_fact(conn, owner, "profile", "Call them Sam", importance=8)
    layer = recall.memory_layer(rt, owner, "check disk")  # what could be gathered
    assert "Call them Sam" in layer and "Memory files" not in layer


def test_the_layer_is_bounded_and_drops_general_memories_first_then_files_then_profile():
    hits = [{"path": f"notes/{i}.md", "title": "t", "snippet": "s" * 300, "method": "fulltext", "writer": "user",
             "run_id": None} for i in range(3)]
    row = {"id": 1, "tags": [], "category": "fact", "content": "x" * 300}
    layer = recall.render(hits, [{**row, "category": "profile"}] * 20, [row] * 10, max_bytes=8_000)
    assert len(layer.encode()) <= 8_000
    assert layer.count("[#1] ") == 20  # every profile memory kept
    tight = recall.render(hits, [{**row, "category": "profile"}] * 20, [row] * 10, max_bytes=7_000)
    assert "Organisational memory" not in tight and tight.count("[#1] ") == 20 and len(tight.encode()) <= 7_000


def test_the_layer_fits_its_share_of_the_context_budget_keeping_the_profile(runtime_env, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off", ZERG_CONTEXT_BUDGET_BYTES="40000")
    with pool.connection() as conn:
        for i in range(20):
            facts.add_fact(conn, owner, "profile", f"Profile fact {i} " + "p" * 200, importance=9)
        for i in range(10):
            facts.add_fact(conn, owner, "fact", f"General fact {i} " + "g" * 200, importance=5)
    layer = recall.memory_layer(rt, owner, "anything")
    assert len(layer.encode()) <= recall.layer_bytes(40_000) < 4_000
    assert "Profile fact 19" in layer and "General fact" not in layer  # general memories go first


def test_recall_runs_once_per_supervisor_invocation_and_joins_every_inference_of_it(runtime_env, llm, pool, owner, monkeypatch):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    with pool.connection() as conn:
        facts.add_fact(conn, owner, "profile", "Call them Sam", importance=8)
    calls = []
    real = recall.memory_layer
    monkeypatch.setattr(recall, "memory_layer", lambda *a: calls.append(a) or real(*a))
    run_id, thread_id = make_run(pool, owner, "what time is it?")
    llm.script({"tool_calls": [("get_current_time", {})]}, {"content": "Noon, Sam."})
    assert turn.plan(rt, run_id, owner, thread_id)["done"]
    assert len(calls) == 1 and len(llm.requests) == 2  # two inferences, one recall
    assert all("Call them Sam" in layer_of(r)["content"] for r in llm.requests)


@pytest.mark.parametrize("said", ["Remember that the NAS\tis cube", "Remember that the NAS is cu\u200bbe",
                                  "Remember that the NAS is \u202ecube\u202c"])
def test_a_note_with_a_tab_zero_width_or_bidi_character_is_saved_as_said(runtime_env, pool, owner, said):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    run_id, _ = make_run(pool, owner, said)
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, run_id)
    (outcome,) = notes.remember_explicit(rt, run)
    assert outcome.path and outcome.error is None
    f = filesystem.read(rt, owner, outcome.path)
    assert f.content == said and f.writer == "user"  # the sentence as given
    assert f.title.startswith("the NAS is cu") and all(ch.isprintable() for ch in f.title)
    assert notes.saved_line([outcome]).startswith("[Zerg] Saved to the owner's memory as notes/")


def test_a_note_that_cannot_be_saved_is_named_to_the_model_as_not_saved(runtime_env, pool, owner, monkeypatch):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    run_id, _ = make_run(pool, owner, "Remember that the NAS is cube. Keep in mind that backups run at 2am.")
    with pool.connection() as conn:
        run = runs.get_run(conn, owner, run_id)
    real_write = filesystem.write

    def refuse_backups(rt_, owner_id, path, content, **kw):
        if "backups" in content:
            raise filesystem.MemoryInputError("content is 300000 bytes; at most 262144 (256 KiB) per memory file")
        return real_write(rt_, owner_id, path, content, **kw)

    monkeypatch.setattr(filesystem, "write", refuse_backups)
    saved, failed = notes.remember_explicit(rt, run)
    assert saved.path and failed.path is None and "256 KiB" in failed.error
    line = notes.saved_line([saved, failed])
    assert line.startswith(f"[Zerg] Saved to the owner's memory as {saved.path}")
    assert "NOT saved to memory, though the user asked: 'Keep in mind that backups run at 2am.'" in line
    assert "Tell the user it was not saved and why." in line and "acknowledge it briefly" not in line
