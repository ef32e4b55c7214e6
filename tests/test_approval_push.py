"""A waiting approval reaches the owner's browsers by Web Push (issue 27 item 3): the real push path of
tests/test_push.py (pywebpush, the deployment's VAPID key, a strict push service on loopback that
verifies the JWT and decrypts the body with the subscriber's key) carrying the approval's id and its
Approve / Deny actions, once, to the owner's subscriptions only. The run is the real waiting run of
tests/test_approval_wait.py (local engine, scripted model, real sandbox). How the service worker
answers from those actions is tested in Chromium (tests/browser/test_approvals_web.py)."""

from __future__ import annotations

import pytest

from tests import test_approval_wait as wait_tests
from tests.support.api import call, login
from tests.support.push_service import PushService
from tests.support.waiting import wait_for
from tests.test_approval_wait import CALL, _finish, _worker
from zerg.approvals import requests as approvals
from zerg.approvals.wait import approve

waiting_run = wait_tests.waiting_run  # the fixture: a run whose worker's call waits for the owner


@pytest.fixture
def owner(alice) -> int:  # the waiting run's owner is one who can sign in and subscribe
    return alice.owner_id


@pytest.fixture
def service(runtime_env, pool):
    """The push service on loopback, and a runtime that may push to it; the deployment's VAPID key
    made afresh (a key another test sealed with its own local key could not be opened here)."""
    with pool.connection() as conn:
        conn.execute("DELETE FROM push_vapid_keys")
    runtime_env(ZERG_PUSH_ALLOW_LOOPBACK="true")  # kept in the environment for the waiting run's runtime
    svc = PushService()
    yield svc
    svc.close()


def subscribe(service: PushService, owner, name: str):
    sub = service.subscriber(name)
    status, body, _ = call("POST", "/api/jarvis/push/subscriptions",
                           {"endpoint": service.endpoint(sub), "keys": sub.keys()}, token=login(owner))
    assert status == 201, body
    return sub


def told(pool, owner_id: int, approval_id: int):
    with pool.connection() as conn:
        return approvals.get(conn, owner_id, approval_id)["notification_ids"] or None


def test_a_waiting_approval_is_pushed_once_with_approve_and_deny_actions(waiting_run, service, pool, owner, alice):
    laptop, phone = subscribe(service, alice, "alice-laptop"), subscribe(service, alice, "alice-phone")
    rt, run_id, arn, row = waiting_run()
    ids = wait_for(lambda: told(pool, owner, row["id"]), "the owner told about the approval", limit_s=60)

    for sub in (laptop, phone):
        (got,) = service.received_by(sub)
        assert got.payload == {
            "title": f"Approve container_exec? (approval {row['id']})",
            "body": f"Zerg asks: container_exec {CALL['command']}? Reply Y {row['code']} or N {row['code']}.",
            "url": f"/#/dashboard/runs/{run_id}", "severity": "warning", "run_id": run_id,
            "tag": f"zerg-approval-{row['id']}", "approval_id": row["id"],
            "actions": [{"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"}]}
        assert got.claims["aud"] == service.origin
    assert service.refused == []
    with pool.connection() as conn:
        pushed = conn.execute("SELECT id, status, purpose, run_id FROM notifications WHERE owner_id = %s "
                              "AND channel = 'push' ORDER BY id", (owner,)).fetchall()
    assert [(n["status"], n["purpose"], n["run_id"]) for n in pushed] == [("sent", "approval", run_id)] * 2
    assert {n["id"] for n in pushed} <= set(ids)  # the approval keeps every notification it was told by

    assert approve(rt, owner, row["id"]).decided  # the push's action answers through this same core answer
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]
    assert len(service.received_by(laptop)) == 1  # told once: nothing more is pushed for the answer


def test_another_owners_browser_never_gets_the_approval(waiting_run, service, pool, owner, alice, bob):
    bobs = subscribe(service, bob, "bob-laptop")
    alices = subscribe(service, alice, "alice-laptop")
    rt, _run_id, arn, row = waiting_run()
    wait_for(lambda: told(pool, owner, row["id"]), "the owner told about the approval", limit_s=60)
    assert len(service.received_by(alices)) == 1
    assert service.received_by(bobs) == []
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM notifications WHERE owner_id = %s AND purpose = 'approval'",
                            (bob.owner_id,)).fetchone()["n"] == 0
    assert approve(rt, owner, row["id"]).decided
    _finish(rt, arn)


def test_a_failing_push_service_leaves_the_approval_answerable(waiting_run, service, pool, owner, alice):
    from zerg.notify.notifications import IN_FLIGHT

    sub = subscribe(service, alice, "alice-laptop")
    service.answer(sub, 500)
    rt, run_id, arn, row = waiting_run()

    def finished_push_rows():
        with pool.connection() as conn:
            rows = conn.execute("SELECT status, reason FROM notifications WHERE owner_id = %s AND channel = 'push'",
                                (owner,)).fetchall()
        return rows if rows and all(r["reason"] != IN_FLIGHT for r in rows) else None

    (failed,) = wait_for(finished_push_rows, "the push recorded", limit_s=60)
    assert failed["status"] == "failed" and "500" in failed["reason"]
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "pending"  # still waits, answerable elsewhere
    assert approve(rt, owner, row["id"]).decided
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]


def test_push_turned_off_in_the_owners_policy_pushes_no_approval(waiting_run, service, pool, owner, alice):
    from tests.support.notify import verified_contact
    from zerg.notify.policy import PolicyChange, set_policy

    verified_contact(pool, owner, "email")  # the email goes out after the push: its id marks the notice done
    sub = subscribe(service, alice, "alice-laptop")
    with pool.connection() as conn:
        set_policy(conn, owner, PolicyChange(push=[]))
    rt, _run_id, arn, row = waiting_run()
    wait_for(lambda: told(pool, owner, row["id"]), "the owner told about the approval", limit_s=60)
    assert service.received_by(sub) == []
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM notifications WHERE owner_id = %s AND channel = 'push'",
                            (owner,)).fetchone()["n"] == 0
    assert approve(rt, owner, row["id"]).decided
    _finish(rt, arn)
