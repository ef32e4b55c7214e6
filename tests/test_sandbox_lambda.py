"""The end-of-invocation sweep on Lambda, with real processes in a PID namespace of the test's own.

Each test builds a Lambda-like environment: a fresh user and PID namespace whose PID 1 is a shell
(standing in for Lambda's init) and whose only other process, at first, is the Python "runtime"
(its parent is PID 1, as on Lambda). Whatever the sweep kills, it kills in there.

A best-effort call's launcher kills everything below it when the command ends, so what these
sweeps have to find is what outlives the launcher: each command here ends by killing it (``kill -9
$PPID``, which a command running as the launcher's own uid can do), after starting its strays.
"""

from __future__ import annotations

import json

from tests.support.parts import need
from tests.support.sandbox import outside_uid, private_tmp, require, require_root, run_in_pid_namespace
from zerg.sandbox import UNSHARE, reaper
from zerg.sandbox.invocation import TAINTED_EXIT

LAMBDA_ENV = {"AWS_LAMBDA_FUNCTION_NAME": "zerg-worker", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
              "LAMBDA_TASK_ROOT": "/var/task"}

SCRIPT = """
import json, os, sys, time
from pathlib import Path
from zerg.config import load_settings
from zerg.sandbox import execute, invocation
env = json.loads(sys.argv[3])
settings = load_settings(env)
tmp = Path(sys.argv[1])
(tmp / "kept-from-before").write_text("runtime file")
seen = {"stdout": "", "limits": []}
with invocation(settings, tmp_root=tmp) as sweep:
    if sys.argv[2]:
        r = execute(sys.argv[2], 10, settings, output_cap=100000, mechanism="best-effort")
        seen = {"stdout": r.stdout, "limits": list(r.limits)}
    time.sleep(float(sys.argv[4]))
    for _ in range(int(sys.argv[5])):  # children the runtime has not reaped yet: a longer process table
        if os.fork() == 0:
            os._exit(0)
print(json.dumps({"killed": sweep.killed, "after": sorted(os.listdir(tmp)), **seen}), flush=True)
"""



# Forks a copy of itself and exits, about 2000 times a second (a shell function run in the
# background, re-exec'ed every 900 generations before dash's recursion limit).
FORKER = 'hop() {{ if [ $1 -ge 900 ]; then exec sh -c "$0" "$0"; fi; hop $(($1+1)) & exit 0; }}; hop 0 # hopper'
# The namespace's pid counter over a second: a handful (the probe's own forks) when all is quiet.
PIDS_SPENT = ("a=$(cat /proc/sys/kernel/ns_last_pid); sleep 1; b=$(cat /proc/sys/kernel/ns_last_pid); "
              "echo $((b - a))")


ESCAPE = "; kill -9 $PPID"  # the launcher (its parent) gone: what the command started outlives the call


def count(name: str) -> str:
    """A probe for the namespace's shell: how many live processes run ``name``."""
    return f"sleep 1; ps -eo stat=,args= | grep -v grep | grep -c -E '^[^Z]+ .*{name}' || true"


def lambda_run(request, command: str, *, env=LAMBDA_ENV, linger: float = 0.5, zombies: int = 0, before: str = "",
               after: str = "true", userns: bool = True):
    require(UNSHARE)  # util-linux unshare builds the fake environment
    uid = outside_uid()
    tmp = private_tmp()
    request.addfinalizer(lambda: reaper.remove_tree(tmp))
    command = command.format(tmp=tmp)
    done = run_in_pid_namespace(SCRIPT, [str(tmp), command, json.dumps(env), str(linger), str(zombies)], uid=uid, tmp=tmp,
                                before=before, after=after, userns=userns)
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[0]) if lines and lines[0].startswith("{") else None
    return report, lines, done


def test_a_process_that_forks_and_exits_in_a_loop_is_gone_after_a_lambda_invocation(request):
    """It forks a copy of itself and exits, again and again: its pid changes faster than a sweep
    can list /proc and signal what it listed."""
    command = f"env -u ZERG_SANDBOX_CALL setsid sh -c '{FORKER}' '{FORKER}' & sleep 0.3; echo started" + ESCAPE
    # 500 children the runtime has not reaped yet make the process table longer to look through.
    report, lines, done = lambda_run(request, command, zombies=500, after=PIDS_SPENT)
    assert report is not None and lines[1] == "exit=0", done.stderr
    assert int(lines[2]) <= 5, (lines, done.stderr)  # nothing is forking in the environment any more


def test_setsid_and_double_forks_without_the_marker_are_gone_and_files_deleted(request):
    command = ("env -u ZERG_SANDBOX_CALL setsid sleep 300 & (env -u ZERG_SANDBOX_CALL setsid sh -c 'sleep 301 &' &); "
               "echo leak > {tmp}/leaked; mkdir {tmp}/dir; sleep 0.3; echo ok" + ESCAPE)
    report, lines, done = lambda_run(request, command, after=count("sleep 30[01]"))
    assert report is not None and lines[1] == "exit=0", done.stderr
    assert report["killed"] >= 2 and report["after"] == ["kept-from-before"]
    assert lines[2] == "0", lines


