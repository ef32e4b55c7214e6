"""Answering an approval from the owner's channels (issue 27 item 3): the API lists the owner's approvals
with the exact call, its run, who started it, the model's reason fenced as data, the expiry and a short
code; approve/deny answer once, owner-scoped, with a precise 409 for an answered or expired approval.
The run is the real one of tests/test_approval_wait.py (local engine, scripted model, real sandbox)."""

from __future__ import annotations

import json
import threading

import pytest

from tests import test_approval_wait as wait_tests
from tests.support.api import call, login
from tests.test_approval_wait import CALL, SAID, _finish, _run, _worker
from zerg.approvals import requests as approvals

waiting_run = wait_tests.waiting_run  # the fixture: a run whose worker's call waits for the owner

LIST = "/api/jarvis/approvals"


@pytest.fixture
def owner(alice) -> int:  # the waiting run's owner is one who can sign in
    return alice.owner_id


def _answer(approval_id: int, decision: str, token: str):
    return call("POST", f"{LIST}/{approval_id}/{decision}", token=token)


def test_the_list_shows_the_exact_call_its_run_and_the_reason_as_data(waiting_run, pool, owner, alice):
    rt, run_id, arn, row = waiting_run()
    status, body, _ = call("GET", LIST, token=login(alice))
    assert status == 200, body
    (item,) = body["approvals"]
    assert item["id"] == row["id"] and item["status"] == "pending"
    assert item["code"] == row["code"] and len(item["code"]) == 4 and item["code"].isdigit()
    assert item["call"] == {"tool": "container_exec", "arguments": CALL, "command": CALL["command"],
                            "host": None, "url": None, "method": None, "recipient": None}
    assert item["run"] == {"id": run_id, "job_id": row["job_id"], "task": "restart nginx", "trigger": "cli"}
    assert item["reason"]["untrusted"] is True and "never an instruction" in item["reason"]["note"]
    assert item["reason"]["text"] == row["reason"] == SAID and item["expires_at"] and item["answered_at"] is None
    assert item["asked_because"] == "the owner's policy asks before container_exec"
    assert "task_token" not in item

    status, body, _ = _answer(row["id"], "approve", login(alice))
    assert (status, body) == (200, {"id": row["id"], "status": "approved", "message": f"approval {row['id']} approved"})
    _finish(rt, arn)
    assert _run(pool, owner, run_id)["status"] == "success"
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]  # ran once

    status, body, _ = _answer(row["id"], "deny", login(alice))  # answered: says so, changes nothing
    assert status == 409 and body["error"] == "conflict" and "already answered (approved)" in body["message"], body
    (item,) = call("GET", LIST, token=login(alice))[1]["approvals"]
    assert item["status"] == "approved" and item["code"] is None and item["answered_at"]


def test_another_owners_approval_is_404_and_their_list_is_empty(waiting_run, pool, owner, alice, bob):
    rt, run_id, arn, row = waiting_run()
    tok = login(bob)
    assert call("GET", LIST, token=tok)[1] == {"approvals": []}
    for decision in ("approve", "deny"):
        status, body, _ = _answer(row["id"], decision, tok)
        assert (status, body["error"], body["message"]) == (404, "not_found", f"approval {row['id']} not found")
    assert _run(pool, owner, run_id)["status"] == "awaiting_approval"  # untouched
    status, body, _ = _answer(row["id"], "deny", login(alice))
    assert status == 200 and body["status"] == "denied"
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == []  # denied: never ran


def test_an_expired_approval_says_so_with_409(waiting_run, pool, owner, alice):
    rt, run_id, arn, row = waiting_run()
    with pool.connection() as conn:  # the wait's end passed (its timeout has not fired yet)
        conn.execute("UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = %s", (row["id"],))
    status, body, _ = _answer(row["id"], "approve", login(alice))
    assert status == 409 and "expired: it was not answered in time, and the call did not run" in body["message"], body
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "pending"  # decided nothing
        approvals.decide(conn, owner, row["id"], "expired")
    rt.starter.send_task_failure(row["task_token"], "Zerg.Cancelled", "expired")
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == []


def test_two_answers_at_once_through_the_api_one_decides(waiting_run, pool, owner, alice):
    rt, run_id, arn, row = waiting_run()
    tokens = {d: login(alice) for d in ("approve", "deny")}
    barrier = threading.Barrier(2)
    results = {}

    def answer(decision):
        barrier.wait()
        results[decision] = _answer(row["id"], decision, tokens[decision])

    threads = [threading.Thread(target=answer, args=(d,)) for d in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    _finish(rt, arn)
    assert sorted(r[0] for r in results.values()) == [200, 409], results
    (winner,) = [r[1]["status"] for r in results.values() if r[0] == 200]
    ran = _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]
    assert ran == (winner == "approved")


def test_a_bad_approval_id_is_422(alice):
    status, body, _ = call("POST", f"{LIST}/abc/approve", token=login(alice))
    assert status == 422 and body["error"] == "validation_error", body


def test_the_cli_lists_and_answers_once_and_says_why_not(waiting_run, pool, owner, alice, bob, capsys):
    from zerg.cli.main import main

    rt, run_id, arn, row = waiting_run()
    who = ["--owner", alice.name]
    assert main(["approvals", "list", *who]) == 0
    out = capsys.readouterr().out
    assert f"approval {row['id']} [pending] code {row['code']}  run {run_id} (cli): restart nginx" in out
    assert f"call: container_exec  command={CALL['command']!r}" in out
    assert "asked because: the owner's policy asks before container_exec" in out
    assert f"model's stated reason (data, not an instruction):\n    | {SAID}" in out
    assert main(["approvals", "list", "--owner", bob.name]) == 0 and capsys.readouterr().out == "no approvals\n"
    assert main(["approvals", "approve", str(row["id"]), "--owner", bob.name]) == 2
    assert f"approval {row['id']} not found" in capsys.readouterr().err

    assert main(["approvals", "approve", str(row["id"]), *who]) == 0
    assert capsys.readouterr().out == f"approval {row['id']} approved\n"
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]  # ran once
    assert main(["approvals", "deny", str(row["id"]), *who]) == 1
    assert "already answered (approved)" in capsys.readouterr().err


def test_codes_are_unique_among_an_owners_pending_approvals_even_when_two_draw_the_same(pool, owner):
    """Two approvals created at once with the same random draw (the same seed on both connections):
    the second waits on the unique index, loses, draws again in a savepoint and gets another code."""
    from tests.support.factories import make_job, make_run
    from tests.support.waiting import wait_for

    run_id, _ = make_run(pool, owner)
    first_job, second_job = make_job(pool, owner, run_id, "one"), make_job(pool, owner, run_id, "two")
    made = {}
    with pool.connection() as first, pool.connection() as second:
        second_pid = second.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
        with first.transaction():
            first.execute("SELECT setseed(0.25)")
            made["first"] = approvals.create(first, owner, run_id, first_job, "ssh_exec", {"command": "a"}, "c1", "")

            def create_second():
                with second.transaction():
                    second.execute("SELECT setseed(0.25)")
                    made["second"] = approvals.create(second, owner, run_id, second_job, "ssh_exec", {"command": "b"},
                                                      "c2", "")

            racer = threading.Thread(target=create_second)
            racer.start()
            with pool.connection() as watcher:  # the second insert waits on the first's uncommitted code
                wait_for(lambda: watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                                 (second_pid,)).fetchone()["wait_event_type"] == "Lock",
                         "the second insert waiting on the first's code", limit_s=30)
        racer.join(60)
    assert made["first"]["code"] and made["second"]["code"] and made["first"]["code"] != made["second"]["code"]
    with pool.connection() as conn:
        assert {r["code"] for r in approvals.pending(conn, owner, run_id)} == {made["first"]["code"],
                                                                                made["second"]["code"]}


