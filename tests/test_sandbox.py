"""The container_exec sandbox with real processes: namespaces, teardown, network, files, leftovers.

Each isolation test runs over both namespace mechanisms. A mechanism this host cannot provide is
a visible skip locally and a failure in CI (CI=true), where .ci/run installs bubblewrap and the
kernel allows unprivileged user namespaces. All traffic stays on loopback.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.support.parts import need
from tests.support.sandbox import host_pids, require, require_root, sleepers, wait_for
from zerg.config import load_settings
from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, detect, execute, reaper

CAP = 1_000_000


@pytest.fixture(params=[BWRAP, UNSHARE])
def mechanism(request) -> str:
    return require(request.param)


def settings(**env: str):
    return load_settings(env)


def sh(command: str, mechanism: str, timeout_s: float = 30, **env: str):
    return execute(command, timeout_s, settings(**env), output_cap=CAP, mechanism=mechanism)


def _call_dir_holding(name: str) -> Path | None:
    for entry in reaper.sandboxes_root().iterdir():
        if (entry / "home" / name).exists():
            return entry
    return None


def test_two_owners_calls_at_the_same_time_cannot_list_read_or_signal_each_other(mechanism):
    tok = secrets.token_hex(4)
    marker_file = f"a-{tok}.txt"
    results = {}

    def owner_a():
        results["a"] = sh(f"echo a-secret-{tok} > ~/{marker_file}; echo a-tmp-{tok} > /tmp/{marker_file}; "
                          f"sleep 5.{int(tok, 16) % 1000}; cat ~/{marker_file}", mechanism)

    thread = threading.Thread(target=owner_a)
    thread.start()
    a_sleep = wait_for(lambda: sleepers(f"5.{int(tok, 16) % 1000}"), "owner A's command")[0]
    a_home = f"/proc/{a_sleep}/root/home/sandbox"  # A's home is a tmpfs of its own: the host's only path to it
    if os.geteuid() == 0:
        assert Path(a_home, marker_file).read_text() == f"a-secret-{tok}\n"
    assert _call_dir_holding(marker_file) is None  # nothing of it on the host's disk
    b = sh(f"echo pids: $(ls /proc | grep -c '^[0-9]'); ps -eo pid=,args=; "
           f"cat {a_home}/{marker_file}; cat /tmp/{marker_file}; ls {reaper.sandboxes_root()}; "
           f"kill -9 {a_sleep}; kill -9 -1; echo b-done", mechanism)
    thread.join()
    a = results["a"]
    assert a.exit_code == 0 and a.stdout.strip() == f"a-secret-{tok}", a  # A ran to its end, unharmed
    assert "b-done" in b.stdout, b
    assert f"a-secret-{tok}" not in b.stdout and f"a-tmp-{tok}" not in b.stdout
    assert f"sleep 5.{int(tok, 16) % 1000}" not in b.stdout  # A's processes are not in B's table
    listed = [line for line in b.stdout.splitlines()[1:] if line.strip()[:1].isdigit()]
    assert all("ps -eo" in line or "sh -c" in line or "bwrap" in line for line in listed), b.stdout
    assert "No such file or directory" in b.stderr  # A's home and the sandboxes root have no path
    assert "No such process" in b.stderr or "No such process" in b.stdout  # A's pid names nothing


def test_each_call_runs_as_its_own_unprivileged_host_uid(mechanism):
    require_root("per-call host uids")
    tok = str(int(secrets.token_hex(3), 16))
    uids = {}

    def call(name):
        uids[name] = sh(f"sleep 3.{tok[:3]}; id -u", mechanism)

    threads = [threading.Thread(target=call, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    host = wait_for(lambda: sleepers(f"3.{tok[:3]}") if len(sleepers(f"3.{tok[:3]}")) == 2 else None, "both commands")
    host_uids = {os.stat(f"/proc/{pid}").st_uid for pid in host}
    for t in threads:
        t.join()
    assert len(host_uids) == 2 and all(u >= reaper.SANDBOX_UID_BASE for u in host_uids), host_uids
    assert {int(r.stdout) for r in uids.values()} == host_uids  # the same uid inside and out


@pytest.mark.parametrize("kind", [BWRAP, UNSHARE, BEST_EFFORT])
def test_setsid_nohup_and_double_forks_are_gone_when_the_call_returns(kind):
    mechanism = require(kind) if kind != BEST_EFFORT else kind
    tok = str(int(secrets.token_hex(3), 16))
    escape = (f"setsid sleep 300.{tok}1 & nohup sleep 300.{tok}2 >/dev/null 2>&1 & "
              f"(setsid sh -c 'sleep 300.{tok}3 & sleep 300.{tok}4 &' &); ")
    done = sh(escape + "sleep 0.3; echo started", mechanism)
    assert done.exit_code == 0 and "started" in done.stdout, done
    assert host_pids(f"300.{tok}") == []
    timed = sh(escape.replace(f"300.{tok}", f"300.{tok}9") + "sleep 60", mechanism, timeout_s=1.5)
    assert timed.timed_out and timed.exit_code is None
    assert host_pids(f"300.{tok}9") == []


def test_a_call_cannot_connect_to_a_listener_on_the_hosts_loopback(mechanism):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    try:
        out = sh(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"",
                 mechanism)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert out.exit_code != 0 and "connected" not in out.stdout
    assert "Connection refused" in out.stderr, out  # its own lo answers: nothing listens there


def test_network_namespace_has_only_a_working_lo(mechanism):
    out = sh("cat /proc/net/dev; python3 -c \"import socket; s = socket.create_server(('127.0.0.1', 0)); "
             "socket.create_connection(s.getsockname()); print('lo works')\"", mechanism)
    interfaces = [line.split(":")[0].strip() for line in out.stdout.splitlines() if ":" in line]
    assert interfaces == ["lo"], out.stdout
    assert "lo works" in out.stdout, out


def test_network_on_gives_the_hosts_network(mechanism):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        out = sh(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"",
                 mechanism, ZERG_SANDBOX_NETWORK="on")
        listener.settimeout(5)
        conn, _ = listener.accept()
        conn.close()
    finally:
        listener.close()
    assert "connected" in out.stdout, out


def test_nothing_of_the_data_directory_or_the_host_is_visible(mechanism, tmp_path):
    data = tmp_path / "zerg-data"
    (data / "pg").mkdir(parents=True)
    (data / "jwt-secret").write_text("jwt-signing-secret")
    (data / "pg" / ".s.PGSQL.5432.lock").write_text("socket lock")
    out = sh(f"ls /; echo ---; ls -a /tmp ~; cat {data}/jwt-secret; ls {data} {data}/pg /root /work /run /var; echo end",
             mechanism, ZERG_DATA_DIR=str(data))
    assert "end" in out.stdout, out
    top = out.stdout.split("---")[0].split()
    assert set(top) <= {"bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}, top
    assert "jwt-signing-secret" not in out.stdout and "jwt-secret" not in out.stdout
    assert "/tmp:\n.\n..\nend" in out.stdout  # a private, empty /tmp: no database socket dir, no other sandbox
    for path in (data, "/root", "/work", "/run", "/var"):
        assert f"{path}': No such file or directory" in out.stderr, (path, out.stderr)


def test_the_command_cannot_undo_the_sandbox(mechanism):
    out = sh("grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; umount /usr; mount -o remount,rw /usr; "
             "touch /usr/x /etc/x /x; unshare -Urm sh -c 'umount -l /usr && echo unmounted'; "
             "ls /usr/bin/env && echo usr-still-there", mechanism)
    caps = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("Cap")]
    assert caps and set(caps) == {"0000000000000000"}, out.stdout
    assert "unmounted" not in out.stdout and "usr-still-there" in out.stdout
    assert out.stderr.count("Read-only file system") == 3, out.stderr


def test_output_is_captured_and_the_exit_code_kept(mechanism):
    out = sh("echo to-out; echo to-err >&2; exit 7", mechanism)
    assert (out.exit_code, out.stdout, out.stderr) == (7, "to-out\n", "to-err\n")


def test_best_effort_still_runs_a_command_in_its_own_directory(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "secret").write_text("data-dir-secret")
    out = sh(f"pwd; echo $HOME; id -u; cat {data}/secret; echo ran", BEST_EFFORT)
    assert "ran" in out.stdout and out.mechanism == BEST_EFFORT
    cwd, home, uid = out.stdout.splitlines()[:3]
    assert cwd == home and cwd.startswith(str(reaper.sandboxes_root()))
    assert not Path(cwd).exists()  # removed with the call
    if os.geteuid() == 0:  # its own unprivileged uid: the 0700 data dir is closed to it
        assert int(uid) >= reaper.SANDBOX_UID_BASE and "data-dir-secret" not in out.stdout


def test_leftover_sandboxes_from_a_crash_are_removed_at_start(capsys):
    dead = subprocess.Popen(["true"])
    dead.wait()
    root = reaper.sandboxes_root()
    root.mkdir(mode=0o711 if os.geteuid() == 0 else 0o700, exist_ok=True)
    crashed, live = root / f"{dead.pid}-{secrets.token_hex(4)}", root / f"{os.getpid()}-{secrets.token_hex(4)}"
    legacy = root.parent / f"zerg-sandbox-{secrets.token_hex(4)}"  # what zerg before the sandbox left
    for path in (crashed, live, legacy):
        (path / "home" / "locked").mkdir(parents=True)
        (path / "home" / "locked" / "file").write_text("left behind")
        (path / "home" / "locked").chmod(0)
    os.utime(legacy, (time.time() - 7200, time.time() - 7200))  # a crash's, two hours ago
    try:
        detect.announce(settings())
        assert not crashed.exists() and not legacy.exists()
        assert live.exists()  # a live process's call is never touched
    finally:
        for path in (live, crashed, legacy):
            reaper.remove_tree(path)


def test_a_host_without_a_mechanism_says_so_once_and_still_runs_commands(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor unshare can be found
    detect.forget()
    try:
        first = detect.announce(settings())
        detect.announce(settings())
        err = capsys.readouterr().err
        out = execute("echo still-runs", 10, settings(), output_cap=CAP)
    finally:
        detect.forget()
    assert first.mechanism == BEST_EFFORT
    assert err.count("container_exec has NO sandbox") == 1
    assert "bwrap: not installed" in err and "unshare: not installed" in err
    said = next(line for line in err.splitlines() if "NO sandbox" in line)  # one line, with its fix
    assert said.endswith("Fix: " + ("" if os.geteuid() == 0 else "sudo ") + "apt-get install bubblewrap"), said
    assert out.stdout == "still-runs\n" and out.mechanism == BEST_EFFORT


def test_container_exec_uses_the_hosts_sandbox_level():
    from zerg.loop.tool import ToolContext, invoke
    from zerg.tools.catalog import worker_tools

    current = detect.level(settings())
    need(None if current.isolated else f"this host has no sandbox mechanism: {current.notes}", "this test")
    ctx = ToolContext(settings=settings(), owner_id=1)
    out = invoke(worker_tools(), "container_exec", '{"command": "ls /proc | grep -c ^[0-9]"}', ctx)
    assert out.ok and int(out.text.split("--- stdout ---\n")[1].split()[0]) <= 5, out.text  # not the host's


LAMBDA_SCRIPT = """
import json, os, sys, time
from pathlib import Path
from zerg.config import load_settings
from zerg.sandbox import execute, invocation
settings = load_settings({"AWS_LAMBDA_FUNCTION_NAME": "zerg-worker", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
                          "LAMBDA_TASK_ROOT": "/var/task"})
