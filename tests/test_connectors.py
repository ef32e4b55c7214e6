"""The connector tools: send_email (supervisor and workers) and send_sms (workers) reach the owner's
own verified contacts and no one else, answer the model in one line, and record each message."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.factories import make_run
from tests.support.notify import body_of, emails, texts, unique_email, verified_contact
from zerg.loop.tool import ToolContext, invoke
from zerg.notify.policy import PolicyChange, set_policy
from zerg.supervisor.turn import supervisor_tools
from zerg.tools.catalog import worker_tools


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


@pytest.fixture
def ctx(rt, alice, pool):
    run_id, _ = make_run(pool, alice.owner_id)
    return ToolContext(settings=rt.settings, owner_id=alice.owner_id, run_id=run_id, runtime=rt, agent="worker")


def call(tool: str, ctx: ToolContext, **args) -> str:
    return invoke(worker_tools(), tool, json.dumps(args), ctx).text


def test_the_tools_take_no_address_and_say_they_reach_only_the_owner():
    email, sms = worker_tools()["send_email"].schema()["function"], worker_tools()["send_sms"].schema()["function"]
    assert set(email["parameters"]["properties"]) == {"subject", "body"}
    assert set(sms["parameters"]["properties"]) == {"text"}
    assert "only the owner" in email["description"] and "only the owner" in sms["description"]
    assert "send_email" in supervisor_tools() and "send_sms" not in supervisor_tools()


def test_a_worker_cannot_address_anyone_but_the_owner(ctx, rt, pool, bob):
    mine = verified_contact(pool, ctx.owner_id, "email")
    theirs = verified_contact(pool, bob.owner_id, "email")

    refused = call("send_email", ctx, to=theirs["address"], subject="hi", body="x")
    assert refused.startswith("ERROR: invalid arguments for send_email: to: Extra inputs are not permitted")
    refused = call("send_sms", ctx, phone_number="+15551234567", text="x")
    assert "phone_number: Extra inputs are not permitted" in refused
    assert emails(rt.settings.data_dir) == [] and texts(rt.settings.data_dir) == []

    assert call("send_email", ctx, subject="Backup done", body="All 3 hosts backed up.") == \
        "sent to 1 verified email contact of the owner"
    (msg,) = emails(rt.settings.data_dir)
    assert msg["To"] == mine["address"] and msg["Subject"] == "Backup done"
    assert body_of(msg).rstrip() == "All 3 hosts backed up."
    with pool.connection() as conn:
        row = conn.execute("SELECT purpose, run_id, status FROM notifications WHERE owner_id = %s", (ctx.owner_id,)).fetchone()
    assert row == {"purpose": "connector", "run_id": ctx.run_id, "status": "sent"}


def test_without_a_verified_contact_nothing_is_sent_and_the_model_is_told(ctx, rt, pool):
    with pool.connection() as conn:
        conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', %s)",
                     (ctx.owner_id, unique_email()))

    assert call("send_email", ctx, subject="s", body="b") == "not sent: no verified email contact"
    assert call("send_sms", ctx, text="b") == "not sent: no verified sms contact"
    assert emails(rt.settings.data_dir) == [] and texts(rt.settings.data_dir) == []


def test_past_the_daily_limit_the_model_is_told_it_was_not_sent(ctx, rt, pool):
    verified_contact(pool, ctx.owner_id, "sms")
    with pool.connection() as conn:
        set_policy(conn, ctx.owner_id, PolicyChange(daily_sms_limit=1))

    assert call("send_sms", ctx, text="first") == "sent to 1 verified SMS contact of the owner"
    assert call("send_sms", ctx, text="second") == "not sent: daily limit reached"
    assert [t["parts"] for t in texts(rt.settings.data_dir)] == [["first"]]


def test_a_workers_sms_in_quiet_hours_is_held_not_sent(ctx, rt, pool):
    verified_contact(pool, ctx.owner_id, "sms")
    verified_contact(pool, ctx.owner_id, "email")
    now = datetime.now(UTC)
    with pool.connection() as conn:  # quiet hours around now, whatever the time the test runs
        set_policy(conn, ctx.owner_id, PolicyChange(
            timezone="UTC", quiet_hours=f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=1):%H:%M}"))

    assert call("send_sms", ctx, text="Disk full, wake up").startswith("held until the owner's quiet hours end (")
    assert texts(rt.settings.data_dir) == []
    assert call("send_email", ctx, subject="Disk", body="full") == "sent to 1 verified email contact of the owner"
    with pool.connection() as conn:
        rows = conn.execute("SELECT channel, status, release_at IS NOT NULL AS timed FROM notifications "
                            "WHERE owner_id = %s ORDER BY id", (ctx.owner_id,)).fetchall()
    assert rows == [{"channel": "sms", "status": "held", "timed": True},
                    {"channel": "email", "status": "sent", "timed": False}]


def test_arguments_are_bounded(ctx):
    assert "subject: String should have at most 200 characters" in call("send_email", ctx, subject="s" * 201, body="b")
    assert "body: String should have at most 20000 characters" in call("send_email", ctx, subject="s", body="b" * 20_001)
    assert "text: String should have at most 1600 characters" in call("send_sms", ctx, text="t" * 1601)
    assert "subject: Value error, must not be blank" in call("send_email", ctx, subject="  ", body="b")


def test_the_supervisor_sends_email_through_the_same_path(ctx, rt, pool):
    verified_contact(pool, ctx.owner_id, "email")
    out = invoke(supervisor_tools(), "send_email", json.dumps({"subject": "Summary", "body": "done"}), ctx)
    assert out.ok and out.text == "sent to 1 verified email contact of the owner"
    assert [m["Subject"] for m in emails(rt.settings.data_dir)] == ["Summary"]
