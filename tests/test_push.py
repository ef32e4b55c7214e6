"""Web Push as an escalation channel: subscriptions through the API, the VAPID key made once and
kept sealed, alerts encrypted and signed to a strict push service on loopback (which verifies the
VAPID JWT and decrypts the aes128gcm body with the subscriber's key), gone subscriptions removed,
failures recorded, owners isolated, and the endpoint checked as the URL the server POSTs to."""

from __future__ import annotations

import threading

import pytest

from tests.support.api import call
from tests.support.push_service import PushService, b64url
from tests.test_escalation_matrix import assessment, finish, schedule, scheduled_run
from zerg.notify import notifications
from zerg.notify.policy import PolicyChange, set_policy


@pytest.fixture
def service():
    svc = PushService()
    yield svc
    svc.close()


@pytest.fixture
def rt(runtime_env, pool):
    """A runtime that may push to loopback; the deployment's key made afresh (the test's own local
    sealing key: the row a previous test sealed with its key could not be opened here)."""
    with pool.connection() as conn:
        conn.execute("DELETE FROM push_vapid_keys")
    return runtime_env(ZERG_PUSH_ALLOW_LOOPBACK="true")


def token(owner) -> str:
    return call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})[1]["token"]


def subscribe(service: PushService, tok: str, name: str) -> tuple[object, dict]:
    sub = service.subscriber(name)
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": service.endpoint(sub), "keys": sub.keys()}, token=tok)
    assert status == 201, body
    return sub, body


def push_rows(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return [n for n in notifications.list_for_owner(conn, owner_id, limit=200) if n["channel"] == "push"][::-1]


def critical_run(rt, pool, owner_id: int, headline: str = "nginx is down on web1", severity: str = "critical"):
    with pool.connection() as conn:  # no repeats: the first alert is what these tests look at
        set_policy(conn, owner_id, PolicyChange(escalation_repeats=0))
    run = scheduled_run(rt, pool, owner_id, schedule(rt, owner_id))
    return run, finish(rt, pool, run, assessment(severity, headline, "port 443 refused"))


# --- the alert reaches the browser ----------------------------------------------------------------

def test_a_critical_background_result_is_pushed_encrypted_signed_and_recorded(rt, pool, alice, service):
    tok = token(alice)
    sub, _ = subscribe(service, tok, "alice-laptop")
    run, out = critical_run(rt, pool, alice.owner_id)

    (got,) = service.received_by(sub)
    assert got.payload == {"title": "[Zerg CRITICAL] nginx is down on web1",
                           "body": f"Zerg CRITICAL: nginx is down on web1. port 443 refused Ack: zerg inbox ack {run['id']}",
                           "url": "http://127.0.0.1:8000/#/", "severity": "critical", "run_id": run["id"],
                           "tag": f"zerg-run-{run['id']}"}
    assert got.claims["sub"] == "mailto:zerg@zerg.localhost" and got.claims["aud"] == service.origin
    assert got.vapid_key == call("GET", "/api/jarvis/push/key", token=tok)[1]["public_key"]
    assert service.refused == []

    (row,) = [n for n in out["notifications"] if n["channel"] == "push"]
    assert (row["status"], row["purpose"], row["severity"], row["address"]) == ("sent", "alert", "critical", service.origin)
    assert row["subject"] == "[Zerg CRITICAL] nginx is down on web1" and row["contact_id"] is None
    listed = call("GET", "/api/jarvis/push/subscriptions", token=tok)[1]["subscriptions"]
    assert listed[0]["last_sent_at"] is not None and listed[0]["failures"] == 0


def test_a_warning_is_pushed_info_is_not_and_the_policy_can_turn_push_off(rt, pool, alice, service):
    tok = token(alice)
    sub, _ = subscribe(service, tok, "alice-phone")
    critical_run(rt, pool, alice.owner_id, "Disk at 91%", severity="warning")
    critical_run(rt, pool, alice.owner_id, "All fine", severity="info")
    assert [r.payload["severity"] for r in service.received_by(sub)] == ["warning"]

    status, policy, _ = call("PATCH", "/api/jarvis/policy", {"push": ["critical", "critical"]}, token=tok)
    assert status == 200 and policy["push"] == ["critical"] and policy["daily_push_limit"] == 50
    critical_run(rt, pool, alice.owner_id, "Disk at 95%", severity="warning")
    assert len(service.received_by(sub)) == 1  # warnings no longer pushed
    call("PATCH", "/api/jarvis/policy", {"push": []}, token=tok)
    critical_run(rt, pool, alice.owner_id, "nginx down")
    assert len(service.received_by(sub)) == 1 and len(push_rows(pool, alice.owner_id)) == 1


def test_an_owner_without_a_subscription_gets_no_push_row(rt, pool, alice):
    _, out = critical_run(rt, pool, alice.owner_id)
    assert [n["channel"] for n in out["notifications"] if n["channel"] == "push"] == []
    assert {n["channel"] for n in out["notifications"]} == {"email", "sms"}  # suppressed: no verified contact


def test_each_repeat_of_a_critical_alert_is_pushed_too(rt, pool, alice, service):
    from zerg.alerts.escalations import export_escalations
    from zerg.alerts.repeats import repeat

    sub, _ = subscribe(service, token(alice), "alice-repeats")
    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(escalation_repeats=1, escalation_every_s=3600))
    run = scheduled_run(rt, pool, alice.owner_id, schedule(rt, alice.owner_id))
    finish(rt, pool, run, assessment("critical", "nginx is down", "port 443 refused"))
    with pool.connection() as conn:
        (esc,) = [e for e in export_escalations(conn, alice.owner_id) if e["run_id"] == run["id"]]
        conn.execute("UPDATE escalations SET started_at = started_at - interval '1 hour' WHERE id = %s", (esc["id"],))
    repeat(rt, alice.owner_id, run["id"], esc["id"])
    titles = [r.payload["title"] for r in service.received_by(sub)]
    assert titles[0] == "[Zerg CRITICAL] nginx is down" and "[Zerg CRITICAL] nginx is down (repeat 1)" in titles
    assert [(r["purpose"], r["attempt"]) for r in push_rows(pool, alice.owner_id)][:2] == [("alert", 0), ("escalation", 1)]