def test_the_limits_hold_on_lambda_too(request):
    """No namespaces and not root: the best-effort launcher still sets the command's limits."""
    command = "head -c 60M /dev/zero > {tmp}/big; echo head=$?; stat -c %s {tmp}/big; rm {tmp}/big"
    report, lines, done = lambda_run(request, command, env={**LAMBDA_ENV, "ZERG_SANDBOX_FILE_MIB": "20"})
    assert report is not None and lines[1] == "exit=0", done.stderr
    assert report["stdout"].split() == ["head=153", str(20 << 20)], report
    assert report["limits"] == ["file size 20 MiB"], report


def test_ipc_objects_a_command_made_are_gone_after_a_lambda_invocation(request):
    """Every invocation runs as the function's one uid in one IPC namespace: what a command made
    there (shared memory, a semaphore, a message queue) is removed with the rest."""
    import shutil

    need(None if shutil.which("ipcmk") else "util-linux ipcmk is not installed", "the IPC test")
    left = "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | wc -l"  # the namespace's
    command = "ipcmk -M 4096 >/dev/null && ipcmk -S 1 >/dev/null && ipcmk -Q >/dev/null && echo made"
    report, lines, done = lambda_run(request, command, after=left)
    assert report is not None and lines[1:] == ["exit=0", "0"], (lines, done.stderr)


def test_an_invocation_without_a_sandbox_call_kills_nothing(request):
    """A process the runtime did not start through container_exec (an extension, say) is left
    alone when the invocation ran no command."""
    report, lines, done = lambda_run(request, "", before="sleep 302 &", after=count("sleep 302"))
    assert report is not None and report["killed"] == 0, done.stderr
    assert lines[1:] == ["exit=0", "1"], lines  # still running


def test_without_the_lambda_runtime_variables_the_sweep_kills_only_marked_processes(request):
    """AWS_LAMBDA_FUNCTION_NAME alone is not Lambda: an unmarked process (not the call's) survives
    the invocation's end; the call's own marked processes do not."""
    command = "env -u ZERG_SANDBOX_CALL setsid sleep 303 & setsid sleep 304 & sleep 0.3; echo ok" + ESCAPE
    report, lines, done = lambda_run(request, command, env={"AWS_LAMBDA_FUNCTION_NAME": "zerg-worker"},
                                     after=count("sleep 303") + "; " + count("sleep 304"))
    assert report is not None and lines[1] == "exit=0", done.stderr
    assert lines[2:4] == ["1", "0"], lines  # the unmarked one lives (not Lambda), the marked one is gone


ENGINE_SCRIPT = """
import json, sys
from zerg.config import load_settings
from zerg.local.engine import LocalEngine
from zerg.sandbox import execute, invocation
settings = load_settings(json.loads(sys.argv[2]))

def worker(event, context):
    with invocation(settings) as sweep:
        execute(event["command"], 10, settings, output_cap=100000, mechanism="best-effort")
    return {"killed": sweep.killed}

engine = LocalEngine(handlers={"zerg-worker": worker}, definition="{}")
body, error = engine._dispatch("zerg-worker", json.dumps({"command": sys.argv[1]}))
print(body.decode(), flush=True)
"""


def test_the_local_engine_never_runs_the_lambda_sweep_even_with_lambdas_variables(request):
    """A worker run by the local engine, in a process that looks like Lambda's runtime in every
    other way: a process the call did not mark (not the call's own) is left alone."""
    require(UNSHARE)
    uid = outside_uid()
    tmp = private_tmp()
    request.addfinalizer(lambda: reaper.remove_tree(tmp))
    command = "env -u ZERG_SANDBOX_CALL setsid sleep 306 & sleep 0.3; echo ok" + ESCAPE
    done = run_in_pid_namespace(ENGINE_SCRIPT, [command, json.dumps(LAMBDA_ENV)], uid=uid, tmp=tmp,
                                after=count("sleep 306"))
    lines = done.stdout.strip().splitlines()
    assert lines[:2] == ['{"killed": 0}', "exit=0"], (lines, done.stderr)
    assert lines[2] == "1", lines  # still running: the engine's process is never Lambda's runtime


def test_a_survivor_of_the_sweep_ends_the_runtime_so_lambda_replaces_the_environment(request):
    """A process the runtime may not signal (another uid) cannot be killed: the runtime exits
    instead of serving another invocation in this environment."""
    require_root("a process of another uid inside the fake environment")
    other = outside_uid(8)
    before = f"setpriv --reuid={other} --regid={other} --clear-groups sleep 305 &"
    report, lines, done = lambda_run(request, "echo ran", before=before, after=count("sleep 305"), userns=False)
    assert report is None, lines  # the runtime did not go on to answer
    assert lines[0] == f"exit={TAINTED_EXIT}", (lines, done.stderr)
    assert "could not kill" in done.stdout + done.stderr
