"""The memory tools: the supervisor's full set and the workers' narrow one, owner-scoped, writer
recorded, what a model may change limited by who wrote the file, every change a run event, bounded,
errors as text."""

from __future__ import annotations

import json

import pytest

from functions.worker.handler import handler as worker_handler
from tests.support.factories import make_job, make_run
from zerg.loop.tool import ToolContext, invoke
from zerg.memory import filesystem as fs
from zerg.runs import events
from zerg.supervisor.turn import supervisor_tools
from zerg.tools.catalog import worker_tools
from zerg.tools.memory_tools import TOOLS

MEMORY = {t.name: t for t in TOOLS}
NAMES = {"memory_ls", "memory_read", "memory_write", "memory_edit", "memory_grep", "memory_search", "memory_delete"}


@pytest.fixture
def rt(runtime_env):
    return runtime_env(ZERG_EMBEDDINGS="off")  # full text only, unless a test gives an embedder


def call(rt, owner_id, name, agent="supervisor", run_id=None, **args):
    ctx = ToolContext(settings=rt.settings, owner_id=owner_id, runtime=rt, agent=agent, run_id=run_id)
    return invoke(MEMORY, name, json.dumps(args), ctx)


def test_the_supervisor_has_every_memory_tool_and_workers_only_read_and_write():
    assert NAMES <= set(supervisor_tools())
    assert {n for n in worker_tools() if n.startswith("memory_")} == NAMES - {"memory_edit", "memory_delete"}
    search = MEMORY["memory_search"].schema()["function"]
    assert "ALL of the given tags" in search["description"]
    assert search["parameters"]["additionalProperties"] is False


def test_write_read_edit_ls_grep_search_delete_round_trip(rt, owner, pool):
    run_id, _ = make_run(pool, owner)
    out = call(rt, owner, "memory_write", run_id=run_id, path="notes/backup.md",
               content="# Backup\nThe backup server is called cube.", tags=["infra"])
    assert out.ok and out.text == "created notes/backup.md (42 bytes)"
    assert call(rt, owner, "memory_write", path="notes/backup.md",
                content="# Backup\nThe backup server is called cube.").text == "notes/backup.md unchanged (same content and tags)."
    read = call(rt, owner, "memory_read", path="notes/backup.md").text
    assert read.startswith(f"notes/backup.md (42 bytes, written by supervisor in run {run_id}, updated ")
    assert "tags: infra)\ntitle: Backup\n---\n# Backup\nThe backup server is called cube." in read
    assert call(rt, owner, "memory_edit", path="notes/backup.md", old="cube", new="cube2").ok
    assert "- notes/backup.md (43 bytes, supervisor" in call(rt, owner, "memory_ls", prefix="notes/").text
    assert call(rt, owner, "memory_grep", pattern="cube\\d").text == (
        "1 matching lines for 'cube\\\\d':\nnotes/backup.md:2: The backup server is called cube2.")
    found = call(rt, owner, "memory_search", query="backup server", tags=["infra"]).text
    assert "- notes/backup.md — Backup [fulltext]" in found and "(best first; fulltext; no embedder" in found
    assert call(rt, owner, "memory_delete", path="notes/backup.md").text.startswith("deleted notes/backup.md")
    assert call(rt, owner, "memory_ls").text == "No memory files."
    assert [v.reason for v in fs.versions_of(rt, owner, "notes/backup.md")] == ["delete", "edit"]
    with pool.connection() as conn:
        changed = [e["payload"] for e in events.list_events(conn, owner, run_id) if e["event_type"] == "memory_changed"]
    assert changed == [{"memory": "file", "path": "notes/backup.md", "action": "created", "writer": "supervisor"}]
    # (the later calls had no run: nothing to report them in)


def test_every_change_a_model_makes_is_a_run_event(rt, owner, pool):
    run_id, _ = make_run(pool, owner)
    call(rt, owner, "memory_write", run_id=run_id, path="notes/a.md", content="one")
    call(rt, owner, "memory_write", run_id=run_id, path="notes/a.md", content="two")
    call(rt, owner, "memory_edit", run_id=run_id, path="notes/a.md", old="two", new="three")
    call(rt, owner, "memory_write", run_id=run_id, agent="worker", path="notes/w.md", content="seen")
    call(rt, owner, "memory_delete", run_id=run_id, path="notes/a.md")
    with pool.connection() as conn:
        changed = [(e["payload"]["path"], e["payload"]["action"], e["payload"]["writer"])
                   for e in events.list_events(conn, owner, run_id) if e["event_type"] == "memory_changed"]
    assert changed == [("notes/a.md", "created", "supervisor"), ("notes/a.md", "overwritten", "supervisor"),
                       ("notes/a.md", "edited", "supervisor"), ("notes/w.md", "created", "worker"),
                       ("notes/a.md", "deleted", "supervisor")]


def test_a_worker_creates_new_files_and_changes_only_what_workers_wrote(rt, owner, pool):
    run_id, _ = make_run(pool, owner)
    for writer in ("user", "supervisor", "system"):
        fs.write(rt, owner, f"notes/{writer}.md", f"by {writer}", writer=writer)
    for writer in ("user", "supervisor", "system"):
        out = call(rt, owner, "memory_write", agent="worker", run_id=run_id, path=f"notes/{writer}.md", content="pwned")
        assert out.text == (f"ERROR: refused: notes/{writer}.md was written by {writer}; a worker may only create new "
                            "memory files or overwrite ones a worker wrote. Choose another path.")
        assert fs.read(rt, owner, f"notes/{writer}.md").content == f"by {writer}"
    assert call(rt, owner, "memory_write", agent="worker", run_id=run_id, path="notes/found.md", content="v1").ok
    assert call(rt, owner, "memory_write", agent="worker", run_id=run_id, path="notes/found.md", content="v2").ok
    # Not in a worker's toolset; called anyway, they refuse.
    assert call(rt, owner, "memory_edit", agent="worker", path="notes/found.md", old="v2", new="v3").text == (
        "ERROR: refused: a worker may not edit memory files")
    assert call(rt, owner, "memory_delete", agent="worker", path="notes/user.md").text.startswith("ERROR: refused:")
    assert fs.read(rt, owner, "notes/found.md").content == "v2"