# --- the push service says no ------------------------------------------------------------------------

def test_a_gone_subscription_is_deleted_and_the_row_says_why(rt, pool, alice, service):
    tok = token(alice)
    sub, body = subscribe(service, tok, "alice-old-browser")
    service.answer(sub, 410)
    critical_run(rt, pool, alice.owner_id)
    (row,) = push_rows(pool, alice.owner_id)
    assert row["status"] == "failed" and "410" in row["reason"] and "gone" in row["reason"]
    assert call("GET", "/api/jarvis/push/subscriptions", token=tok)[1]["subscriptions"] == []


@pytest.mark.parametrize(("status", "why"), [(500, "answered 500"), (429, "answered 429"),
                                             (301, "redirects are not followed")])
def test_another_failure_is_counted_on_the_subscription_and_recorded(rt, pool, alice, service, status, why):
    tok = token(alice)
    sub, _ = subscribe(service, tok, f"alice-flaky-{status}")
    service.answer(sub, status)
    critical_run(rt, pool, alice.owner_id)
    (row,) = push_rows(pool, alice.owner_id)
    assert row["status"] == "failed" and why in row["reason"]
    (listed,) = call("GET", "/api/jarvis/push/subscriptions", token=tok)[1]["subscriptions"]
    assert listed["failures"] == 1 and listed["last_sent_at"] is None
    with pool.connection() as conn:  # a failed push gives its reservation back
        from zerg.notify import limits
        from zerg.timestamps import utcnow

        assert limits.used(conn, alice.owner_id, "push", utcnow().date()) == 0


