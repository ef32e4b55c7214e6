"""``ssh_exec`` resolves an alias only among the calling owner's hosts, through the real SSH server
on loopback, and no private key reaches an artifact, a tool output or a log line.

Must show (issue 11): owner B's worker cannot ``ssh_exec`` to owner A's host alias ("not in the SSH
allowlist"), and no API response or artifact contains a private key.
"""

from __future__ import annotations

import json
import secrets

import pytest

from functions.worker.handler import handler as worker_handler
from tests.support.api import call
from tests.support.factories import make_job, make_run, set_approval_policy
from tests.support.hosts import add_host, assert_no_key
from tests.support.ssh_server import _keypair
from zerg.loop.tool import ToolContext, invoke
from zerg.owners import create_owner
from zerg.tools.catalog import worker_tools

TOOLS = worker_tools()


def ssh(rt, owner_id, host: str, command: str = "echo hi"):
    ctx = ToolContext(settings=rt.settings, owner_id=owner_id, runtime=rt)
    return invoke(TOOLS, "ssh_exec", json.dumps({"host": host, "command": command}), ctx)


def test_an_owner_reaches_their_own_host_with_the_sealed_key_and_the_pin(runtime_env, owner, ssh_server):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    out = ssh(rt, owner, "cube", "echo hello-from-$((40+2))")
    assert out.ok and out.exit_code == 0 and "hello-from-42" in out.text
    assert_no_key(out.saved, ssh_server.client_key.read_text())


def test_another_owners_alias_is_not_in_the_allowlist_and_nothing_connects(runtime_env, owner, other_owner,
                                                                            ssh_server, monkeypatch):
    import paramiko

    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    add_host(rt, other_owner, "nas", ssh_server)
    monkeypatch.setattr(paramiko.SSHClient, "connect", lambda *a, **k: pytest.fail("must not connect"))
    out = ssh(rt, other_owner, "cube")
    assert not out.ok and out.critical is None
    assert out.text == "ERROR: host 'cube' is not in the SSH allowlist (allowed: nas); not connecting"


def test_a_host_key_other_than_the_pin_is_refused_even_if_known_hosts_trusts_it(runtime_env, owner, ssh_server, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {ssh_server.host_key}\n")
    rt = runtime_env(ZERG_SSH_KNOWN_HOSTS=str(known))
    other_pin = _keypair(tmp_path / "some_other_host_key")
    add_host(rt, owner, "cube", ssh_server, host_key=other_pin)
    out = ssh(rt, owner, "cube")
    assert out.critical == (f"ssh to cube ({ssh_server.user}@127.0.0.1:{ssh_server.port}): "
                            "host key does not match the pinned key")


def test_a_sealed_key_copied_into_another_owners_row_cannot_be_opened(runtime_env, pool, owner, other_owner, ssh_server):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    wrong = rt.settings.data_dir / "wrong"
    _keypair(wrong)
    add_host(rt, other_owner, "cube", ssh_server, key_file=wrong)
    with pool.connection() as conn:  # what a row copied across owners (or a confused migration) would do
        conn.execute("""UPDATE ssh_hosts SET private_key_sealed = (SELECT private_key_sealed FROM ssh_hosts
                        WHERE owner_id = %s AND alias = 'cube') WHERE owner_id = %s AND alias = 'cube'""",
                     (owner, other_owner))
    out = ssh(rt, other_owner, "cube")
    assert out.critical and out.critical.startswith("ssh key for cube cannot be opened: ")
    assert "not sealed for this owner" in out.critical


def test_a_worker_without_a_way_to_open_keys_fails_critically_not_by_guessing(runtime_env, monkeypatch, owner, ssh_server):
    add_host(runtime_env(), owner, "cube", ssh_server)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "zerg-test-worker")  # on Lambda, without ZERG_KMS_KEY_ID
    out = ssh(runtime_env(), owner, "cube")
    assert out.critical == "ssh key for cube: ZERG_KMS_KEY_ID must be set on Lambda: a local key file would not outlive the container"


def test_a_call_without_an_owner_reaches_nothing(runtime_env, ssh_server):
    rt = runtime_env(ZERG_SSH_HOSTS=json.dumps({"cube": ssh_server.host_config()}))
    out = invoke(TOOLS, "ssh_exec", json.dumps({"host": "cube", "command": "id"}), ToolContext(settings=rt.settings))
    assert out.text == "ERROR: ssh_exec runs only for an owner (this call has none); not connecting"


def test_owner_bs_worker_cannot_ssh_to_owner_as_alias_and_no_answer_artifact_or_log_holds_the_key(
    runtime_env, llm, pool, ssh_server, tmp_path, capfd
):
    rt = runtime_env()
    with pool.connection() as conn:
        alice, bob = create_owner(conn, f"alice-{secrets.token_hex(4)}"), create_owner(conn, f"bob-{secrets.token_hex(4)}")
    private_key = ssh_server.client_key.read_text()
    status, _, put = call("PUT", "/api/jarvis/hosts/cube", {
        "hostname": "127.0.0.1", "port": ssh_server.port, "user": ssh_server.user,
        "private_key": private_key, "host_key": ssh_server.host_key,
    }, token=call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})[1]["token"])
    assert status == 200

    outcomes = {}
    for name, who in (("alice", alice), ("bob", bob)):
        set_approval_policy(pool, who.owner_id, ssh_allow={"cube": ["echo *"]})  # bob's call must reach the host check
        run_id, _ = make_run(pool, who.owner_id)
        job_id = make_job(pool, who.owner_id, run_id, "Check disk on cube")
        llm.script({"tool_calls": [("ssh_exec", {"host": "cube", "command": "echo 'sda1 78%'"})]},
                   {"content": "done"})
        outcomes[name] = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": who.owner_id})

    store = rt.store
    alice_out = store.read_file(outcomes["alice"]["worker_id"], "tool_calls/001_ssh_exec.txt")
    bob_out = store.read_file(outcomes["bob"]["worker_id"], "tool_calls/001_ssh_exec.txt")
    assert outcomes["alice"]["status"] == "success" and "sda1 78%" in alice_out and "exit_code: 0" in alice_out
    assert bob_out == "ERROR: host 'cube' is not in the SSH allowlist (allowed: none configured); not connecting"
    bob_seen = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    # What Bob's model was shown: the refusal (fenced as tool output), nothing of Alice's host.
    assert len(bob_seen) == 1 and bob_out in bob_seen[0] and "sda1" not in bob_seen[0]

    # No artifact file (either owner's), no API answer, no log line carries the key.
    files = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert len(files) >= 8
    for path in files:
        assert_no_key(path.read_text(errors="replace"), private_key)
    assert_no_key(put["body"], private_key)
    logs = capfd.readouterr()
    assert_no_key(logs.out + logs.err, private_key)