def test_the_supervisor_never_changes_a_file_the_user_or_the_system_wrote(rt, owner, pool):
    fs.write(rt, owner, "notes/mine.md", "The NAS is cube", writer="user")
    fs.write(rt, owner, "episodes/2026-01-01/1-x.md", "Episode", writer="system", run_id=None)
    fs.write(rt, owner, "notes/worker.md", "found", writer="worker")
    for path in ("notes/mine.md", "episodes/2026-01-01/1-x.md"):
        assert call(rt, owner, "memory_write", path=path, content="x").text.startswith(f"ERROR: refused: {path} was written by")
        assert call(rt, owner, "memory_edit", path=path, old="e", new="E").text.startswith("ERROR: refused:")
        assert "the user can delete it with the API" in call(rt, owner, "memory_delete", path=path).text
    assert fs.read(rt, owner, "notes/mine.md").content == "The NAS is cube"
    assert call(rt, owner, "memory_edit", path="notes/worker.md", old="found", new="checked").ok  # a worker's: allowed
    assert call(rt, owner, "memory_delete", path="notes/worker.md").ok


def test_a_worker_records_itself_and_its_run_as_the_writer(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "Note the backup host")
    llm.script({"tool_calls": [("memory_write", {"path": "notes/hosts.md", "content": "backup: cube"})]},
               {"content": "Noted."})
    assert worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})["status"] == "success"
    f = fs.read(rt, owner, "notes/hosts.md")
    assert (f.writer, f.writer_run_id, f.content) == ("worker", run_id, "backup: cube")
    assert "written by worker in run" in call(rt, owner, "memory_read", path="notes/hosts.md").text


def test_a_large_file_is_read_in_part_with_a_note(rt, owner):
    fs.write(rt, owner, "big.md", "é" * 100_000, writer="user")  # 200,000 bytes
    text = call(rt, owner, "memory_read", path="big.md").text
    body = text.split("\n---\n", 1)[1]
    assert body.startswith("é" * 32_000) and "é" * 32_001 not in body
    assert body.endswith("[... truncated: 136000 more bytes of 200000; memory_grep finds lines in the rest ...]")


@pytest.mark.parametrize(("name", "args", "message"), [
    ("memory_read", {"path": "../etc/passwd"}, "ERROR: path segment '..' is not allowed (no '.' or '..' segments)"),
    ("memory_write", {"path": "/abs.md", "content": "x"}, "ERROR: path must be relative: remove the leading '/'"),
    ("memory_write", {"path": "a.md", "content": "x", "tags": ["no spaces"]},
     "ERROR: tag 'no spaces' contains ' ' (U+0020); allowed: letters, digits and - _ . :"),
    ("memory_grep", {"pattern": "("}, "ERROR: invalid regular expression '(': missing ), unterminated subpattern at position 0"),
    ("memory_ls", {"prefix": "a//"}, "ERROR: prefix: path has an empty segment at position 2 ('//' or a trailing '/')"),
    ("memory_read", {"path": "missing.md"}, "ERROR: memory file 'missing.md' not found"),
    ("memory_delete", {"path": "missing.md"}, "ERROR: memory file 'missing.md' not found"),
    ("memory_edit", {"path": "missing.md", "old": "a", "new": "b"}, "ERROR: memory file 'missing.md' not found"),
])
def test_bad_input_is_an_error_the_model_can_read(rt, owner, name, args, message):
    out = call(rt, owner, name, **args)
    assert not out.ok and out.text == message


def test_unknown_arguments_are_refused():
    ctx = ToolContext(settings=None, owner_id=1)
    out = invoke(MEMORY, "memory_read", json.dumps({"path": "a.md", "owner_id": 2}), ctx)
    assert not out.ok and "owner_id: Extra inputs are not permitted" in out.text


def test_another_owners_memory_is_invisible_to_every_tool(rt, owner, other_owner):
    call(rt, owner, "memory_write", path="private/vault.md", content="vault code 1234", tags=["secret"])
    call(rt, owner, "memory_write", path="private/vault.md", content="vault code 5678", tags=["secret"])
    them = lambda name, **a: call(rt, other_owner, name, **a).text  # noqa: E731
    assert them("memory_ls") == "No memory files." and them("memory_ls", prefix="private/") == "No memory files under 'private/'."
    assert them("memory_read", path="private/vault.md") == "ERROR: memory file 'private/vault.md' not found"
    assert them("memory_edit", path="private/vault.md", old="vault", new="x") == "ERROR: memory file 'private/vault.md' not found"
    assert them("memory_delete", path="private/vault.md") == "ERROR: memory file 'private/vault.md' not found"
    assert them("memory_grep", pattern="vault") == "No line matches 'vault'."
    assert them("memory_search", query="vault code", tags=["secret"]).startswith("No memory file matches 'vault code'")
    assert them("memory_write", path="private/vault.md", content="mine").startswith("created ")  # their own file
    assert "vault code 5678" in call(rt, owner, "memory_read", path="private/vault.md").text