def test_a_slow_push_service_is_cut_off_by_the_timeout(runtime_env, pool, alice, service):
    with pool.connection() as conn:
        conn.execute("DELETE FROM push_vapid_keys")
    rt = runtime_env(ZERG_PUSH_ALLOW_LOOPBACK="true", ZERG_PUSH_TIMEOUT_S="0.3")
    sub, _ = subscribe(service, token(alice), "alice-slow")
    service.delay(sub, 2.0)
    critical_run(rt, pool, alice.owner_id)
    (row,) = push_rows(pool, alice.owner_id)
    assert row["status"] == "failed" and row["reason"] == "the push service did not answer within 0.3 s"


def test_the_daily_push_limit_suppresses_what_is_past_it(rt, pool, alice, service):
    tok = token(alice)
    sub, _ = subscribe(service, tok, "alice-limited")
    call("PATCH", "/api/jarvis/policy", {"daily_push_limit": 1}, token=tok)
    critical_run(rt, pool, alice.owner_id, "first")
    critical_run(rt, pool, alice.owner_id, "second")
    assert [(r["status"], r["reason"]) for r in push_rows(pool, alice.owner_id)] == [
        ("sent", None), ("suppressed", "daily push limit of 1 reached")]
    assert len(service.received_by(sub)) == 1


# --- owners are isolated ------------------------------------------------------------------------------

def test_one_owners_alert_never_reaches_another_owners_browser(rt, pool, alice, bob, service):
    alice_sub, body = subscribe(service, token(alice), "alice-isolated")
    bob_tok = token(bob)
    bob_sub, _ = subscribe(service, bob_tok, "bob-isolated")
    run, _ = critical_run(rt, pool, bob.owner_id, "bob's server is down")
    assert service.received_by(alice_sub) == [] and [r.payload["run_id"] for r in service.received_by(bob_sub)] == [run["id"]]
    assert push_rows(pool, alice.owner_id) == []

    assert [s["endpoint"] for s in call("GET", "/api/jarvis/push/subscriptions", token=bob_tok)[1]["subscriptions"]] == [
        service.endpoint(bob_sub)]
    status, err, _ = call("DELETE", f"/api/jarvis/push/subscriptions/{body['id']}", token=bob_tok)
    assert (status, err) == (404, {"error": "not_found", "message": f"push subscription {body['id']} not found"})
    assert len(call("GET", "/api/jarvis/push/subscriptions", token=token(alice))[1]["subscriptions"]) == 1


# --- subscriptions through the API ---------------------------------------------------------------------

def test_subscribing_is_idempotent_per_endpoint_and_never_returns_keys(rt, pool, alice, service):
    tok = token(alice)
    sub, first = subscribe(service, tok, "alice-same")
    status, again, _ = call("POST", "/api/jarvis/push/subscriptions",
                            {"endpoint": service.endpoint(sub), "keys": sub.keys(), "expirationTime": None}, token=tok)
    assert status == 201 and again["id"] == first["id"]
    assert set(first) == {"id", "endpoint", "device_id", "created_at", "last_sent_at", "failures"}
    listed = call("GET", "/api/jarvis/push/subscriptions", token=tok)[1]
    assert [s["id"] for s in listed["subscriptions"]] == [first["id"]]
    assert sub.p256dh not in str(listed) and b64url(sub.auth) not in str(listed)
    status, _, _ = call("DELETE", f"/api/jarvis/push/subscriptions/{first['id']}", token=tok)
    assert status == 204 and call("GET", "/api/jarvis/push/subscriptions", token=tok)[1]["subscriptions"] == []
    assert call("DELETE", f"/api/jarvis/push/subscriptions/{first['id']}", token=tok)[0] == 404


def test_a_twenty_first_subscription_is_a_409(rt, pool, alice, service):
    tok = token(alice)
    for n in range(20):
        subscribe(service, tok, f"alice-many-{n}")
    sub = service.subscriber("alice-many-20")
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": service.endpoint(sub), "keys": sub.keys()}, token=tok)
    assert status == 409 and body["message"] == "20 push subscriptions already (at most 20): delete one first"