def test_an_sms_code_answers_only_its_own_owners_approval(runtime_env, pool, alice, bob):
    """Bob's verified number sending Alice's code finds no pending approval of Bob's: nothing changes."""
    import secrets

    from tests.support.factories import make_job, make_run
    from tests.support.notify import verified_contact
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound

    rt = runtime_env()
    run_id, _ = make_run(pool, alice.owner_id, trigger="email")
    job_id = make_job(pool, alice.owner_id, run_id, "restart")
    with pool.connection() as conn:
        row = approvals.create(conn, alice.owner_id, run_id, job_id, "ssh_exec", {"host": "cube", "command": "reboot"},
                               "c1", "")
    theirs, mine = verified_contact(pool, bob.owner_id, "sms"), verified_contact(pool, alice.owner_id, "sms")

    def sms(sender, text):
        return Inbound(channel="sms", provider_id=f"sms-{secrets.token_hex(8)}", source="sns", sender=sender, body=text,
                       recipient="+15550009999")

    other = replies.receive(rt, sms(theirs["address"], f"Y {row['code']}"))
    assert (other.status, other.owner_id, other.reason) == ("approval", bob.owner_id,
                                                             f"no pending approval with code {row['code']}")
    with pool.connection() as conn:
        assert approvals.get(conn, alice.owner_id, row["id"])["status"] == "pending"
    own = replies.receive(rt, sms(mine["address"], f"N {row['code']}"))
    assert (own.status, own.run_id) == ("approval", None)
    with pool.connection() as conn:
        assert approvals.get(conn, alice.owner_id, row["id"])["status"] == "denied"


def test_the_owner_is_told_once_and_an_email_reply_approve_answers_exactly_that_approval(
        waiting_run, pool, owner, alice):
    import secrets

    from tests.support.notify import emails, texts, verified_contact
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound

    mail, phone = verified_contact(pool, owner, "email"), verified_contact(pool, owner, "sms")
    from tests.support.waiting import wait_for

    rt, run_id, arn, row = waiting_run()

    def noted():  # told right after the token is stored
        with pool.connection() as conn:
            ids = approvals.get(conn, owner, row["id"])["notification_ids"]
        return ids if ids else None

    wait_for(noted, "the owner told about the approval", limit_s=60)
    with pool.connection() as conn:
        told = conn.execute("SELECT id, channel, reply_token, body FROM notifications WHERE owner_id = %s "
                            "AND purpose = 'approval' ORDER BY id", (owner,)).fetchall()
        noted = approvals.get(conn, owner, row["id"])["notification_ids"]
    assert [n["channel"] for n in told] == ["email", "sms"] and noted == [n["id"] for n in told]  # once each
    assert f"wants to run container_exec: {CALL['command']}" in told[0]["body"]
    assert "Asked because the owner's policy asks before container_exec." in told[0]["body"]
    assert f"The model's stated reason (its words, data, not an instruction):\n> {SAID}" in told[0]["body"]
    assert f"Y {row['code']} / N {row['code']}" in told[0]["body"]
    sms_text = "".join(texts(rt.settings.data_dir)[-1]["parts"])
    assert f"Reply Y {row['code']} or N {row['code']}." in sms_text and phone["address"]
    assert any(f"(approval {row['id']})" in m["Subject"] for m in emails(rt.settings.data_dir))

    def reply(text):
        token = told[0]["reply_token"]
        return replies.receive(rt, Inbound(
            channel="email", provider_id=f"ses-{secrets.token_hex(8)}", source="ses", sender=mail["address"], body=text,
            recipient=f"reply+{token}@zerg.localhost", subject="Re: approve", tokens=(token,),
            message_id=f"<{secrets.token_hex(6)}@mail.example.com>"))

    yes = reply("Approve.")
    assert (yes.status, yes.run_id, yes.reason) == ("approval", None, f"email: approval {row['id']} approved")
    _finish(rt, arn)
    assert _worker(rt, pool, owner, run_id)[1] == ["tool_calls/001_container_exec.txt"]  # ran once
    again = reply("deny")  # a replay, or a second answer: says so, changes nothing
    assert again.status == "approval" and "already answered (approved)" in again.reason
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "approved"


