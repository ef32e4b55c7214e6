"""The limits of a container_exec call, with real processes at best effort and in the namespace
sandboxes: set by the launcher with setrlimit (whatever /bin/sh is), each stopping what it is for,
and what stopped a command is one ``limit: ...`` line.

Limits are made small through the settings where that keeps a test fast (a 256 MiB address space,
1 CPU second, an 8 MiB tmpfs); the file-size test writes the issue's 60 MiB against the default.
A namespace mechanism this host cannot provide is a visible skip locally and a failure in CI.
"""

from __future__ import annotations

import json

import pytest

from tests.support.sandbox import require
from zerg.config import load_settings
from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, detect, execute

CAP = 1_000_000
MIB = 1 << 20

# A parent that forks a memory hog and reports how the hog ended (1: MemoryError, not a crash).
FORKED_HOG = ("python3 -c \"import os\nchild = os.fork()\nif child == 0:\n    hog = bytearray(2 << 30)\n"
              "    os._exit(0)\nprint('hog exit', os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))\"")


@pytest.fixture(params=[BEST_EFFORT, BWRAP, UNSHARE])
def level(request) -> str:
    return request.param if request.param == BEST_EFFORT else require(request.param)


@pytest.fixture(params=[BWRAP, UNSHARE])
def namespace_level(request) -> str:
    return require(request.param)


def run(command: str, level: str, timeout_s: float = 60, **env: str):
    return execute(command, timeout_s, load_settings(env), output_cap=CAP, mechanism=level)


def limits_of(text: str) -> dict[str, str]:
    """/proc/self/limits as {name: soft limit}."""
    rows = {}
    for line in text.splitlines()[1:]:
        name, soft = line[:26].strip(), line[26:47].strip()
        rows[name] = soft
    return rows


def test_the_limits_are_set_before_the_shell_runs_and_follow_the_settings(level):
    """The command's first process already has them (read from its own /proc entry), from the
    ZERG_SANDBOX_* settings: no shell's ``ulimit`` is involved."""
    out = run("cat /proc/self/limits", level, ZERG_SANDBOX_FILE_MIB="7", ZERG_SANDBOX_MEMORY_MIB="300",
              ZERG_SANDBOX_CPU_S="9")
    rows = limits_of(out.stdout)
    assert out.exit_code == 0, out
    assert rows["Max file size"] == str(7 * MIB), rows
    assert rows["Max address space"] == str(300 * MIB), rows
    assert rows["Max cpu time"] == "9", rows
    assert rows["Max core file size"] == "0", rows


def test_a_60_mib_write_stops_at_the_file_size_limit_and_says_so_in_one_line(level):
    out = run("head -c 60M /dev/zero > big; echo head=$?; stat -c %s big", level)
    assert out.exit_code == 0 and out.stdout.split() == ["head=153", str(50 * MIB)], out  # SIGXFSZ at 50 MiB
    assert out.limits == ("file size 50 MiB",) and out.limit_line() == "limit: file size 50 MiB exceeded", out


def test_a_forked_memory_hog_stops_at_the_address_space_limit_and_says_so(level):
    """The limit is each process's and is inherited: the forked child's allocation fails, its
    parent goes on."""
    out = run(FORKED_HOG, level, ZERG_SANDBOX_MEMORY_MIB="256")
    assert out.exit_code == 0 and "hog exit 1" in out.stdout and "MemoryError" in out.stderr, out
    assert out.limit_line() == "limit: memory 256 MiB exceeded", out


def test_a_busy_loop_stops_at_the_cpu_limit_and_says_so(level):
    """The loop runs in the shell itself (no child to blame): SIGXCPU ends it long before the
    call's timeout."""
    out = run("while :; do :; done", level, timeout_s=120, ZERG_SANDBOX_CPU_S="1")
    assert not out.timed_out and out.exit_code == 128 + 24, out  # 128 + SIGXCPU
    assert out.limit_line() == "limit: cpu time 1 s exceeded", out


def test_home_and_tmp_are_each_a_capped_tmpfs_and_running_out_says_so(namespace_level):
    out = run("df -k --output=target,size /tmp .; head -c 5M /dev/zero > a; head -c 5M /dev/zero > /tmp/b; "
              "head -c 5M /dev/zero > c; echo third=$?; du -sk a c /tmp/b",
              namespace_level, ZERG_SANDBOX_WRITABLE_MIB="8")
    sizes = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()[1:3]}
    assert sizes == {"/tmp": "8192", "/home/sandbox": "8192"}, out.stdout
    assert "third=1" in out.stdout and "No space left on device" in out.stderr, out
    assert out.limit_line() == "limit: writable space 8 MiB exceeded", out


def test_a_command_that_stays_within_its_limits_reports_none(level):
    out = run("head -c 1M /dev/zero > f; python3 -c 'x = bytearray(10 << 20)'; echo fine", level)
    assert out.exit_code == 0 and out.stdout == "fine\n" and out.limits == () and out.limit_line() == "", out


def test_the_model_reads_the_limit_as_one_line_of_the_tool_result():
    """Through container_exec at the host's level: the line sits with the exit code, in what the
    model reads and in the artifact's trailer."""
    from zerg.loop.tool import ToolContext, invoke
    from zerg.tools.catalog import worker_tools

    settings = load_settings({"ZERG_SANDBOX_FILE_MIB": "4"})
    ctx = ToolContext(settings=settings, owner_id=1)
    out = invoke(worker_tools(), "container_exec", json.dumps({"command": "head -c 8M /dev/zero > big"}), ctx)
    head = out.text.split("--- stdout ---")[0].splitlines()
    assert head[1:3] == ["exit_code: 153", "limit: file size 4 MiB exceeded"], (detect.level(settings), out.text)
    assert "limit: file size 4 MiB exceeded\n" in out.artifact.split("--- exit ---")[1]
