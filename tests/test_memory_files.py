"""Memory files: paths, writes with versions, edits, deletes, restores, grep, the 30-day prune, and
the owner boundary, through the one service the tools, the API and the CLI share."""

from __future__ import annotations

import pytest

from tests.support.factories import make_run
from zerg.memory import filesystem as fs
from zerg.memory import versions
from zerg.memory.filesystem import MemoryInputError, MemoryNotFound
from zerg.memory.paths import check_path, check_prefix, check_tags


@pytest.fixture
def rt(runtime_env):
    return runtime_env(ZERG_EMBEDDINGS="off")  # full text only, unless a test gives an embedder


# --- paths ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "message"), [
    ("../x", "path segment '..' is not allowed (no '.' or '..' segments)"),
    ("notes/../../etc/passwd", "path segment '..' is not allowed (no '.' or '..' segments)"),
    ("/etc/passwd", "path must be relative: remove the leading '/'"),
    ("a//b", "path has an empty segment at position 2 ('//' or a trailing '/')"),
    ("a/", "path has an empty segment at position 2 ('//' or a trailing '/')"),
    ("a/./b", "path segment '.' is not allowed (no '.' or '..' segments)"),
    ("a/\x00b", "path contains the NUL character at position 2"),
    ("a/b\x1b[31m", "path contains the control or invisible character '\\x1b' (U+001B) at position 3"),
    ("a/b\nc", "path contains the control or invisible character '\\n' (U+000A) at position 3"),
    ("evil\u202etxt.md", "path contains the control or invisible character '\\u202e' (U+202E) at position 4"),
    ("a\\b", "path contains a backslash at position 1; separate folders with '/'"),
    ("a/" + "x" * 600, "path is 602 characters; at most 512"),
    ("a/" + "x" * 101, "path segment 'xxxxxxxxxxxxxxxxxxxx'... is 101 characters; at most 100 per segment"),
    ("notes/$(rm -rf).md", "path contains '$' (U+0024) at position 6; allowed: letters, digits, space and - _ . @ + , ( )"),
    ("notes/*.md", "path contains '*' (U+002A) at position 6; allowed: letters, digits, space and - _ . @ + , ( )"),
    ("a/ b", "path segment ' b' starts or ends with a space"),
    ("/".join("a" * 17), "path has 17 segments; at most 16"),
    ("", "path is empty"),
])
def test_hostile_paths_are_refused_with_a_precise_message(path, message):
    with pytest.raises(MemoryInputError) as exc:
        check_path(path)
    assert str(exc.value) == message


def test_ordinary_paths_in_any_script_are_accepted_in_nfc_form():
    for path in ("episodes/2026-11-22/42-disk-check.md", "notes/café (draft), v2.md", "заметки/план.md",
                 "people/ana@example.com", "projects/zerg/.hidden", "a+b_c.d", "日本/メモ.txt", "हिन्दी/नोट"):
        assert check_path(path) == path
    assert check_path("notes/cafe\u0301.md") == "notes/caf\u00e9.md"  # one file, however "é" is spelled
    assert check_prefix("") == "" and check_prefix("notes/") == "notes/" and check_prefix("notes/2026") == "notes/2026"
    with pytest.raises(MemoryInputError, match="^prefix: path must be relative"):
        check_prefix("/notes/")
    assert check_tags(["Ops", " ops ", "backup", "DNS"]) == ["ops", "backup", "dns"]
    with pytest.raises(MemoryInputError, match="21 tags; at most 20"):
        check_tags([f"t{n}" for n in range(21)])
    with pytest.raises(MemoryInputError, match="tag 'a b' contains ' '"):
        check_tags(["a b"])


# --- writes and versions --------------------------------------------------------------------------

