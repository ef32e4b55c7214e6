"""GET /api/jarvis/inbound: the owner's inbound email and SMS, newest first, each body cut to a
preview; another owner's messages and those of unknown senders (no owner) are never listed."""

from __future__ import annotations

import secrets

import pytest

from tests.support.api import call


def inbound_row(pool, owner_id: int | None, *, channel: str = "sms", body: str = "ack", status: str = "rejected",
                reason: str | None = "unknown sender", sender: str = "+15550100000") -> int:
    """One ``inbound_messages`` row as the pipeline writes it (an unknown sender's has no owner)."""
    with pool.connection() as conn:
        return conn.execute(
            """INSERT INTO inbound_messages (channel, provider_id, source, owner_id, sender, body, status, reason)
               VALUES (%s, %s, 'local', %s, %s, %s, %s, %s) RETURNING id""",
            (channel, f"test-{secrets.token_hex(8)}", owner_id, sender, body, status, reason)).fetchone()["id"]


@pytest.fixture
def tokens(runtime_env, alice, bob):
    runtime_env()
    return {who.name: call("POST", "/api/jarvis/auth", {"device_secret": who.device_secret})[1]["token"]
            for who in (alice, bob)}


def test_the_inbound_list_is_the_owners_newest_first_in_pages(pool, alice, tokens):
    mine = [inbound_row(pool, alice.owner_id, body=f"reply {i}", status="run", reason=None) for i in range(3)]
    token = tokens[alice.name]

    status, page, _ = call("GET", "/api/jarvis/inbound?limit=2", token=token)

    assert status == 200 and [m["id"] for m in page["messages"]] == mine[::-1][:2]
    assert page["next_before_id"] == mine[1]
    first = page["messages"][0]
    assert (first["channel"], first["status"], first["body_preview"], first["source"]) == ("sms", "run", "reply 2", "local")
    assert set(first) == {"id", "channel", "source", "status", "reason", "received_at", "sender", "subject",
                          "body_preview", "run_id", "answers_run_id"}  # never the owner id, the raw key, the ids
    status, rest, _ = call("GET", f"/api/jarvis/inbound?before_id={page['next_before_id']}", token=token)
    assert [m["id"] for m in rest["messages"]] == [mine[0]] and rest["next_before_id"] is None


def test_another_owners_messages_and_unknown_senders_are_never_listed(pool, alice, bob, tokens):
    alices = inbound_row(pool, alice.owner_id, body="alice's", sender="+15550100001")
    bobs = inbound_row(pool, bob.owner_id, body="bob's", sender="+15550100002")
    unowned = inbound_row(pool, None, body="a stranger's")

    for name, own in ((alice.name, alices), (bob.name, bobs)):
        listed = [m["id"] for m in call("GET", "/api/jarvis/inbound?limit=200", token=tokens[name])[1]["messages"]]
        assert listed == [own], name
        assert unowned not in listed
        # Paging from above another owner's id still shows only one's own.
        below = call("GET", f"/api/jarvis/inbound?before_id={max(alices, bobs, unowned) + 1}", token=tokens[name])[1]
        assert [m["id"] for m in below["messages"]] == [own]


def test_a_long_body_is_listed_as_a_bounded_preview(pool, alice, tokens):
    inbound_row(pool, alice.owner_id, channel="email", body="x" * 5000, status="run", reason=None,
                sender="alice@example.com")

    (message,) = call("GET", "/api/jarvis/inbound", token=tokens[alice.name])[1]["messages"]

    assert message["body_preview"] == "x" * 200


def test_bad_paging_parameters_are_refused_with_the_parameter_named(tokens, alice):
    for query, name in (("limit=0", "limit"), ("limit=201", "limit"), ("before_id=0", "before_id"),
                        ("limit=abc", "limit")):
        status, body, _ = call("GET", f"/api/jarvis/inbound?{query}", token=tokens[alice.name])
        assert status == 422 and name in body["message"], query
    assert call("GET", "/api/jarvis/inbound")[0] == 401
