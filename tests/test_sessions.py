"""Sessions, devices, pairing codes and owner names: rotation and logout revoke at once, on every
route; pairing codes are one-time and short-lived; every read and revocation is owner-scoped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import httpx
import pytest

from tests.support.api import call
from tests.support.factories import unique_name
from tests.support.push_service import Subscriber
from zerg.api.app import openapi_document
from zerg.api.deps import PUBLIC_PATHS
from zerg.identity import pairing
from zerg.identity.devices import hash_secret
from zerg.owners import create_owner
from zerg.runs import store as runs


def _host_body() -> dict:
    """A PUT /hosts body that passes validation (keys generated here, never used to connect)."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key, host = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    return {"hostname": "127.0.0.1", "user": "ops",
            "private_key": key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption()).decode(),
            "host_key": host.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).decode()}


# Routes whose body must be valid to reach the credential check (a malformed body is reported first).
BODIES = {("/api/jarvis/supervisor", "post"): {"task": "x"}, ("/api/jarvis/hosts/{alias}", "put"): _host_body(),
          ("/api/jarvis/memory/file", "put"): {"content": "x"},
          ("/api/jarvis/contacts", "post"): {"kind": "email", "address": "owner@example.com"},
          ("/api/jarvis/contacts/verify", "post"): {"kind": "email", "address": "owner@example.com", "code": "123456"},
          ("/api/jarvis/policy", "patch"): {"quiet_hours": "off"}}
BODIES[("/api/jarvis/schedules", "post")] = {"name": "n", "task": "t", "rate": "1 hour"}
BODIES[("/api/jarvis/schedules/{schedule_id}", "patch")] = {}
BODIES[("/api/jarvis/agents/{agent}", "put")] = {"temperature": 0.5}
BODIES[("/api/jarvis/approvals/policy", "put")] = {}
BODIES[("/api/jarvis/route", "post")] = BODIES[("/api/jarvis/quick", "post")] = {"utterance": "what time is it"}
BODIES[("/api/jarvis/schedules/preview", "post")] = {"rate": "1 hour"}
BODIES[("/api/jarvis/mcp/servers/{name}", "put")] = {"url": "https://8.8.8.8/mcp"}
BODIES[("/api/jarvis/push/subscriptions", "post")] = {"endpoint": "https://8.8.8.8/push/x", "keys": Subscriber("/push/x").keys()}