def test_the_test_push_reaches_every_subscription_and_is_recorded(rt, pool, alice, service):
    tok = token(alice)
    status, body, _ = call("POST", "/api/jarvis/push/test", token=tok)
    assert status == 409 and "no push subscription" in body["message"]
    one, _ = subscribe(service, tok, "alice-test-1")
    two, _ = subscribe(service, tok, "alice-test-2")
    status, body, _ = call("POST", "/api/jarvis/push/test", token=tok)
    assert status == 200 and [n["status"] for n in body["notifications"]] == ["sent", "sent"]
    assert all(n["purpose"] == "test" and n["channel"] == "push" for n in body["notifications"])
    assert [r.payload["tag"] for r in service.received_by(one) + service.received_by(two)] == ["zerg-test"] * 2


# --- refusals ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("endpoint", "message"), [
    ("http://push.example.com/x", "endpoint: endpoint must be an https:// URL"),
    ("https://10.0.0.7/push/x", "resolves to 10.0.0.7: a private address"),
    ("https://169.254.169.254/latest", "resolves to 169.254.169.254"),
    ("https://127.0.0.1:9/push/x", "resolves to 127.0.0.1: a loopback address"),
    ("https://[::1]/push/x", "resolves to ::1"),
    ("https://localhost/push/x", "resolves to 127.0.0.1"),
    ("https://user:pw@push.example.com/x", "must not carry credentials"),
    ("https://push.example.com/x#frag", "must not have a #fragment"),
    ("https://no-such-host.invalid/x", "does not resolve"),
    ("https://push.example.com/x y", "spaces or control characters"),
])
def test_an_endpoint_the_server_must_not_post_to_is_refused(runtime_env, pool, alice, service, endpoint, message):
    runtime_env()  # no ZERG_PUSH_ALLOW_LOOPBACK
    sub = service.subscriber("refused")
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions", {"endpoint": endpoint, "keys": sub.keys()},
                           token=token(alice))
    assert status == 422 and message in body["message"], body
    assert call("GET", "/api/jarvis/push/subscriptions", token=token(alice))[1]["subscriptions"] == []


def test_loopback_needs_the_setting(runtime_env, pool, alice, service):
    runtime_env()
    sub = service.subscriber("loopback")
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": service.endpoint(sub), "keys": sub.keys()}, token=token(alice))
    assert status == 422 and body["message"] == "endpoint: endpoint must be an https:// URL"


def test_the_loopback_setting_is_refused_on_lambda():
    from zerg.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="ZERG_PUSH_ALLOW_LOOPBACK=true is refused on Lambda"):
        load_settings({"ZERG_PUSH_ALLOW_LOOPBACK": "true", "AWS_LAMBDA_FUNCTION_NAME": "zerg-events"})


def _keys(**change) -> dict:
    from tests.support.push_service import Subscriber

    return {**Subscriber("/x").keys(), **change}


@pytest.mark.parametrize(("keys", "message"), [
    (_keys(p256dh=b64url(b"\x04" + b"\x01" * 64)), "keys.p256dh: Value error, is not a point on the P-256 curve"),
    (_keys(p256dh=b64url(b"\x03" + b"\x01" * 64)), "must be an uncompressed P-256 point (65 bytes starting 0x04)"),
    (_keys(p256dh="!" * 87), "keys.p256dh: Value error, is not base64url"),
    (_keys(auth=b64url(b"\x01" * 17)), "keys.auth: Value error, must be 16 bytes, not 17"),
    (_keys(auth="A" * 40), "keys.auth: String should have at most 30 characters"),
    ({"p256dh": _keys()["p256dh"]}, "keys.auth: Field required"),
])
def test_bad_browser_keys_are_a_422_naming_the_key(rt, alice, keys, message):
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": "https://push.example.com/x", "keys": keys}, token=token(alice))
    assert status == 422 and message in body["message"], body