def test_an_overwrite_keeps_the_previous_version_and_an_unchanged_write_keeps_none(rt, owner, pool):
    run_id, _ = make_run(pool, owner)
    first = fs.write(rt, owner, "notes/backup.md", "# Backup\nThe backup server is cube.", tags=["Infra"],
                     writer="worker", run_id=run_id, metadata={"job_id": 7})
    assert first.created and first.changed and first.file.title == "Backup" and first.file.tags == ["infra"]
    again = fs.write(rt, owner, "notes/backup.md", "# Backup\nThe backup server is cube.", writer="supervisor")
    assert not again.created and not again.changed and again.file.writer == "worker"  # nothing written
    assert fs.versions_of(rt, owner, "notes/backup.md") == []

    second = fs.write(rt, owner, "notes/backup.md", "# Backup\nThe backup server is now cube2.", writer="user")
    assert second.changed and not second.created
    current = fs.read(rt, owner, "notes/backup.md")
    assert current.content.endswith("cube2.") and current.writer == "user" and current.writer_run_id is None
    assert current.tags == ["infra"] and current.title == "Backup" and current.metadata == {"job_id": 7}  # kept
    (kept,) = fs.versions_of(rt, owner, "notes/backup.md")
    assert (kept.reason, kept.writer, kept.writer_run_id, kept.tags) == ("overwrite", "worker", run_id, ["infra"])
    assert kept.written_at == first.file.updated_at and kept.size == len("# Backup\nThe backup server is cube.")


def test_a_tag_change_alone_is_a_change(rt, owner):
    fs.write(rt, owner, "t.md", "same", tags=["a"], writer="user")
    assert fs.write(rt, owner, "t.md", "same", tags=["a", "b"], writer="user").changed
    assert [v.tags for v in fs.versions_of(rt, owner, "t.md")] == [["a"]]


def test_a_metadata_change_alone_is_a_change_and_restoring_it_brings_it_back(rt, owner):
    fs.write(rt, owner, "m.md", "same", metadata={"source": "a"}, writer="user")
    assert not fs.write(rt, owner, "m.md", "same", metadata={"source": "a"}, writer="user").changed
    assert fs.write(rt, owner, "m.md", "same", metadata={"source": "b"}, writer="user").changed
    (kept,) = fs.versions_of(rt, owner, "m.md")
    back = fs.restore(rt, owner, "m.md", kept.id, writer="user")  # differs from the file in metadata only
    assert back.changed and back.file.metadata == {"source": "a"}
    assert fs.read(rt, owner, "m.md").metadata == {"source": "a"}
    assert [v.reason for v in fs.versions_of(rt, owner, "m.md")] == ["restore", "overwrite"]


def test_edit_replaces_one_exact_occurrence_and_refuses_none_or_several(rt, owner):
    fs.write(rt, owner, "hosts.md", "cube: backups\nbox: web\nbox: db\n", writer="user")
    with pytest.raises(MemoryInputError, match="the old text does not occur in 'hosts.md'"):
        fs.edit(rt, owner, "hosts.md", "Cube", "x", writer="supervisor")
    with pytest.raises(MemoryInputError, match="the old text occurs 2 times in 'hosts.md'"):
        fs.edit(rt, owner, "hosts.md", "box:", "x", writer="supervisor")
    with pytest.raises(MemoryNotFound, match="memory file 'nope.md' not found"):
        fs.edit(rt, owner, "nope.md", "a", "b", writer="supervisor")
    out = fs.edit(rt, owner, "hosts.md", "box: db", "box: database", writer="supervisor")
    assert out.file.content == "cube: backups\nbox: web\nbox: database\n" and out.file.writer == "supervisor"
    assert [v.reason for v in fs.versions_of(rt, owner, "hosts.md")] == ["edit"]


def test_delete_keeps_the_content_restorable_and_a_restore_can_be_undone(rt, owner):
    fs.write(rt, owner, "plan.md", "v1", writer="user")
    fs.write(rt, owner, "plan.md", "v2", writer="supervisor")
    fs.delete(rt, owner, "plan.md")
    with pytest.raises(MemoryNotFound):
        fs.read(rt, owner, "plan.md")
    with pytest.raises(MemoryNotFound):
        fs.delete(rt, owner, "plan.md")
    deleted, overwritten = fs.versions_of(rt, owner, "plan.md")  # the deleted file's versions outlive it
    assert (deleted.reason, overwritten.reason) == ("delete", "overwrite")

    back = fs.restore(rt, owner, "plan.md", overwritten.id, writer="user")
    assert back.created and back.file.content == "v1" and back.file.writer == "user"
    fs.restore(rt, owner, "plan.md", deleted.id, writer="user")
    assert fs.read(rt, owner, "plan.md").content == "v2"
    assert [v.reason for v in fs.versions_of(rt, owner, "plan.md")] == ["restore", "delete", "overwrite"]
    with pytest.raises(MemoryNotFound, match=f"version {deleted.id} of memory file 'other.md' not found"):
        fs.restore(rt, owner, "other.md", deleted.id, writer="user")  # the version is of another path


