"""Worker tools against real things: an SSH server and HTTP server on loopback, real processes."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.sandbox import running
from tests.support.ssh_server import KINDS, start_ssh_server
from tests.support.waiting import wait_for
from zerg.config import load_settings
from zerg.loop.tool import ToolContext, invoke
from zerg.tools.catalog import worker_tools
from zerg.tools.http import HTTPRequestArgs, make_http_request

TOOLS = worker_tools()


def ctx_for(**env) -> ToolContext:
    return ToolContext(settings=load_settings({k: v for k, v in env.items()}))


@pytest.fixture(scope="module", params=KINDS)
def ssh_server(request, tmp_path_factory):
    """OpenSSH (required: see ``require_openssh``) and the paramiko server, both exercised."""
    server = start_ssh_server(tmp_path_factory.mktemp("sshd"), request.param)
    yield server
    server.stop()


@pytest.fixture
def local_ctx(runtime_env, pool):
    """A tool context for the local owner, whose bootstrap allowlist is ZERG_SSH_HOSTS."""
    from zerg.owners import local_owner

    def make(**env) -> ToolContext:
        rt = runtime_env(**env)
        with pool.connection() as conn:
            return ToolContext(settings=rt.settings, owner_id=local_owner(conn), runtime=rt)

    return make


@pytest.fixture
def ssh_ctx(local_ctx):
    def make(server, **overrides) -> ToolContext:
        return local_ctx(ZERG_SSH_HOSTS=json.dumps({"cube": server.host_config(**overrides)}))

    return make


def call(name: str, ctx: ToolContext, **args):
    return invoke(TOOLS, name, json.dumps(args), ctx)


def test_ssh_exec_returns_real_output_and_exit_code(ssh_server, ssh_ctx):
    out = call("ssh_exec", ssh_ctx(ssh_server), host="cube", command="echo hello-from-$((40+2)); echo oops >&2; exit 3")
    assert out.exit_code == 3 and not out.ok and out.critical is None
    assert "hello-from-42" in out.text and "oops" in out.text and "exit_code: 3" in out.text


def test_ssh_exec_success(ssh_server, ssh_ctx):
    out = call("ssh_exec", ssh_ctx(ssh_server), host="cube", command="uname -s")
    assert out.ok and out.exit_code == 0 and "Linux" in out.text


def test_ssh_host_outside_allowlist_is_refused_without_connecting(ssh_server, ssh_ctx, monkeypatch):
    import paramiko

    def no_connect(*a, **k):
        raise AssertionError("must not connect")

    monkeypatch.setattr(paramiko.SSHClient, "connect", no_connect)
    out = call("ssh_exec", ssh_ctx(ssh_server), host="evil.example.com", command="id")
    assert not out.ok and out.critical is None
    assert "not in the SSH allowlist" in out.text and "cube" in out.text


def test_ssh_wrong_key_is_a_critical_error(ssh_server, ssh_ctx, tmp_path):
    from tests.support.ssh_server import _keypair

    wrong = tmp_path / "wrong_key"
    _keypair(wrong)
    out = call("ssh_exec", ssh_ctx(ssh_server, key_file=str(wrong)), host="cube", command="id")
    assert out.critical and "authentication failed" in out.critical


def test_ssh_unknown_host_key_is_refused_not_trusted(ssh_server, local_ctx, tmp_path):
    ctx = local_ctx(
        ZERG_SSH_HOSTS=json.dumps({"cube": ssh_server.host_config(host_key=None)}),
        ZERG_SSH_KNOWN_HOSTS=str(tmp_path / "empty_known_hosts"),
    )
    out = call("ssh_exec", ctx, host="cube", command="id")
    assert out.critical and "cube" in out.critical


def test_ssh_connection_refused_is_critical(ssh_server, ssh_ctx):
    from tests.support.ssh_server import _free_port

    out = call("ssh_exec", ssh_ctx(ssh_server, port=_free_port()), host="cube", command="id")
    assert out.critical and "cannot connect" in out.critical


def test_ssh_output_is_capped_for_the_model_but_kept_whole_for_the_artifact(ssh_server, local_ctx):
    ctx = local_ctx(ZERG_SSH_HOSTS=json.dumps({"cube": ssh_server.host_config()}), ZERG_TOOL_OUTPUT_CAP="1000")
    out = call("ssh_exec", ctx, host="cube", command="head -c 50000 /dev/zero | tr '\\0' 'a'; echo END")
    assert "[... truncated" in out.text and len(out.text) < 3000
    assert "a" * 50000 in out.saved and out.text.rstrip().endswith("--- stderr ---")


@pytest.mark.parametrize(("command", "name"), [("kill -TERM $$", "TERM"), ("echo before; kill -KILL $$", "KILL")])
def test_ssh_exec_reports_a_command_killed_by_a_signal_by_the_signals_name(ssh_server, ssh_ctx, command, name):
    out = call("ssh_exec", ssh_ctx(ssh_server), host="cube", command=command)
    assert not out.ok and out.exit_code is None and out.exit_signal == name
    assert "exit_code: none\nexit_signal: " + name in out.text and "exit_signal: " + name in out.saved


def test_a_timed_out_ssh_exec_ends_the_remote_command_and_its_children_before_returning(ssh_server, ssh_ctx):
    # The shell waits on a child in its process group: the group dies, not just the shell.
    out = call("ssh_exec", ssh_ctx(ssh_server), host="cube", timeout_s=5,
               command="sleep 3601 & echo sleeper=$!; wait; echo not-reached")
    stdout = out.saved.split("--- stdout ---")[1]
    sleeper = int(re.search(r"^sleeper=(\d+)$", stdout, re.M).group(1))
    assert out.exit_code is None and out.exit_signal == "TERM" and "not-reached" not in stdout
    assert "killed after 5.0s timeout; the server ended the remote command" in out.text
    wait_for(lambda: not running(sleeper), "the remote sleep 3601 to die of the TERM it was sent")


def test_container_exec_runs_in_its_home_with_a_scrubbed_environment(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "super-secret")
    out = call("container_exec", ctx_for(), command='test "$(pwd)" = "$HOME" && echo in-home; env')
    assert out.ok and "in-home" in out.text
    assert "super-secret" not in out.text and "AWS_" not in out.text


def test_container_exec_timeout_kills_the_whole_process_group():
    start = time.monotonic()
    out = call("container_exec", ctx_for(), command="(sleep 30; echo late) & sleep 30", timeout_s=0.5)
    assert time.monotonic() - start < 10
    assert out.exit_code is None and "killed after 0.5s timeout" in out.text
    assert "--- stdout ---\n\n--- stderr ---" in out.text  # the background child never printed


def test_container_exec_respects_the_worker_deadline():
    ctx = ctx_for()
    ctx.deadline = time.monotonic() + 0.5
    out = call("container_exec", ctx, command="sleep 20", timeout_s=60)
    assert out.exit_code is None and "timeout" in out.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "command: Field required"),
        ({"command": ""}, "command: String should have at least 1 character"),
        ({"command": "true", "timeout_s": -1}, "timeout_s: Input should be greater than 0"),
        ({"command": "true", "sudo": True}, "sudo: Extra inputs are not permitted"),
    ],
)
def test_bad_tool_arguments_come_back_as_text(args, message):
    out = invoke(TOOLS, "container_exec", json.dumps(args), ctx_for())
    assert not out.ok and out.text.startswith("ERROR: invalid arguments") and message in out.text


def test_unknown_tool_and_bad_json_come_back_as_text():
    assert "unknown tool 'rm_rf'" in invoke(TOOLS, "rm_rf", "{}", ctx_for()).text
    assert "not valid JSON" in invoke(TOOLS, "container_exec", "{nope", ctx_for()).text


# --- http_request -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def web():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802
            if self.path.startswith("/hop/"):
                n = int(self.path.rsplit("/", 1)[1])
                self.send_response(302)
                self.send_header("Location", f"/hop/{n + 1}")
                self.end_headers()
                return
            body = b"x" * 100_000 if self.path == "/big" else b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://localhost/"],
)
def test_http_request_refuses_loopback_and_metadata_by_default(url):
    out = call("http_request", ctx_for(), url=url)
    assert not out.ok and "refused" in out.text


def test_http_request_refuses_a_name_that_resolves_to_a_private_address():
    run = make_http_request(resolve=lambda host, port: ["10.1.2.3"])
    out = run(HTTPRequestArgs(url="https://internal.example.com/admin"), ctx_for())
    assert not out.ok and "10.1.2.3" in out.text and "refused" in out.text


def test_http_request_refuses_other_schemes():
    out = call("http_request", ctx_for(), url="file:///etc/passwd")
    assert not out.ok and "only http and https" in out.text


def test_http_request_works_when_the_network_is_allowed(web):
    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8", ZERG_HTTP_BODY_CAP="1000")
    out = call("http_request", ctx, url=f"{web}/ok")
    assert out.ok and "status: 200" in out.text and '{"ok": true}' in out.text
    big = call("http_request", ctx, url=f"{web}/big")
    assert "[... truncated" in big.text and "x" * 100_000 in big.saved


def test_http_request_stops_after_five_redirects(web):
    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    out = call("http_request", ctx, url=f"{web}/hop/0")
    assert not out.ok and "more than 5 redirects" in out.text


def test_get_current_time():
    out = call("get_current_time", ctx_for())
    assert out.ok and "UTC" in out.text


def test_container_exec_cannot_read_the_parents_secrets_or_the_data_dir(tmp_path):
    """Best effort (as on Lambda): a worker process whose environment holds a secret from its start
    runs a command that tries /proc/<parent>/environ, the JWT secret file and another owner's
    artifacts. (The namespace mechanisms show none of these paths: tests/test_sandbox.py.)"""
    import os
    import subprocess
    import sys

    from zerg.artifacts.local import LocalArtifactStore

    data = tmp_path / "data"
    store = LocalArtifactStore(data / "artifacts")
    wid = store.create_worker("private", owner_id=1)
    store.save_result(wid, "another owner's private result")
    (data / "jwt-secret").write_text("jwt-signing-secret")
    (data / "jwt-secret").chmod(0o600)
    data.chmod(0o700)
    command = (f"cat /proc/$PPID/environ; cat {data}/jwt-secret; "
               f"cat {data}/artifacts/workers/{wid}/result.txt; echo done")
    code = ("import sys; from zerg.config import load_settings; from zerg.sandbox import BEST_EFFORT, execute; "
            "r = execute(sys.argv[1], 10, load_settings({}), output_cap=100000, mechanism=BEST_EFFORT); "
            "print(r.stdout); print(r.stderr)")
    env = dict(os.environ, PARENT_SECRET="parent-secret-value")
    out = subprocess.run([sys.executable, "-c", code, command], capture_output=True, text=True, env=env, timeout=60)
    assert "done" in out.stdout, out.stderr
    assert "parent-secret-value" not in out.stdout  # non-dumpable parent: any uid
    assert "Permission denied" in out.stdout
    if os.geteuid() == 0:  # best effort as root: a per-call uid, closed out of the 0700 data dir
        assert "jwt-signing-secret" not in out.stdout
        assert "another owner's private result" not in out.stdout


def test_http_request_connects_to_the_checked_address_not_a_second_dns_answer(web):
    """DNS rebinding: the first answer is public, any later lookup would say 10.x. The request
    must go to the address that was checked (here the allowed loopback test server)."""
    answers = iter([["127.0.0.1"]] + [["10.0.0.1"]] * 10)
    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    run = make_http_request(resolve=lambda host, port: next(answers))
    port = web.rsplit(":", 1)[1]
    out = run(HTTPRequestArgs(url=f"http://rebind.example:{port}/ok"), ctx)
    assert out.ok and '{"ok": true}' in out.text


def test_http_request_rechecks_every_redirect_hop():
    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    resolver = {"public.example": ["127.0.0.1"], "internal.example": ["10.9.8.7"]}

    def resolve(host, p):
        return resolver.get(host, ["127.0.0.1"])

    import http.server
    import threading

    class Redirect(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", "http://internal.example/secret")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = make_http_request(resolve=resolve)(
            HTTPRequestArgs(url=f"http://public.example:{server.server_address[1]}/start"), ctx)
    finally:
        server.shutdown()
    assert not out.ok and "10.9.8.7" in out.text and "refused" in out.text


def test_http_request_refuses_carrier_grade_nat_addresses():
    run = make_http_request(resolve=lambda host, port: ["100.64.1.2"])
    out = run(HTTPRequestArgs(url="http://cgnat.example/"), ctx_for())
    assert not out.ok and "refused" in out.text


def test_https_to_a_pinned_address_still_verifies_the_certificate_for_the_name(tmp_path):
    from tests.support.tls import start_tls_server

    server, trust = start_tls_server(tmp_path, "api.example")
    port = server.server_address[1]
    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    try:
        ok = make_http_request(resolve=lambda h, p: ["127.0.0.1"], verify=trust)(
            HTTPRequestArgs(url=f"https://api.example:{port}/"), ctx)
        wrong = make_http_request(resolve=lambda h, p: ["127.0.0.1"], verify=trust)(
            HTTPRequestArgs(url=f"https://other.example:{port}/"), ctx)
    finally:
        server.shutdown()
    assert ok.ok and f"host=api.example:{port}" in ok.text
    assert not wrong.ok and "failed" in wrong.text  # the certificate is for api.example only
