"""The main job's commands run inside the namespace sandbox: ``zerg run`` as a user starts it, on a
host that has one (the README's commands install bubblewrap; the ``unshare`` level works with a
Python under a 0700 home), and what the command sees of the host is what the sandbox lets it; and
a ``zerg run`` killed with SIGKILL takes its sandboxed processes with it, at every level."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.parts import need
from tests.support.sandbox import argv_of, host_pids, live, require, wait_for
from tests.support.scripts import has_tool_results, role_of, worker_task
from zerg.config import load_settings
from zerg.sandbox import BEST_EFFORT, BWRAP, UNSHARE, detect, processes

LAUNCHER = {BWRAP: "bwrap", UNSHARE: "unshare", BEST_EFFORT: " best"}  # best effort: nsinit.pyc best ...


def _namespace_level() -> str:
    """This host's sandbox level; a host without a namespace sandbox fails in CI, skips elsewhere."""
    current = detect.level(load_settings({}))
    need(None if current.isolated else f"no namespace sandbox on this host: {'; '.join(current.notes)} "
         "(./dev.sh test installs bubblewrap)", "the zerg run sandbox test")
    return current.mechanism


def _run_env(database_url: str, llm, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    return env | {"DATABASE_URL": database_url, "ZERG_DATA_DIR": str(tmp_path / "data"),
                  "ZERG_ARTIFACT_DIR": str(tmp_path / "data" / "artifacts"), "OPENAI_BASE_URL": llm.base_url,
                  "OPENAI_API_KEY": "test", "ZERG_LLM_MAX_RETRIES": "0", "ZERG_EMBEDDINGS": "off"}


def _probe(secret: Path, port: int, token: str) -> str:
    """What the command looks for: another owner's file, the host's listener on loopback (its
    port in the network namespace's socket table) and a host process. ``sl[e]ep`` keeps the
    pattern from matching this command's own command line."""
    return (f'echo "FILE=$(cat {secret} 2>&1)"; '
            f'echo "LISTENERS=$(grep -ci ":{port:04X} " /proc/net/tcp)"; '
            f'echo "SLEEPERS=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "sl[e]ep {token}")"; '
            f'echo "HOSTNAME=$(cat /proc/sys/kernel/hostname)"')


def test_zerg_run_commands_cannot_see_another_owners_files_the_hosts_loopback_or_its_processes(
        database_url, llm, tmp_path):
    mechanism = _namespace_level()
    token = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**3)}"
    other = tmp_path / "data" / "artifacts" / "owners" / "someone-else"
    other.mkdir(parents=True)
    secret = other / "notes.txt"
    private = secrets.token_hex(8)
    secret.write_text(f"the other owner's secret {private}\n")
    listener = socket.create_server(("127.0.0.1", 0))
    sleeper = subprocess.Popen(["sleep", token])
    try:
        port = listener.getsockname()[1]
        command = _probe(secret, port, token)

        def respond(request):
            if role_of(request) == "supervisor":
                if has_tool_results(request):
                    return {"content": "Looked around."}
                return {"tool_calls": [("spawn_worker", {"task": "Look around the host"})]}
            if role_of(request) == "worker":
                if has_tool_results(request):
                    return {"content": f"Finished: {worker_task(request)}"}
                return {"tool_calls": [("container_exec", {"command": command})]}
            return {"content": "Looked around."}

        llm.respond_with(respond)
        out = subprocess.run([sys.executable, "-m", "zerg.cli", "run", "look around the host"],
                             capture_output=True, text=True, env=_run_env(database_url, llm, tmp_path), timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "NO sandbox" not in out.stderr, out.stderr
        # The host itself sees all three (so their absence below is the sandbox's doing).
        assert f":{port:04X} " in Path("/proc/net/tcp").read_text().upper()
        assert secret.read_text().startswith("the other owner's secret")
    finally:
        sleeper.kill()
        sleeper.wait()
        listener.close()
    calls = list((tmp_path / "data" / "artifacts").rglob("tool_calls/*container_exec*"))
    assert len(calls) == 1, out.stdout
    seen = calls[0].read_text().split("--- stdout ---", 1)[1]
    assert "FILE=cat: " in seen and "No such file or directory" in seen and private not in seen, seen
    assert "LISTENERS=0" in seen, seen
    assert "SLEEPERS=0" in seen, seen
    assert "HOSTNAME=zerg-sandbox" in seen, (mechanism, seen)


@pytest.fixture
def own_database(make_database) -> str:
    """A migrated database of this test's own: the killed run stays ``running`` there with its
    process gone, and the next ``zerg run`` on a shared database would recover it (and warn that
    its artifacts, in this test's directory, are not in that run's store)."""
    import psycopg

    from zerg.migrate import migrate

    url = make_database()
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


@pytest.mark.parametrize("level", [BWRAP, UNSHARE, BEST_EFFORT])
def test_a_zerg_run_killed_with_sigkill_leaves_no_sandboxed_process_alive(own_database, llm, tmp_path, level):
    """The worker's command starts daemons that leave its process group (``setsid``, a double
    fork) and, at best effort, drop their marker variable; ``zerg run`` is then SIGKILLed. Every one
    of them is gone without any later start: the launcher dies with zerg (bwrap --die-with-parent;
    unshare and the best-effort subreaper through a parent-death signal) and takes the sandbox with
    it. Waited for with a generous ceiling, never slept for."""
    env = _run_env(own_database, llm, tmp_path)
    if level == BEST_EFFORT:  # a host without bwrap or unshare: no directory of PATH has them
        (tmp_path / "bin").mkdir()
        env["PATH"] = str(tmp_path / "bin")
    else:
        require(level)
        if level == UNSHARE:  # a host with unshare but no bwrap: PATH has unshare and setpriv only
            (tmp_path / "bin").mkdir()
            for name in ("unshare", "setpriv"):
                (tmp_path / "bin" / name).symlink_to(f"/usr/bin/{name}")
            env["PATH"] = str(tmp_path / "bin")
    token = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**3)}"
    daemons = (f"env -u ZERG_SANDBOX_CALL setsid sleep {token}1 & "
               f"(env -u ZERG_SANDBOX_CALL setsid sh -c 'sleep {token}2 &' &); sleep {token}3")

    def respond(request):
        if role_of(request) == "worker" and not has_tool_results(request):
            return {"tool_calls": [("container_exec", {"command": daemons, "timeout_s": 300})]}
        if role_of(request) == "supervisor" and not has_tool_results(request):
            return {"tool_calls": [("spawn_worker", {"task": "Start the daemons"})]}
        return {"content": "Done."}

    llm.respond_with(respond)
    run = subprocess.Popen([sys.executable, "-m", "zerg.cli", "run", "start the daemons"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = wait_for(lambda: len(live(host_pids(f"sleep\0{token}"))) == 3 or run.poll() is not None,
                           "the three sandboxed sleeps", limit_s=120)
        assert started and run.poll() is None, run.communicate()
        launchers = {" ".join(argv_of(pid)[:1] + argv_of(pid)[4:5]) for pid in processes.ancestors(
            live(host_pids(f"sleep\0{token}3"))[0])}  # the level asked for is the one that runs it
        assert any(LAUNCHER[level] in launcher for launcher in launchers), launchers
        run.send_signal(signal.SIGKILL)
        run.wait()
        wait_for(lambda: not live(host_pids(f"sleep\0{token}")), "every sandboxed process gone", limit_s=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in live(host_pids(f"sleep\0{token}")):  # a failed test leaves nothing running either
            os.kill(pid, signal.SIGKILL)
        run.stdout.close()
        run.stderr.close()