def test_versions_older_than_30_days_are_hidden_then_pruned(rt, owner, other_owner, pool):
    for who in (owner, other_owner):
        fs.write(rt, who, "old.md", "a", writer="user")
        fs.write(rt, who, "old.md", "b", writer="user")
        fs.write(rt, who, "old.md", "c", writer="user")
    old = fs.versions_of(rt, owner, "old.md")[-1]
    with pool.connection() as conn:
        conn.execute("UPDATE memory_file_versions SET replaced_at = now() - interval '31 days' "
                     "WHERE owner_id = ANY(%s) AND path = 'old.md' AND content = 'a'", ([owner, other_owner],))
    assert [v.reason for v in fs.versions_of(rt, owner, "old.md")] == ["overwrite"]  # 30 days, not "until pruned"
    with pytest.raises(MemoryNotFound):
        fs.restore(rt, owner, "old.md", old.id, writer="user")
    with pool.connection() as conn:
        pruned = versions.prune(conn)
        left = conn.execute("SELECT owner_id, content FROM memory_file_versions WHERE owner_id = ANY(%s) ORDER BY owner_id",
                            ([owner, other_owner],)).fetchall()
    assert pruned >= 2 and [r["content"] for r in left] == ["b", "b"]


def test_bad_input_is_refused_before_the_database(rt, owner):
    with pytest.raises(MemoryInputError, match="content is 262145 bytes; at most 262144"):
        fs.write(rt, owner, "big.md", "x" * 262_145, writer="user")
    assert fs.write(rt, owner, "big.md", "x" * 262_144, writer="user").created  # exactly the limit
    with pytest.raises(MemoryInputError, match="title is 256 characters; at most 255"):
        fs.write(rt, owner, "t.md", "x", title="t" * 256, writer="user")
    with pytest.raises(MemoryInputError, match="content contains the NUL character at position 1"):
        fs.write(rt, owner, "t.md", "a\x00", writer="user")
    with pytest.raises(MemoryInputError, match="metadata is 5009 bytes as JSON; at most 4096"):
        fs.write(rt, owner, "t.md", "x", metadata={"k": "v" * 5000}, writer="user")
    with pytest.raises(ValueError, match="writer must be one of user, supervisor, worker, system"):
        fs.write(rt, owner, "t.md", "x", writer="admin")
    with pytest.raises(MemoryInputError, match="limit must be between 1 and 1000"):
        fs.ls(rt, owner, "", limit=0)


def test_ls_lists_by_prefix_in_path_order_with_sizes_and_a_total(rt, owner):
    for path in ("notes/b.md", "notes/a.md", "episodes/2026-01-01/1-x.md", "notes-old.md"):
        fs.write(rt, owner, path, "héllo", writer="user")
    listing = fs.ls(rt, owner, "notes/")
    assert [f.path for f in listing.files] == ["notes/a.md", "notes/b.md"] and listing.total == 2
    assert listing.files[0].size == 6 and listing.files[0].content is None
    assert [f.path for f in fs.ls(rt, owner, "notes").files] == ["notes-old.md", "notes/a.md", "notes/b.md"]
    two = fs.ls(rt, owner, "", limit=2)
    assert len(two.files) == 2 and two.total == 4


def test_a_read_records_the_access(rt, owner, pool):
    fs.write(rt, owner, "r.md", "x", writer="user")
    with pool.connection() as conn:
        before = conn.execute("SELECT last_accessed_at FROM memory_files WHERE owner_id = %s", (owner,)).fetchone()
    fs.read(rt, owner, "r.md")
    with pool.connection() as conn:
        after = conn.execute("SELECT last_accessed_at FROM memory_files WHERE owner_id = %s", (owner,)).fetchone()
    assert before["last_accessed_at"] is None and after["last_accessed_at"] is not None


# --- grep -----------------------------------------------------------------------------------------