def test_a_waiting_call_shows_in_the_run_details_the_inbox_and_the_feed_of_its_owner_only(
        waiting_run, pool, owner, alice, bob):
    from tests.test_owner_feed import _parse

    rt, run_id, arn, row = waiting_run()
    tok = login(alice)
    status, doc, _ = call("GET", f"/api/jarvis/runs/{run_id}", token=tok)
    assert status == 200 and doc["status"] == "awaiting_approval", doc
    (asked,) = doc["approvals"]
    assert (asked["id"], asked["status"], asked["call"]["command"]) == (row["id"], "pending", CALL["command"])
    assert asked["reason"]["untrusted"] is True and asked["run"]["task"] == "restart nginx"
    status, inbox, _ = call("GET", "/api/jarvis/inbox", token=tok)
    assert status == 200 and [a["id"] for a in inbox["approvals"]] == [row["id"]], inbox

    status, _, raw = call("GET", "/api/jarvis/events?last_event_id=0", token=tok)
    announced = [(e.event, json.loads(e.data)) for e in _parse(raw["body"]) if e.event.startswith("approval_")]
    assert announced == [("approval_requested", {
        "run_id": run_id, "thread_id": doc["thread_id"], "approval_id": row["id"], "tool": "container_exec",
        "arguments": CALL, "expires_at": announced[0][1]["expires_at"]})], announced
    assert row["reason"] not in raw["body"]  # the model's words stay out of the feed

    theirs = login(bob)  # another owner sees none of it
    assert call("GET", f"/api/jarvis/runs/{run_id}", token=theirs)[0] == 404
    assert call("GET", "/api/jarvis/inbox", token=theirs)[1]["approvals"] == []
    assert "approval_" not in call("GET", "/api/jarvis/events?last_event_id=0", token=theirs)[2]["body"]

    assert _answer(row["id"], "deny", tok)[0] == 200
    _finish(rt, arn)
    (answered,) = call("GET", f"/api/jarvis/runs/{run_id}", token=tok)[1]["approvals"]
    assert answered["status"] == "denied" and answered["code"] is None
    assert call("GET", "/api/jarvis/inbox", token=tok)[1]["approvals"] == []
    _, _, raw = call("GET", "/api/jarvis/events?last_event_id=0", token=tok)
    kinds = [(e.event, json.loads(e.data).get("status")) for e in _parse(raw["body"]) if e.event.startswith("approval_")]
    assert kinds == [("approval_requested", None), ("approval_answered", "denied")]


def test_an_email_approve_quoting_another_approvals_notice_answers_only_its_own(waiting_run, pool, owner, alice):
    """The reply token decides which approval an email answers: "approve" above a pasted, quoted copy of
    another approval's notice (its id, its SMS code, its own "Reply approve") approves the token's
    approval only; the other stays pending. Through the real mail parser, as a Gmail reply."""
    import secrets

    from tests.support.factories import make_job
    from tests.support.mail import reply_to_alert
    from tests.support.notify import emails, verified_contact
    from tests.support.waiting import wait_for
    from zerg.approvals.wait import _tell_owner
    from zerg.inbound import replies
    from zerg.inbound.email import parse_email

    mail = verified_contact(pool, owner, "email")
    rt, run_id, arn, row = waiting_run()
    other_job = make_job(pool, owner, run_id, "another look", model="gpt-4o-mini")
    with pool.connection() as conn:  # a second approval of the owner, told the same way
        other = approvals.create(conn, owner, run_id, other_job, "container_exec", {"command": "reboot"}, "c-2",
                                 "the owner's policy asks")
        other = approvals.record_token(conn, owner, other["id"], "token-of-the-other", 600)
    _tell_owner(rt, owner, other)

    def notice(approval_id):
        found = [m for m in emails(rt.settings.data_dir) if f"(approval {approval_id})" in m["Subject"]]
        return found[0] if found else None

    mine = wait_for(lambda: notice(row["id"]), "the owner told about the first approval", limit_s=60)
    theirs = notice(other["id"]).get_body(preferencelist=("plain",)).get_content()
    pasted = "\n".join(f"> {line}" for line in theirs.splitlines())
    raw = reply_to_alert(mine, f"approve\n\n{pasted}", sender=mail["address"])
    inbound = parse_email(raw, max_bytes=1 << 20, mail_domain=rt.settings.mail_domain,
                          provider_id=f"ses-{secrets.token_hex(8)}", source="ses", object_key=None)
    answer = replies.receive(rt, inbound)
    assert (answer.status, answer.reason) == ("approval", f"email: approval {row['id']} approved"), answer
    _finish(rt, arn)
    with pool.connection() as conn:
        assert approvals.get(conn, owner, row["id"])["status"] == "approved"
        assert approvals.get(conn, owner, other["id"])["status"] == "pending"  # quoted, never answered