def test_an_oversized_body_is_refused(rt, alice):
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": "https://push.example.com/" + "x" * 5000, "keys": _keys()}, token=token(alice))
    assert status in (413, 422) and "endpoint" in body["message"]


# --- the deployment's key -------------------------------------------------------------------------------

def test_the_vapid_key_is_made_once_kept_sealed_and_the_same_for_racing_runtimes(rt, pool, runtime_env):
    from zerg.notify import push
    from zerg.wiring import build_runtime

    with pool.connection() as conn:
        conn.execute("DELETE FROM push_vapid_keys")
    runtimes = [rt, build_runtime(rt.settings)]
    keys: list[str] = []
    barrier = threading.Barrier(2)

    def cold_start(r) -> None:
        barrier.wait()
        keys.append(push.public_key(r))

    threads = [threading.Thread(target=cold_start, args=(r,)) for r in runtimes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 2 and keys[0] == keys[1]
    assert push.public_key(runtime_env(ZERG_PUSH_ALLOW_LOOPBACK="true")) == keys[0]  # a later cold start too
    raw = base64_decode(keys[0])
    assert len(raw) == 65 and raw[0] == 4
    with pool.connection() as conn:
        (row,) = conn.execute("SELECT private_key_sealed FROM push_vapid_keys").fetchall()
    sealed = bytes(row["private_key_sealed"])
    assert sealed.startswith(b"zl1") and b"PRIVATE" not in sealed
    with pytest.raises(Exception):  # bound to the deployment: never opens as an owner's secret
        rt.sealer.open(1, sealed)


def test_a_deployment_secret_and_an_owners_secret_never_open_as_each_other(rt):
    from zerg.sealing import SealError

    deployment, owners = rt.sealer.seal_deployment(b"vapid"), rt.sealer.seal(7, b"ssh key")
    assert rt.sealer.open_deployment(deployment) == b"vapid" and rt.sealer.open(7, owners) == b"ssh key"
    with pytest.raises(SealError):
        rt.sealer.open_deployment(owners)
    with pytest.raises(SealError):
        rt.sealer.open(7, deployment)


def test_one_slow_browser_does_not_hold_up_the_others(runtime_env, pool, alice, service):
    with pool.connection() as conn:
        conn.execute("DELETE FROM push_vapid_keys")
    rt = runtime_env(ZERG_PUSH_ALLOW_LOOPBACK="true", ZERG_PUSH_TIMEOUT_S="0.5")
    tok = token(alice)
    slow, _ = subscribe(service, tok, "alice-slow-1")
    fast, _ = subscribe(service, tok, "alice-fast-2")
    service.delay(slow, 2.0)
    critical_run(rt, pool, alice.owner_id)
    assert sorted((r["status"], r["reason"] or "") for r in push_rows(pool, alice.owner_id)) == [
        ("failed", "the push service did not answer within 0.5 s"), ("sent", "")]  # sent side by side: any order
    assert len(service.received_by(fast)) == 1


def base64_decode(text: str) -> bytes:
    from tests.support.push_service import unb64url

    return unb64url(text)


def test_the_export_and_the_listing_omit_the_browser_keys(rt, pool, alice, service):
    from zerg.notify.push_subscriptions import export_push_subscriptions
    from zerg.privacy.export import secret_column

    subscribe(service, token(alice), "alice-export")
    with pool.connection() as conn:
        (row,) = list(export_push_subscriptions(conn, alice.owner_id))
    assert not [c for c in row if secret_column(c)]
    assert secret_column("p256dh_secret") and secret_column("auth_secret")


def test_the_payload_is_cut_to_three_kilobytes():
    from zerg.notify.push import PAYLOAD_MAX, PushMessage

    data = PushMessage(title="t" * 5000, body="é" * 5000, severity="critical", run_id=1, tag="x").payload()
    assert len(data) <= PAYLOAD_MAX and b'"severity": "critical"' in data