def test_grep_is_a_bounded_case_insensitive_regex_over_lines(rt, owner):
    fs.write(rt, owner, "logs/a.md", "\n".join(f"line {n} ERROR disk" for n in range(80)), writer="user")
    fs.write(rt, owner, "notes/b.md", "ok\nan error here: " + "y" * 500 + "\nfine", writer="user")
    out = fs.grep(rt, owner, r"err(or)?\s", "notes/")
    (match,) = out.matches
    assert (match.path, match.line_no, match.cut, len(match.line)) == ("notes/b.md", 2, True, 200)
    assert not out.limited
    everything = fs.grep(rt, owner, "error")
    assert len(everything.matches) == 50 and everything.limited
    assert everything.matches[0].path == "logs/a.md" and everything.matches[0].line_no == 1


@pytest.mark.parametrize(("pattern", "lines"), [
    ("^foo", [("a.md", 2), ("a.md", 3)]), ("bar$", [("a.md", 2), ("b.md", 1)]), ("^foo bar$", [("a.md", 2)]),
    ("(?i)^FOO BAR$", [("a.md", 2)]), ("^bar", []), ("x.foo", []),  # '.' never crosses a line
])
def test_grep_anchors_match_at_each_line(rt, owner, pattern, lines):
    fs.write(rt, owner, "a.md", "intro x\nfoo bar\nfoo baz\nend", writer="user")
    fs.write(rt, owner, "b.md", "a bar", writer="user")
    assert [(m.path, m.line_no) for m in fs.grep(rt, owner, pattern).matches] == lines


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "[z-a]", "(?P<name>x)"])
def test_grep_with_an_invalid_regex_is_a_clear_error(rt, owner, pattern):
    fs.write(rt, owner, "a.md", "x", writer="user")
    with pytest.raises(MemoryInputError, match=r"^invalid regular expression"):
        fs.grep(rt, owner, pattern)
    assert fs.grep(rt, owner, "x").matches  # the pool's connection is fine afterwards


# --- the owner boundary ---------------------------------------------------------------------------

def test_another_owners_files_do_not_exist_for_any_operation(rt, owner, other_owner):
    fs.write(rt, owner, "secret.md", "the vault code is 1234", tags=["private"], writer="user")
    fs.write(rt, owner, "secret.md", "the vault code is 5678", writer="user")
    (version,) = fs.versions_of(rt, owner, "secret.md")

    assert fs.ls(rt, other_owner).files == [] and fs.ls(rt, other_owner).total == 0
    for call in (lambda: fs.read(rt, other_owner, "secret.md"),
                 lambda: fs.edit(rt, other_owner, "secret.md", "vault", "x", writer="user"),
                 lambda: fs.delete(rt, other_owner, "secret.md"),
                 lambda: fs.versions_of(rt, other_owner, "secret.md"),
                 lambda: fs.restore(rt, other_owner, "secret.md", version.id, writer="user")):
        with pytest.raises(MemoryNotFound):
            call()
    assert fs.grep(rt, other_owner, "vault").matches == []
    assert fs.search(rt, other_owner, "vault code").hits == []
    # Writing "over" it creates the other owner's own file; the first owner's is untouched.
    mine = fs.write(rt, other_owner, "secret.md", "mine", writer="user")
    assert mine.created and fs.read(rt, owner, "secret.md").content == "the vault code is 5678"
    assert len(fs.versions_of(rt, owner, "secret.md")) == 1 and fs.versions_of(rt, other_owner, "secret.md") == []


def test_the_daily_housekeeping_event_prunes_old_versions_on_aws(rt, owner, pool):
    from functions.events.handler import handler

    fs.write(rt, owner, "aws.md", "a", writer="user")
    fs.write(rt, owner, "aws.md", "b", writer="user")
    with pool.connection() as conn:
        conn.execute("UPDATE memory_file_versions SET replaced_at = now() - interval '40 days' WHERE owner_id = %s",
                     (owner,))
    out = handler({"trigger": "housekeeping", "task": "memory-versions"}, None)
    assert out["task"] == "memory-versions" and out["result"]["complete"] is True
    assert out["result"]["memory_versions_pruned"] >= 1
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM memory_file_versions WHERE owner_id = %s", (owner,)).fetchone()["n"] == 0