def zerg(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The real ``zerg`` command in a child process (this checkout first on its path)."""
    return subprocess.run([sys.executable, "-m", "zerg.cli", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


@pytest.fixture
def alice(pool, runtime_env):
    runtime_env()
    with pool.connection() as conn:
        return create_owner(conn, unique_name("alice"))


@pytest.fixture
def bob(pool, runtime_env):
    with pool.connection() as conn:
        return create_owner(conn, unique_name("bob"))


def login(secret: str) -> dict:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": secret})
    assert status == 200, body
    return body


def every_authenticated_operation() -> list[tuple[str, str, dict | None]]:
    """(method, path) of every route that needs a session, from the OpenAPI document, with each path
    parameter set to "1" (credentials are checked before parameters, so any value does)."""
    ops = []
    for path, methods in openapi_document()["paths"].items():
        for method in methods:
            if path not in PUBLIC_PATHS:
                concrete = "/".join("1" if p.startswith("{") else p for p in path.split("/"))
                ops.append((method.upper(), concrete, BODIES.get((path, method))))
    return ops


def assert_refused_everywhere(token: str, message: str) -> None:
    ops = every_authenticated_operation()
    assert len(ops) >= 12
    for method, path, body in ops:
        status, answer, _ = call(method, path, body, token=token)
        assert (status, answer) == (401, {"error": "unauthorized", "message": message}), (method, path)


# --- rotation and logout revoke -------------------------------------------------------------

def test_rotation_shuts_out_the_old_secret_and_its_tokens_on_every_route(alice, pool, api_server):
    base, _ = api_server
    first, second = login(alice.device_secret), login(alice.device_secret)
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "mine")
    assert call("GET", f"/api/jarvis/runs/{run.run_id}", token=first["token"])[0] == 200

    out = zerg("owners", "rotate", alice.name.upper())  # names are looked up ignoring case
    assert out.returncode == 0, out.stderr
    assert "revoked: primary (and 2 live session(s) issued under them)" in out.stdout
    new_secret = out.stdout.split("(shown once, store it now): ")[1].strip()

    rotated = "this device's secret was rotated or revoked: authenticate with a current device secret"
    for old in (first, second):
        assert_refused_everywhere(old["token"], rotated)
        live = httpx.get(f"{base}/api/jarvis/supervisor/events?run_id={run.run_id}",
                         headers={"Authorization": f"Bearer {old['token']}"})
        assert (live.status_code, live.json()["message"]) == (401, rotated)  # the live SSE path too
    assert call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})[:2] == (
        401, {"error": "unauthorized", "message": "unknown device secret"})
    fresh = login(new_secret)
    assert fresh["owner_id"] == alice.owner_id
    assert call("GET", f"/api/jarvis/runs/{run.run_id}", token=fresh["token"])[0] == 200


def test_rotating_one_device_leaves_the_others_working(alice, pool):
    with pool.connection() as conn:
        code = pairing.create_code(conn, alice.owner_id)
    phone = call("POST", "/api/jarvis/pair", {"code": code.code, "device_name": "phone"})[1]
    phone_token, primary_token = login(phone["device_secret"])["token"], login(alice.device_secret)["token"]

    out = zerg("owners", "rotate", alice.name, "--device", "Phone")
    assert out.returncode == 0, out.stderr
    assert "revoked: phone (and 1 live session(s)" in out.stdout and "for 'phone'" in out.stdout
    assert call("GET", "/api/jarvis/thread", token=phone_token)[0] == 401
    assert call("GET", "/api/jarvis/thread", token=primary_token)[0] == 200
    missing = zerg("owners", "rotate", alice.name, "--device", "tablet")
    assert missing.returncode == 2 and "no live device named 'tablet'" in missing.stderr
    nobody = zerg("owners", "rotate", "nobody-" + alice.name)
    assert nobody.returncode == 2 and "no owner named" in nobody.stderr


def test_logout_revokes_the_calling_session_only_and_clears_the_cookie(alice):
    first, second = login(alice.device_secret), login(alice.device_secret)
    status, body, raw = call("POST", "/api/jarvis/logout", token=first["token"])
    assert status == 200 and body["session_id"] == first["session_id"] and body["revoked_at"]
    assert any(c.startswith("zerg_session=;") and "Max-Age=0" in c for c in raw["cookies"])

    assert_refused_everywhere(first["token"], "session revoked: authenticate again")
    assert call("GET", "/api/jarvis/thread", token=second["token"])[0] == 200
    assert login(alice.device_secret)["owner_id"] == alice.owner_id  # logout is not rotation


def test_logout_works_with_the_session_cookie_as_a_browser_sends_it(alice, api_server):
    base, _ = api_server
    browser = httpx.Client(base_url=base)
    token = login(alice.device_secret)["token"]
    # The web app's request: the cookie, its own Origin and the client header (zerg.api.security).
    cookie = {"Cookie": f"zerg_session={token}", "Origin": base, "X-Zerg-Client": "web"}
    assert browser.get("/api/jarvis/thread", headers=cookie).status_code == 200
    assert browser.post("/api/jarvis/logout", headers=cookie).status_code == 200
    refused = browser.get("/api/jarvis/thread", headers=cookie)
    assert (refused.status_code, refused.json()["message"]) == (401, "session revoked: authenticate again")


def test_an_open_live_stream_ends_when_its_session_is_revoked(alice, pool, api_server):
    base, configure = api_server
    configure(ZERG_HEARTBEAT_S="0.2")
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "a long one")
    token = login(alice.device_secret)["token"]
    auth = {"Authorization": f"Bearer {token}"}
    lines: list[str] = []
    opened, ended = threading.Event(), threading.Event()

    def watch() -> None:
        with httpx.stream("GET", f"{base}/api/jarvis/supervisor/events?run_id={run.run_id}", headers=auth,
                          timeout=30) as resp:
            for line in resp.iter_lines():
                lines.append(line)
                if line.startswith("event: supervisor_started"):
                    opened.set()
        ended.set()

    threading.Thread(target=watch, daemon=True).start()
    assert opened.wait(60)
    assert not ended.wait(0.5)  # the run is not over: the stream stays open with heartbeats
    assert httpx.post(f"{base}/api/jarvis/logout", headers=auth).status_code == 200
    assert ended.wait(60), "the live stream outlived its revoked session"
    assert not any(line.startswith("event: supervisor_complete") or line.startswith("event: error") for line in lines)
    again = httpx.get(f"{base}/api/jarvis/supervisor/events?run_id={run.run_id}", headers=auth)
    assert again.status_code == 401


def test_a_token_without_a_session_id_is_refused_with_a_reason(alice):
    from datetime import datetime, timedelta, timezone

    import jwt

    from zerg.auth import jwt_secret
    from zerg.config import get_settings

    now = datetime.now(timezone.utc)
    legacy = jwt.encode({"sub": str(alice.owner_id), "iat": now, "exp": now + timedelta(days=7)},
                        jwt_secret(get_settings()), algorithm="HS256")
    status, body, _ = call("GET", "/api/jarvis/thread", token=legacy)
    assert (status, body["message"]) == (401, "invalid token: it names no session (issued before sessions existed); "
                                               "authenticate again")


# --- pairing codes ----------------------------------------------------------------------------

def test_a_pairing_code_gives_a_new_device_its_own_secret_once(alice, pool):
    out = zerg("owners", "pair", alice.name)
    assert out.returncode == 0, out.stderr
    code = out.stdout.split("pairing code: ")[1].split()[0]
    assert len(code) == 11 and code[5] == "-" and set(code.replace("-", "")) <= set(pairing.ALPHABET)
    typed = " ".join(code.replace("-", "").lower()[i:i + 2] for i in range(0, 10, 2))  # as thumbs type it

    status, device, _ = call("POST", "/api/jarvis/pair", {"code": typed, "device_name": "  phone "})
    assert status == 201 and device["owner_id"] == alice.owner_id and device["device_name"] == "phone"
    assert device["device_secret"].startswith("zd_") and device["device_secret"] != alice.device_secret
    assert login(device["device_secret"])["device_id"] == device["device_id"]
    with pool.connection() as conn:
        stored = json.dumps(conn.execute("SELECT * FROM pairing_codes WHERE owner_id = %s", (alice.owner_id,)).fetchall(),
                            default=str)
    assert code.replace("-", "") not in stored and code not in stored  # only its hash

    again = call("POST", "/api/jarvis/pair", {"code": code, "device_name": "tablet"})
    assert again[:2] == (401, {"error": "unauthorized", "message": "unknown, expired or already used pairing code"})


def test_a_wrong_or_expired_pairing_code_gets_the_same_answer_and_bad_input_is_explained(alice, pool):
    with pool.connection() as conn:
        expired = pairing.create_code(conn, alice.owner_id)
        conn.execute("UPDATE pairing_codes SET expires_at = now() - interval '1 second', "
                     "created_at = now() - interval '11 minutes' WHERE owner_id = %s", (alice.owner_id,))
        live = pairing.create_code(conn, alice.owner_id)
    unknown = (401, {"error": "unauthorized", "message": "unknown, expired or already used pairing code"})
    assert call("POST", "/api/jarvis/pair", {"code": expired.code, "device_name": "phone"})[:2] == unknown
    wrong = "".join(pairing.ALPHABET[(pairing.ALPHABET.index(c) + 1) % len(pairing.ALPHABET)] for c in live.code if c != "-")
    assert call("POST", "/api/jarvis/pair", {"code": wrong, "device_name": "phone"})[:2] == unknown

    assert call("POST", "/api/jarvis/pair", {"code": "0OIL1-ABCDE", "device_name": "phone"})[:2] == (
        400, {"error": "bad_request", "message": pairing.SHAPE})
    assert call("POST", "/api/jarvis/pair", {"code": live.code})[:2] == (
        422, {"error": "validation_error", "message": "device_name: Field required"})
    status, body, _ = call("POST", "/api/jarvis/pair", {"code": live.code, "device_name": "ph\x1bone"})
    assert (status, body["message"]) == (422, "device_name: a device name must be printable: it contains U+001B (a control character)")
    status, body, _ = call("POST", "/api/jarvis/pair", {"code": live.code, "device_name": "PRIMARY"})
    assert (status, body["error"]) == (409, "conflict") and "already has a device named 'PRIMARY'" in body["message"]
    # Refusing the name did not use the code up.
    assert call("POST", "/api/jarvis/pair", {"code": live.code, "device_name": "phone"})[0] == 201


def test_pairing_codes_are_capped_and_live_minutes(alice, pool):
    from datetime import timedelta

    with pool.connection() as conn:
        codes = [pairing.create_code(conn, alice.owner_id, timedelta(minutes=5)) for _ in range(pairing.MAX_LIVE)]
        with pytest.raises(pairing.TooManyCodes, match="5 unused pairing codes are still alive"):
            pairing.create_code(conn, alice.owner_id)
        for ttl in (timedelta(seconds=30), timedelta(hours=2)):
            with pytest.raises(ValueError, match="lives 1-60 minutes"):
                pairing.create_code(conn, alice.owner_id, ttl)
    assert len({c.code for c in codes}) == pairing.MAX_LIVE
    with pool.connection() as conn:
        lives = conn.execute("SELECT expires_at - created_at AS life FROM pairing_codes WHERE owner_id = %s",
                             (alice.owner_id,)).fetchall()
    assert [r["life"] for r in lives] == [timedelta(minutes=5)] * pairing.MAX_LIVE
    out = zerg("owners", "pair", alice.name, "--minutes", "90")
    assert out.returncode == 2 and "lives 1-60 minutes" in out.stderr


# --- the owner's sessions and devices ----------------------------------------------------------

def test_sessions_list_shows_devices_and_sessions_never_a_secret_and_only_the_owners(alice, bob):
    mine, other = login(alice.device_secret), login(alice.device_secret)
    bobs = login(bob.device_secret)
    status, listing, raw = call("GET", "/api/jarvis/sessions", token=mine["token"])
    assert status == 200
    assert [(d["name"], d["active"]) for d in listing["devices"]] == [("primary", True)]
    by_id = {s["session_id"]: s for s in listing["sessions"]}
    assert set(by_id) == {mine["session_id"], other["session_id"]}
    assert by_id[mine["session_id"]]["current"] and not by_id[other["session_id"]]["current"]
    assert all(s["active"] and s["device_name"] == "primary" for s in by_id.values())
    for leak in (alice.device_secret, hash_secret(alice.device_secret), mine["token"], other["token"], "secret", "hash"):
        assert leak not in raw["body"]
    status, bobs_listing, _ = call("GET", "/api/jarvis/sessions", token=bobs["token"])
    assert [s["session_id"] for s in bobs_listing["sessions"]] == [bobs["session_id"]]


def test_me_names_the_signed_in_owner_only_and_needs_a_session(alice, bob):
    """The web client's header: each session sees its own owner's name, never another's."""
    for owner in (alice, bob):
        status, me, raw = call("GET", "/api/jarvis/me", token=login(owner.device_secret)["token"])
        assert (status, me) == (200, {"owner_id": owner.owner_id, "name": owner.name})
        assert owner.device_secret not in raw["body"]
    assert call("GET", "/api/jarvis/me")[0] == 401


def test_another_owners_session_or_device_cannot_be_revoked_and_gets_404(alice, bob):
    mine, bobs = login(alice.device_secret), login(bob.device_secret)
    for path, what in ((f"/api/jarvis/sessions/{mine['session_id']}", f"session {mine['session_id']}"),
                       (f"/api/jarvis/devices/{mine['device_id']}", f"device {mine['device_id']}")):
        assert call("DELETE", path, token=bobs["token"])[:2] == (404, {"error": "not_found", "message": f"{what} not found"})
    assert call("GET", "/api/jarvis/thread", token=mine["token"])[0] == 200
    assert login(alice.device_secret)["owner_id"] == alice.owner_id
    missing = "00000000-0000-4000-8000-000000000000"
    assert call("DELETE", f"/api/jarvis/sessions/{missing}", token=bobs["token"])[1]["message"] == f"session {missing} not found"
    status, body, _ = call("DELETE", "/api/jarvis/sessions/not-a-uuid", token=bobs["token"])
    assert status == 422 and body["message"].startswith("session_id: Input should be a valid UUID")


def test_revoking_a_session_or_a_device_takes_effect_on_the_next_request(alice, pool):
    mine, other, third = (login(alice.device_secret) for _ in range(3))
    status, body, _ = call("DELETE", f"/api/jarvis/sessions/{other['session_id']}", token=mine["token"])
    assert status == 200 and body["session_id"] == other["session_id"]
    assert call("GET", "/api/jarvis/workers", token=other["token"])[1]["message"] == "session revoked: authenticate again"
    assert call("GET", "/api/jarvis/workers", token=mine["token"])[0] == 200
    listing = call("GET", "/api/jarvis/sessions", token=mine["token"])[1]
    assert {s["session_id"]: s["active"] for s in listing["sessions"]}[other["session_id"]] is False

    with pool.connection() as conn:
        code = pairing.create_code(conn, alice.owner_id)
    phone = call("POST", "/api/jarvis/pair", {"code": code.code, "device_name": "phone"})[1]
    phone_token = login(phone["device_secret"])["token"]
    status, body, _ = call("DELETE", f"/api/jarvis/devices/{phone['device_id']}", token=mine["token"])
    assert status == 200 and body["sessions_revoked"] == 1 and body["name"] == "phone"
    assert call("GET", "/api/jarvis/thread", token=phone_token)[0] == 401
    assert call("POST", "/api/jarvis/auth", {"device_secret": phone["device_secret"]})[0] == 401
    assert call("GET", "/api/jarvis/thread", token=third["token"])[0] == 200  # the primary device is untouched
    again = call("DELETE", f"/api/jarvis/devices/{phone['device_id']}", token=mine["token"])[1]
    assert again["revoked_at"] == body["revoked_at"] and again["sessions_revoked"] == 0  # idempotent


def test_the_openapi_document_types_the_ids_and_no_listing_model_has_a_secret_field():
    doc = openapi_document()
    (sid,) = doc["paths"]["/api/jarvis/sessions/{session_id}"]["delete"]["parameters"]
    assert sid["schema"]["format"] == "uuid" and sid["required"]
    (did,) = doc["paths"]["/api/jarvis/devices/{device_id}"]["delete"]["parameters"]
    assert did["schema"]["type"] == "integer" and did["schema"]["minimum"] == 1
    schemas = doc["components"]["schemas"]
    for model in ("SessionList", "DeviceInfo", "SessionInfo", "SessionRevoked", "DeviceRevoked"):
        assert not [f for f in schemas[model]["properties"] if any(w in f for w in ("secret", "hash", "token"))], model
    assert set(schemas["AuthToken"]["properties"]) >= {"token", "session_id", "device_id", "expires_at"}


# --- owner names --------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "message"), [
    ("", "an owner name must not be empty or only whitespace"),
    (" \t\n ", "an owner name must not be empty or only whitespace"),
    ("ali\x07ce", "an owner name must be printable: it contains U+0007 (a control character)"),
    ("ali\nce", "an owner name must be printable: it contains U+000A (a control character)"),
    ("ali\u200bce", "an owner name must be printable: it contains U+200B (ZERO WIDTH SPACE)"),
    ("ali\u00a0ce", "an owner name must be printable: it contains U+00A0 (NO-BREAK SPACE)"),
    ("x" * 201, "an owner name is 201 characters; the limit is 200"),
])
def test_owner_names_are_refused_with_the_reason(pool, name, message):
    from zerg.identity.names import InvalidName

    with pool.connection() as conn, pytest.raises(InvalidName) as err:
        create_owner(conn, name)
    assert str(err.value) == message