tmp = Path(sys.argv[1])
(tmp / "kept-from-before").write_text("runtime file")
with invocation(settings, tmp_root=tmp) as sweep:
    r = execute(sys.argv[2], 10, settings, output_cap=100000)
    during = sorted(os.listdir(tmp))
print(json.dumps({"exit": r.exit_code, "mechanism": r.mechanism, "killed": sweep.killed,
                  "during": during, "after": sorted(os.listdir(tmp))}))
"""


def test_lambda_invocation_end_kills_every_stray_process_and_deletes_its_files(request):
    """A Lambda-like environment (a PID namespace of its own, an unprivileged uid, best effort): a
    command escapes its group and its marker, and writes outside its directory; the invocation's
    end leaves nothing of it."""
    import json

    require(UNSHARE)
    uid = reaper.SANDBOX_UID_BASE + reaper.UID_SLOTS + 7 if os.geteuid() == 0 else os.geteuid()
    lambda_tmp = Path(tempfile.mkdtemp(prefix="zerg-lambda-test-"))  # the test's: uid is the test's own, mapped
    request.addfinalizer(lambda: reaper.remove_tree(lambda_tmp))
    # The command kills its launcher last (same uid), so its strays outlive the call: the sweep's to find.
    command = ("env -u ZERG_SANDBOX_CALL setsid sleep 300 & (env -u ZERG_SANDBOX_CALL setsid sh -c 'sleep 301 &' &); "
               f"echo leak > {lambda_tmp}/leaked; mkdir {lambda_tmp}/dir; sleep 0.3; echo ok; kill -9 $PPID")
    probe = "sleep 1; ps -eo stat=,comm= | grep -c -E '^[^Z]+ +sleep$' || true"
    # As root, the test's own uid shows as uid inside (a user namespace, no capabilities): unlike a host
    # uid switched to, it can run this checkout's Python wherever it lies (see run_in_pid_namespace).
    as_uid = [f"--map-user={uid}", f"--map-group={uid}"] if os.geteuid() == 0 else ["--map-current-user"]
    pythonpath = os.pathsep.join(p for p in sys.path if p)
    argv = ["unshare", *as_uid, "--pid", "--fork", "--kill-child", "--mount-proc", "--",
                     "/bin/sh", "-c", f'"$@"; {probe}', "sh", sys.executable, "-c", LAMBDA_SCRIPT, str(lambda_tmp), command]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": pythonpath, "TMPDIR": str(lambda_tmp), "HOME": str(lambda_tmp)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr
    report = json.loads(lines[0])
    assert report["exit"] == -9 and report["mechanism"] == BEST_EFFORT  # the launcher, killed
    assert "leaked" in report["during"] and report["killed"] >= 2
    assert report["after"] == ["kept-from-before"]  # nothing the invocation created survives
    assert lines[1] == "0", done.stdout  # no sleep left in the environment's process table
