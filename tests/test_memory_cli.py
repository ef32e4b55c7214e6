"""``zerg memory``: ls, cat, write, rm, search, versions, restore for the local owner or --owner;
exit 0 done, 1 not found, 2 bad input, one line on stderr and never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from tests.support.factories import unique_name
from zerg.cli.main import main
from zerg.memory import filesystem as fs
from zerg.owners import local_owner


@pytest.fixture
def rt(runtime_env):
    return runtime_env(ZERG_EMBEDDINGS="off")  # full text only, unless a test gives an embedder


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_write_cat_ls_search_rm_versions_restore_for_another_local_owner(rt, alice, monkeypatch, capsys, tmp_path):
    who = ["--owner", alice.name]
    stdin(monkeypatch, "# Backup\nThe backup server is called cube. Ünïcode.\n".encode())
    assert main(["memory", "write", "notes/backup.md", "--tag", "Infra", *who]) == 0
    assert capsys.readouterr().out == "created notes/backup.md (54 bytes)\n"
    source = tmp_path / "v2.md"
    source.write_text("# Backup\nNow cube2.\n")
    assert main(["memory", "write", "notes/backup.md", "--file", str(source), "--title", "Backup host", *who]) == 0
    assert "replaced notes/backup.md" in capsys.readouterr().out

    assert main(["memory", "cat", "notes/backup.md", *who]) == 0
    assert capsys.readouterr().out == "# Backup\nNow cube2.\n"  # exactly as stored
    assert main(["memory", "ls", "notes/", *who]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("notes/backup.md\t20\tuser\t") and line.endswith("\tinfra\tBackup host")
    assert main(["memory", "search", "cube2", "--tag", "infra", *who]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("notes/backup.md\tfulltext\t") and "full-text search only" in captured.err

    assert main(["memory", "rm", "notes/backup.md", *who]) == 0
    assert main(["memory", "cat", "notes/backup.md", *who]) == 1
    assert capsys.readouterr().err.endswith("zerg: memory file 'notes/backup.md' not found\n")
    assert main(["memory", "versions", "notes/backup.md", *who]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[1] for r in rows] == ["delete", "overwrite"]
    assert main(["memory", "restore", "notes/backup.md", rows[1][0], *who]) == 0
    assert fs.read(rt, alice.owner_id, "notes/backup.md").content.startswith("# Backup\nThe backup server")


def test_without_owner_the_commands_act_for_the_local_owner(rt, pool, monkeypatch, capsys):
    path = f"cli/{unique_name('note')}.md"
    stdin(monkeypatch, b"local note")
    assert main(["memory", "write", path]) == 0
    with pool.connection() as conn:
        local = local_owner(conn)
    assert fs.read(rt, local, path).content == "local note" and fs.read(rt, local, path).writer == "user"


@pytest.mark.parametrize(("argv", "message"), [
    (["memory", "cat", "../etc/passwd"], "path segment '..' is not allowed (no '.' or '..' segments)"),
    (["memory", "rm", "/abs"], "path must be relative: remove the leading '/'"),
    (["memory", "ls", "a//"], "prefix: path has an empty segment at position 2 ('//' or a trailing '/')"),
    (["memory", "ls", "--limit", "0"], "limit must be between 1 and 1000, not 0"),
    (["memory", "search", "x", "--limit", "99"], "limit must be between 1 and 50, not 99"),
    (["memory", "search", "x", "--tag", "a b"], "tag 'a b' contains ' ' (U+0020); allowed: letters, digits and - _ . :"),
    (["memory", "write", "a.md", "--file", "/nonexistent/file"], "--file /nonexistent/file: No such file or directory"),
])
def test_bad_input_exits_2_with_one_line(rt, alice, capsys, argv, message):
    assert main([*argv, "--owner", alice.name]) == 2
    assert capsys.readouterr().err == f"zerg: error: {message}\n"


def test_content_that_is_too_big_or_not_utf8_exits_2(rt, alice, monkeypatch, capsys):
    stdin(monkeypatch, b"x" * 262_145)
    assert main(["memory", "write", "a.md", "--owner", alice.name]) == 2
    assert "stdin holds more than 262144 bytes" in capsys.readouterr().err
    stdin(monkeypatch, b"ok \xff")
    assert main(["memory", "write", "a.md", "--owner", alice.name]) == 2
    assert capsys.readouterr().err == "zerg: error: stdin is not UTF-8 text (byte 0xff at offset 3)\n"
    assert main(["memory", "ls", "--owner", "nobody-" + unique_name("x")]) == 2


def test_another_owners_files_are_invisible_to_every_command(rt, alice, bob, capsys):
    fs.write(rt, alice.owner_id, "private/vault.md", "vault code 1234", tags=["secret"], writer="user")
    fs.write(rt, alice.owner_id, "private/vault.md", "vault code 5678", tags=["secret"], writer="user")
    (version,) = fs.versions_of(rt, alice.owner_id, "private/vault.md")
    as_bob = ["--owner", bob.name]
    assert main(["memory", "ls", *as_bob]) == 0 and capsys.readouterr().out == "no memory files\n"
    for argv in (["cat", "private/vault.md"], ["rm", "private/vault.md"], ["versions", "private/vault.md"],
                 ["restore", "private/vault.md", str(version.id)]):
        assert main(["memory", *argv, *as_bob]) == 1, argv
        assert "not found" in capsys.readouterr().err
    assert main(["memory", "search", "vault code", *as_bob]) == 0 and capsys.readouterr().out == "no match\n"
    assert fs.read(rt, alice.owner_id, "private/vault.md").content == "vault code 5678"


def test_the_real_command_pipes_content_in_and_out_without_a_traceback(rt, alice):
    env = dict(os.environ)

    def zerg(*args: str, data: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "zerg.cli", "memory", *args, "--owner", alice.name], input=data,
                              capture_output=True, text=True, timeout=120, env=env)

    assert zerg("write", "piped.md", data="line one\nline two\n").returncode == 0
    out = zerg("cat", "piped.md")
    assert (out.returncode, out.stdout) == (0, "line one\nline two\n")
    bad = zerg("cat", "a\\b")
    assert bad.returncode == 2 and bad.stderr == "zerg: error: path contains a backslash at position 1; separate folders with '/'\n"
    missing = zerg("rm", "nope.md")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