def test_owner_names_are_trimmed_and_unique_ignoring_case_also_from_the_cli(pool):
    from zerg.identity.names import NameTaken

    name = unique_name("Dora")
    with pool.connection() as conn:
        assert create_owner(conn, f"  {name}\t").name == name
        with pytest.raises(NameTaken, match=f"an owner named '{name.lower()}' already exists"):
            create_owner(conn, name.lower())
    dup = zerg("owners", "add", f" {name.upper()} ")
    assert dup.returncode == 2 and f"an owner named '{name.upper()}' already exists" in dup.stderr
    bell = zerg("owners", "add", "a\x07b")
    assert bell.returncode == 2 and "must be printable: it contains U+0007 (a control character)" in bell.stderr
    assert "Traceback" not in dup.stderr + bell.stderr


def test_the_database_refuses_an_unclean_or_duplicate_name_whoever_writes_it(pool):
    import psycopg

    name = unique_name("eve")
    with pool.connection() as conn:
        create_owner(conn, name)
        for bad in (f"{name} ", f"x\x01{name}", name.upper()):
            with pytest.raises((psycopg.errors.CheckViolation, psycopg.errors.UniqueViolation)), conn.transaction():
                conn.execute("INSERT INTO owners (name) VALUES (%s)", (bad,))


