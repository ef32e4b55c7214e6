"""Owners' SSH hosts: what may be registered, the table's owner scoping, the API and ``zerg hosts``.

Every read path (registry list/get, API list/get, CLI list) is checked to show another owner
nothing, and every answer is grepped for the private key's text.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.support.api import call
from tests.support.factories import unique_name
from tests.support.hosts import add_host, assert_no_key, host_spec, key_lines
from tests.support.ssh_server import _keypair
from zerg.cli.main import main
from zerg.hosts import registry
from zerg.hosts.spec import HostInputError, parse_host_key, parse_private_key
from zerg.owners import create_owner, local_owner


def pem(key, fmt=ser.PrivateFormat.OpenSSH, password: bytes | None = None) -> str:
    enc = ser.BestAvailableEncryption(password) if password else ser.NoEncryption()
    return key.private_bytes(ser.Encoding.PEM, fmt, enc).decode()


def new_owner(pool, prefix: str):
    with pool.connection() as conn:
        return create_owner(conn, f"{prefix}-{secrets.token_hex(4)}")


# --- what may be registered -----------------------------------------------------------------

def test_ed25519_ecdsa_and_rsa_keys_are_accepted_with_their_fingerprints(ssh_server):
    for key, key_type in ((ed25519.Ed25519PrivateKey.generate(), "ssh-ed25519"),
                          (ec.generate_private_key(ec.SECP256R1()), "ecdsa-sha2-nistp256"),
                          (rsa.generate_private_key(65537, 2048), "ssh-rsa")):
        parsed = parse_private_key(pem(key))
        assert parsed.key_type == key_type and parsed.fingerprint.startswith("SHA256:")
    rsa_pem = pem(rsa.generate_private_key(65537, 2048), ser.PrivateFormat.TraditionalOpenSSL)
    assert parse_private_key(rsa_pem).key_type == "ssh-rsa"


def test_the_pin_is_taken_from_a_public_key_or_a_known_hosts_line_and_stored_bare(ssh_server):
    key_type, b64 = ssh_server.host_key.split()[:2]
    for text in (f"{key_type} {b64}", f"{key_type} {b64} root@cube", f"[127.0.0.1]:2222 {key_type} {b64}",
                 f"# ssh-keyscan output\ncube.lan {key_type} {b64}\n"):
        pin = parse_host_key(text)
        assert pin.line == f"{key_type} {b64}" and pin.fingerprint.startswith("SHA256:")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("hostname", "-oProxyCommand=sh", "a hostname is a DNS name or an IP address"),
    ("hostname", "cube lan", "no spaces or control characters"),
    ("hostname", "cube\x00.lan", "no spaces or control characters"),
    ("hostname", "cube\n", "no spaces or control characters"),
    ("port", 0, "greater than or equal to 1"),
    ("port", 65536, "less than or equal to 65535"),
    ("user", "root;reboot", "a user name is 1-64 characters"),
    ("user", "-l", "a user name is 1-64 characters"),
    ("host_key", "AAAAC3NzaC1lZDI1NTE5", "not an OpenSSH public key line"),
    ("host_key", "ssh-ed25519 !!!notbase64", "does not decode"),
    ("host_key", "@cert-authority * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA", "markers (@cert-authority) are not supported"),
    ("host_key", "ssh-ed25519 AAAA\nssh-rsa AAAA", "exactly one host key line"),
])
def test_bad_host_fields_are_refused_naming_the_rule(ssh_server, field, value, message):
    with pytest.raises(ValueError) as err:
        host_spec(ssh_server, **{field: value})
    assert message in str(err.value) and field in str(err.value)


def test_an_encrypted_key_is_refused_with_how_to_make_a_decrypted_copy():
    for fmt in (ser.PrivateFormat.OpenSSH, ser.PrivateFormat.TraditionalOpenSSL):
        key = ec.generate_private_key(ec.SECP256R1())
        with pytest.raises(HostInputError, match=r"encrypted with a passphrase.*ssh-keygen -p -N ''"):
            parse_private_key(pem(key, fmt, password=b"hunter2"))


def test_a_public_key_a_small_rsa_key_or_garbage_is_refused_and_never_quoted(ssh_server):
    with pytest.raises(HostInputError, match="give the private key, not the .pub"):
        parse_private_key(ssh_server.host_key)
    with pytest.raises(HostInputError, match="2048-4096 bits, this one has 1024"):
        parse_private_key(pem(rsa.generate_private_key(65537, 1024), ser.PrivateFormat.TraditionalOpenSSL))
    good = pem(ed25519.Ed25519PrivateKey.generate())
    broken = good.replace(key_lines(good)[1], key_lines(good)[1][::-1])
    with pytest.raises(HostInputError) as err:
        parse_private_key(broken)
    assert "not a readable Ed25519, ECDSA or RSA private key" in str(err.value)
    assert_no_key(str(err.value), broken)
    with pytest.raises(HostInputError, match="at most 4096 bytes"):
        parse_private_key(good + "x" * 4096)


# --- the registry: owner scoping, sealing, the bootstrap ---------------------------------------

def test_each_owner_sees_only_their_own_hosts_under_the_same_alias(runtime_env, pool, owner, other_owner, ssh_server):
    rt = runtime_env()
    add_host(rt, owner, "cube", ssh_server)
    add_host(rt, owner, "nas", ssh_server, hostname="nas.lan")
    add_host(rt, other_owner, "cube", ssh_server, hostname="cube.other.lan")
    with pool.connection() as conn:
        mine = registry.list_hosts(conn, rt.settings, owner)
        theirs = registry.list_hosts(conn, rt.settings, other_owner)
        assert [(h.alias, h.hostname) for h in mine] == [("cube", "127.0.0.1"), ("nas", "nas.lan")]
        assert [(h.alias, h.hostname) for h in theirs] == [("cube", "cube.other.lan")]
        assert registry.get_host(conn, rt.settings, other_owner, "cube").hostname == "cube.other.lan"
        with pytest.raises(registry.HostNotFound):
            registry.get_host(conn, rt.settings, other_owner, "nas")
        with pytest.raises(registry.HostNotFound):
            registry.remove_host(conn, rt.settings, other_owner, "nas")
        assert [h.alias for h in registry.list_hosts(conn, rt.settings, owner)] == ["cube", "nas"]


def test_the_private_key_is_stored_only_sealed_for_its_owner(runtime_env, pool, owner, other_owner, ssh_server):
    rt = runtime_env()
    private_key = ssh_server.client_key.read_text()
    view = add_host(rt, owner, "cube", ssh_server)
    with pool.connection() as conn:
        row = conn.execute("SELECT * FROM ssh_hosts WHERE owner_id = %s AND alias = 'cube'", (owner,)).fetchone()
    assert_no_key(repr(row) + bytes(row["private_key_sealed"]).decode("latin-1"), private_key)
    assert rt.sealer.open(owner, row["private_key_sealed"]).decode() == private_key
    with pytest.raises(Exception, match="not sealed for this owner"):
        rt.sealer.open(other_owner, row["private_key_sealed"])
    assert view.key_fingerprint == parse_private_key(private_key).fingerprint
    assert view.host_key_fingerprint == parse_host_key(ssh_server.host_key).fingerprint
    assert set(view.as_dict()) == {"alias", "hostname", "port", "user", "key_type", "key_fingerprint",
                                   "host_key_fingerprint", "source", "created_at", "updated_at"}


def test_adding_an_existing_alias_needs_replace_and_replacing_keeps_created_at(runtime_env, pool, owner, ssh_server):
    rt = runtime_env()
    first = add_host(rt, owner, "cube", ssh_server)
    with pool.connection() as conn:
        with pytest.raises(registry.HostExists, match="already exists"):
            registry.put_host(conn, rt.sealer, owner, "cube", host_spec(ssh_server, port=2222), replace=False)
        again, created = registry.put_host(conn, rt.sealer, owner, "cube", host_spec(ssh_server, port=2222))
    assert not created and again.port == 2222 and again.created_at == first.created_at
    assert again.updated_at >= first.updated_at


def test_zerg_ssh_hosts_is_the_local_owners_bootstrap_and_nobody_elses(runtime_env, pool, owner, ssh_server):
    import json

    rt = runtime_env(ZERG_SSH_HOSTS=json.dumps({"boot": ssh_server.host_config()}))
    with pool.connection() as conn:
        local = local_owner(conn)
        (boot,) = [h for h in registry.list_hosts(conn, rt.settings, local) if h.alias == "boot"]
        assert boot.source == "ZERG_SSH_HOSTS" and boot.key_fingerprint is None
        assert boot.host_key_fingerprint == parse_host_key(ssh_server.host_key).fingerprint
        assert registry.list_hosts(conn, rt.settings, owner) == []
        with pytest.raises(registry.HostNotFound):
            registry.get_host(conn, rt.settings, owner, "boot")
        with pytest.raises(registry.BootstrapHost, match="comes from ZERG_SSH_HOSTS: remove it there"):
            registry.remove_host(conn, rt.settings, local, "boot")
        registry.put_host(conn, rt.sealer, local, "boot", host_spec(ssh_server, hostname="localhost"))
        assert registry.get_host(conn, rt.settings, local, "boot").source == "owner"  # the owner's row wins
        registry.remove_host(conn, rt.settings, local, "boot")
        assert registry.get_host(conn, rt.settings, local, "boot").source == "ZERG_SSH_HOSTS"


# --- the API -----------------------------------------------------------------------------------

def _token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200
    return body["token"]


def _body(server, **overrides) -> dict:
    spec = host_spec(server)
    return {"hostname": spec.hostname, "port": spec.port, "user": spec.user,
            "private_key": spec.private_key.get_secret_value(), "host_key": server.host_key} | overrides


def test_hosts_api_is_owner_scoped_and_never_returns_key_material(runtime_env, pool, ssh_server):
    runtime_env()
    alice, bob = new_owner(pool, "alice"), new_owner(pool, "bob")
    a, b = _token(alice), _token(bob)
    private_key = ssh_server.client_key.read_text()
    answers = []

    def api(method, path, body=None, token=a):
        status, doc, raw = call(method, path, body, token=token)
        answers.append(raw.get("body") or "")
        return status, doc

    status, created = api("PUT", "/api/jarvis/hosts/cube", _body(ssh_server))
    assert status == 200 and created["alias"] == "cube" and created["source"] == "owner"
    assert created["key_fingerprint"] == parse_private_key(private_key).fingerprint
    assert created["host_key_fingerprint"] == parse_host_key(ssh_server.host_key).fingerprint
    assert "private_key" not in created and "host_key" not in created
    assert api("GET", "/api/jarvis/hosts")[1]["hosts"] == [created]
    assert api("GET", "/api/jarvis/hosts/cube")[1] == created

    # Bob: nothing on every read path, and nothing he can remove.
    assert api("GET", "/api/jarvis/hosts", token=b) == (200, {"hosts": []})
    assert api("GET", "/api/jarvis/hosts/cube", token=b) == (404, {"error": "not_found", "message": "ssh host 'cube' not found"})
    assert api("DELETE", "/api/jarvis/hosts/cube", token=b)[0] == 404
    assert api("GET", "/api/jarvis/hosts/cube")[0] == 200

    status, replaced = api("PUT", "/api/jarvis/hosts/cube", _body(ssh_server, port=2200))
    assert status == 200 and replaced["port"] == 2200 and replaced["created_at"] == created["created_at"]
    assert api("DELETE", "/api/jarvis/hosts/cube")[0] == 204
    assert api("GET", "/api/jarvis/hosts/cube")[0] == 404
    assert api("GET", "/api/jarvis/hosts") == (200, {"hosts": []})
    for text in answers:
        assert_no_key(text, private_key)


@pytest.mark.parametrize(("path", "overrides", "message"), [
    ("/api/jarvis/hosts/-bad", {}, "alias: String should match pattern"),
    ("/api/jarvis/hosts/" + "a" * 65, {}, "alias: String should have at most 64 characters"),
    ("/api/jarvis/hosts/cube", {"port": 0}, "port: Input should be greater than or equal to 1"),
    ("/api/jarvis/hosts/cube", {"hostname": "cube lan"}, "hostname: Value error, a hostname is a DNS name"),
    ("/api/jarvis/hosts/cube", {"host_key": None}, "host_key: Input should be a valid string"),
    ("/api/jarvis/hosts/cube", {"private_key": "ENCRYPTED"}, "private_key: Value error, the private key is encrypted"),
    ("/api/jarvis/hosts/cube", {"private_key": "PUB"}, "private_key: Value error, not a private key"),
    ("/api/jarvis/hosts/cube", {"password": "x"}, "password: Extra inputs are not permitted"),
])
def test_bad_host_input_gets_a_precise_422_that_never_echoes_the_key(runtime_env, pool, ssh_server, path, overrides, message):
    runtime_env()
    token = _token(new_owner(pool, "carol"))
    encrypted = pem(ed25519.Ed25519PrivateKey.generate(), password=b"pw")
    replace = {"ENCRYPTED": encrypted, "PUB": ssh_server.host_key}
    body = _body(ssh_server, **{k: replace.get(v, v) if isinstance(v, str) else v for k, v in overrides.items()})
    status, doc, raw = call("PUT", path, body, token=token)
    assert status == 422 and doc["error"] == "validation_error" and message in doc["message"], doc
    assert_no_key(raw["body"], encrypted)
    assert_no_key(raw["body"], ssh_server.client_key.read_text())
    assert call("GET", "/api/jarvis/hosts", token=token)[1] == {"hosts": []}


def test_hosts_routes_need_a_session_before_anything_else():
    for method, path in (("GET", "/api/jarvis/hosts"), ("GET", "/api/jarvis/hosts/cube"),
                         ("DELETE", "/api/jarvis/hosts/-bad")):
        assert call(method, path)[0] == 401, path


def test_removing_a_bootstrap_host_through_the_api_is_a_409_naming_where_it_lives(runtime_env, pool, ssh_server):
    import json

    from zerg.auth import login
    from zerg.identity.devices import create_device

    rt = runtime_env(ZERG_SSH_HOSTS=json.dumps({"boot": ssh_server.host_config()}))
    with pool.connection() as conn:
        device = create_device(conn, local_owner(conn), unique_name("laptop"))
        token = login(conn, rt.settings, device.secret).token
    hosts = call("GET", "/api/jarvis/hosts", token=token)[1]["hosts"]
    assert {"alias": "boot", "source": "ZERG_SSH_HOSTS"}.items() <= next(h for h in hosts if h["alias"] == "boot").items()
    status, doc, _ = call("DELETE", "/api/jarvis/hosts/boot", token=token)
    assert (status, doc) == (409, {"error": "conflict", "message": "ssh host 'boot' comes from ZERG_SSH_HOSTS: remove it there"})


# --- zerg hosts ----------------------------------------------------------------------------------

def test_zerg_hosts_add_list_rm_act_for_the_owner_named_and_never_print_the_key(runtime_env, pool, ssh_server, capsys, tmp_path):
    runtime_env()
    alice, bob = new_owner(pool, "alice"), new_owner(pool, "bob")
    private_key = ssh_server.client_key.read_text()
    pin_file = tmp_path / "pin.pub"
    pin_file.write_text(f"127.0.0.1 {ssh_server.host_key}\n")
    add = ["hosts", "add", "cube", "--hostname", "127.0.0.1", "--port", str(ssh_server.port), "--user", ssh_server.user,
           "--key-file", str(ssh_server.client_key), "--owner", alice.name]
    assert main([*add, "--host-key", ssh_server.host_key]) == 0
    out = capsys.readouterr()
    fingerprint = parse_private_key(private_key).fingerprint
    assert "added ssh host cube" in out.out and fingerprint in out.out
    assert main([*add, "--host-key-file", str(pin_file)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main([*add, "--host-key-file", str(pin_file), "--replace"]) == 0
    assert "replaced ssh host cube" in capsys.readouterr().out

    assert main(["hosts", "list", "--owner", bob.name]) == 0
    assert "cube" not in (bob_out := capsys.readouterr().out) and "no ssh hosts" in bob_out
    assert main(["hosts", "rm", "cube", "--owner", bob.name]) == 2
    assert "ssh host 'cube' not found" in capsys.readouterr().err
    assert main(["hosts", "list", "--owner", alice.name]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("cube\t") and fingerprint in listed and "owner" in listed
    assert main(["hosts", "rm", "cube", "--owner", alice.name]) == 0
    assert main(["hosts", "list", "--owner", alice.name]) == 0
    everything = out.out + out.err + listed + capsys.readouterr().out
    assert "no ssh hosts" in everything
    assert_no_key(everything, private_key)


def test_zerg_hosts_add_scan_host_key_pins_what_the_server_presents_only_when_asked(runtime_env, pool, ssh_server, capsys):
    rt = runtime_env()
    carol = new_owner(pool, "carol")
    argv = ["hosts", "add", "cube", "--hostname", "127.0.0.1", "--port", str(ssh_server.port), "--user", ssh_server.user,
            "--key-file", str(ssh_server.client_key), "--owner", carol.name]
    with pytest.raises(SystemExit):  # a pin (or an explicit scan) is required
        main(argv)
    assert "one of the arguments --host-key --host-key-file --scan-host-key is required" in capsys.readouterr().err
    assert main([*argv, "--scan-host-key"]) == 0
    expected = parse_host_key(ssh_server.host_key).fingerprint
    assert f"pinned the key 127.0.0.1:{ssh_server.port} presents now: ssh-ed25519 {expected}" in capsys.readouterr().out
    with pool.connection() as conn:
        assert registry.get_host(conn, rt.settings, carol.owner_id, "cube").host_key_fingerprint == expected


def test_zerg_hosts_add_refuses_a_bad_key_file_in_one_line(runtime_env, pool, ssh_server, capsys, tmp_path):
    runtime_env()
    dave = new_owner(pool, "dave")
    encrypted = tmp_path / "enc"
    encrypted.write_text(pem(ed25519.Ed25519PrivateKey.generate(), password=b"pw"))
    base = ["hosts", "add", "cube", "--hostname", "127.0.0.1", "--user", "me", "--host-key", ssh_server.host_key,
            "--owner", dave.name]
    for key_file, message in ((tmp_path / "missing", "--key-file"), (encrypted, "private_key: Value error, the private key is encrypted"),
                              (Path(ssh_server.client_key.with_suffix(".none")), "No such file")):
        assert main([*base, "--key-file", str(key_file)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("zerg: error: ")
    assert main(["hosts", "add", "bad/alias", "--hostname", "h", "--user", "u", "--key-file", str(encrypted),
                 "--host-key", ssh_server.host_key, "--owner", dave.name]) == 2
    assert "an alias is 1-64 characters" in capsys.readouterr().err
    wrong = tmp_path / "wrong"
    _keypair(wrong)
    assert main([*base, "--key-file", str(wrong)]) == 0  # any valid key: the server decides at connect time
