"""``zerg login``, ``zerg logout`` and ``zerg ask``: the device secret never on a command line, the
session token in a 0600 file under the user's config directory, revoked on logout."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.api import call
from tests.support.factories import unique_name
from tests.support.scripts import run_script
from zerg.config import load_settings
from zerg.local import credentials
from zerg.local.client import ClientError
from zerg.owners import create_owner


def zerg(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zerg.cli", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env}, stdin=None if stdin is not None else subprocess.DEVNULL)


@pytest.fixture
def alice(pool, api_server):
    with pool.connection() as conn:
        return create_owner(conn, unique_name("alice"))


def config_dir() -> Path:
    return Path(os.environ["ZERG_CONFIG_DIR"])


def every_cmdline() -> list[str]:
    """The command line of every process this user can see (what ``ps`` would print)."""
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone, or not ours to read
            pass
    return lines


def test_login_keeps_the_token_in_a_0600_file_and_ask_uses_it_with_no_secret_in_any_argv(api_server, alice, llm):
    base, _ = api_server
    out = zerg("login", "--url", base + "/", "--secret-stdin", stdin=alice.device_secret + "\n")
    assert out.returncode == 0, out.stderr
    path = credentials.session_file(config_dir(), base)
    assert f"token kept in {path}" in out.stdout and f"as owner {alice.owner_id}" in out.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(config_dir().stat().st_mode) == 0o700
    token = json.loads(path.read_text())["token"]

    seen: list[list[str]] = []

    def respond(request):
        if not seen:  # the run is under way: look at every process's argv, as ps would
            seen.append(every_cmdline())
        return script(request)

    script = run_script(["Check disk"], answer=lambda r: "Disk is fine.")
    llm.respond_with(respond)
    asked = zerg("ask", "--url", base, "is my disk ok?")  # no secret anywhere: the stored session
    assert asked.returncode == 0, asked.stderr
    assert "Disk is fine." in asked.stdout
    assert seen and any("is my disk ok?" in line for line in seen[0])  # the ask process was seen
    assert not any(alice.device_secret in line or token in line for line in seen[0])
    assert call("GET", "/api/jarvis/thread", token=token)[0] == 200  # ask left the stored session alive


def test_ask_with_the_secret_from_the_environment_keeps_it_off_argv_and_revokes_its_own_session(api_server, alice, llm, pool):
    base, _ = api_server
    seen: list[list[str]] = []
    script = run_script(["x"], answer=lambda r: "done")
    llm.respond_with(lambda req: (seen.append(every_cmdline()) if not seen else None) or script(req))
    asked = zerg("ask", "--url", base, "--json", "anything", ZERG_DEVICE_SECRET=alice.device_secret)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["result"] == "done"
    assert seen and not any(alice.device_secret in line for line in seen[0])
    with pool.connection() as conn:
        live = conn.execute("SELECT count(*) AS n FROM sessions WHERE owner_id = %s AND revoked_at IS NULL",
                            (alice.owner_id,)).fetchone()["n"]
    assert live == 0  # the one-off session ended with the command
    assert not credentials.session_file(config_dir(), base).exists()  # and nothing was stored


def test_logout_revokes_the_session_on_the_server_and_deletes_the_file(api_server, alice):
    base, _ = api_server
    assert zerg("login", "--url", base, ZERG_DEVICE_SECRET=alice.device_secret).returncode == 0
    path = credentials.session_file(config_dir(), base)
    token = json.loads(path.read_text())["token"]

    out = zerg("logout", "--url", base)
    assert out.returncode == 0, out.stderr
    assert "revoked" in out.stdout and not path.exists()
    status, body, _ = call("GET", "/api/jarvis/thread", token=token)
    assert (status, body["message"]) == (401, "session revoked: authenticate again")
    again = zerg("logout", "--url", base)
    assert again.returncode == 0 and f"no stored session for {base}" in again.stdout


def test_a_stored_session_that_was_revoked_is_deleted_and_ask_says_to_log_in_again(api_server, alice):
    base, _ = api_server
    assert zerg("login", "--url", base, ZERG_DEVICE_SECRET=alice.device_secret).returncode == 0
    assert zerg("owners", "rotate", alice.name).returncode == 0
    asked = zerg("ask", "--url", base, "hi")
    assert asked.returncode == 2 and "Traceback" not in asked.stderr
    assert "this device's secret was rotated or revoked" in asked.stderr and "run zerg login again" in asked.stderr
    assert not credentials.session_file(config_dir(), base).exists()


def test_a_token_file_others_can_read_is_refused(api_server, alice):
    base, _ = api_server
    assert zerg("login", "--url", base, ZERG_DEVICE_SECRET=alice.device_secret).returncode == 0
    path = credentials.session_file(config_dir(), base)
    path.chmod(0o644)
    asked = zerg("ask", "--url", base, "hi")
    assert asked.returncode == 2 and f"refusing the stored session {path}: it is mode 0644" in asked.stderr


def test_ask_has_no_secret_option_and_says_where_a_secret_may_come_from(api_server):
    base, _ = api_server
    for removed in (["--secret", "zd_x"], ["--secret=zd_x"], ["--secr", "zd_x"]):  # no prefix of --secret-stdin either
        flag = zerg("ask", "--url", base, *removed, "hi")
        assert flag.returncode == 2 and "zd_x" not in flag.stdout + flag.stderr, removed
        assert ("--secret was removed: a secret on the command line is visible to every process (ps)" in flag.stderr
                or "unrecognized arguments: --secr" in flag.stderr), flag.stderr
    none = zerg("ask", "--url", base, "hi")  # stdin is not a terminal: no prompt to wait on
    assert none.returncode == 2
    assert "no device secret: set ZERG_DEVICE_SECRET, pipe it to --secret-stdin, or type it at the prompt" in none.stderr
    empty = zerg("ask", "--url", base, "--secret-stdin", "hi", stdin="\n")
    assert empty.returncode == 2 and "--secret-stdin: standard input held no device secret" in empty.stderr


def test_on_a_terminal_the_secret_is_prompted_for_without_echo():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    asked: list[str] = []
    settings = load_settings({"HOME": "/home/u"})
    secret = credentials.read_device_secret(settings, from_stdin=False, stdin=Terminal(),
                                            prompt=lambda text: asked.append(text) or " zd_typed \n")
    assert secret == "zd_typed" and asked == ["device secret (zd_...): "]
    with pytest.raises(ClientError, match="no device secret"):
        credentials.read_device_secret(settings, from_stdin=False, stdin=Terminal(), prompt=lambda text: "")


def test_sessions_are_kept_per_server_under_the_xdg_config_directory(tmp_path):
    assert load_settings({"HOME": "/home/u"}).config_dir == Path("/home/u/.config/zerg")
    assert load_settings({"HOME": "/home/u", "XDG_CONFIG_HOME": "/x"}).config_dir == Path("/x/zerg")
    root = tmp_path / "cfg" / "zerg"
    a = credentials.StoredSession("https://a.example", "t1", "2030-01-01T00:00:00Z", 1, "s1")
    b = credentials.StoredSession("http://127.0.0.1:8000", "t2", "2030-01-01T00:00:00Z", 2, "s2")
    credentials.save_session(root, a)
    credentials.save_session(root, b)
    assert credentials.load_session(root, "HTTPS://A.example/") == a  # one server, however it is spelled
    assert credentials.load_session(root, "http://127.0.0.1:8000") == b
    assert credentials.load_session(root, "http://127.0.0.1:9") is None
    assert credentials.remove_session(root, "https://a.example") and credentials.load_session(root, "https://a.example") is None
    assert sorted(p.name for p in (root / "sessions").iterdir()) == [credentials.session_file(root, b.url).name]


def test_a_concurrent_reader_never_sees_a_half_written_token_file(tmp_path):
    """The file is written under a temporary name and renamed: a reader sees the old or the new one."""
    root = tmp_path / "zerg"
    sessions = [credentials.StoredSession("http://h", "t" * n, "e", 1, "s") for n in (10, 5000)]
    credentials.save_session(root, sessions[0])
    stop, bad = threading.Event(), []

    def read() -> None:
        while not stop.is_set():
            got = credentials.load_session(root, "http://h")
            if got not in sessions:
                bad.append(got)

    reader = threading.Thread(target=read)
    reader.start()
    for n in range(200):
        credentials.save_session(root, sessions[n % 2])
    stop.set()
    reader.join()
    assert bad == []


def test_logout_from_an_unreachable_server_still_deletes_the_token_and_says_the_session_lives_on(tmp_path):
    down = "http://127.0.0.1:9"
    path = credentials.save_session(config_dir(), credentials.StoredSession(down, "t", "2030-01-01T00:00:00Z", 1, "s-1"))
    out = zerg("logout", "--url", down)
    assert out.returncode == 1 and not path.exists()
    assert "could not reach http://127.0.0.1:9" in out.stderr and "the session stays valid until 2030-01-01T00:00:00Z" in out.stderr
    assert "DELETE /api/jarvis/sessions/s-1" in out.stderr and "Traceback" not in out.stderr