# --- migration 0004 on a database that has owners ---------------------------------------------

def test_migration_0004_keeps_every_secret_as_a_primary_device_and_cleans_names_in_id_order(make_database):
    import psycopg
    from psycopg.rows import dict_row

    from zerg.auth import login as auth_login
    from zerg.config import get_settings
    from zerg.migrate import available

    migrations = {m.version: m for m in available()}
    legacy = [  # (name, secret) as 0001 allowed them
        ("alice", "zd_alice"), ("Alice", "zd_Alice"), ("alice (2)", "zd_alice2"), (" bob\t", "zd_bob"),
        ("\x07", None), ("ca\x1brol", "zd_carol"), ("alice", "zd_alice3"),
    ]
    with psycopg.connect(make_database(), autocommit=True, row_factory=dict_row) as conn:
        for version in (1, 2, 3):
            conn.execute(migrations[version].sql)
        for name, secret in legacy:
            conn.execute("INSERT INTO owners (name, device_secret_hash) VALUES (%s, %s)",
                         (name, hash_secret(secret) if secret else None))
        conn.execute(migrations[4].sql)

        names = [r["name"] for r in conn.execute("SELECT name FROM owners ORDER BY id")]
        # The oldest keeps a name; later ones take the first free suffix, in id order.
        assert names == ["alice", "Alice (3)", "alice (2)", "bob", "owner 5", "ca rol", "alice (4)"]
        devices = conn.execute("SELECT owner_id, name, secret_hash FROM devices ORDER BY owner_id").fetchall()
        assert [(d["owner_id"], d["name"]) for d in devices] == [(1, "primary"), (2, "primary"), (3, "primary"),
                                                                 (4, "primary"), (6, "primary"), (7, "primary")]
        assert {d["secret_hash"] for d in devices} == {hash_secret(s) for _, s in legacy if s}
        assert not conn.execute("SELECT 1 FROM information_schema.columns "
                                "WHERE table_name = 'owners' AND column_name = 'device_secret_hash'").fetchone()
        issued = auth_login(conn, get_settings(), "zd_bob")  # an old secret still logs in
        assert issued is not None and issued.owner_id == 4
