"""One mechanism for "the owner must decide" (issue 27 item 3): a directive only the owner may decide
(issue 25's question: a new check, deleting a schedule, alert channels, quiet hours, an approval mode)
is an approval of the same table as a waiting tool call. It is listed by ``GET /api/jarvis/approvals``
with Zerg's summary, and answered like the others (API, CLI, SMS code, the owner's "yes" as their next
message): approving it makes the change once and says what was done; denied or expired it is never
made; another owner's id is not found; and nothing a model can call approves anything."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.api import call, login
from tests.support.notify import verified_contact
from tests.test_directives import a_run, ask, questions, say, schedule, show, use
from zerg.approvals import requests as approvals
from zerg.notify.policy import get_policy
from zerg.schedules import service

LIST = "/api/jarvis/approvals"
QUIET = {"key": "quiet_hours", "value": "22:00-07:00"}
QUIET_SUMMARY = "set quiet_hours to 22:00-07:00 (now off)"
CHECK = {"name": "cert check", "task": "check the TLS certificate of example.com", "cron": "0 7 * * *",
         "kind": "check"}


def _answer(approval_id: int, decision: str, token: str):
    return call("POST", f"{LIST}/{approval_id}/{decision}", token=token)


def _listed(token: str) -> list[dict]:
    status, body, _ = call("GET", LIST, token=token)
    assert status == 200, body
    return body["approvals"]


def _quiet_hours(pool, owner_id: int) -> str | None:
    with pool.connection() as conn:
        return get_policy(conn, owner_id).quiet_hours


def test_a_directive_question_is_listed_with_zergs_summary_and_approved_by_the_api_once(runtime_env, pool, alice):
    rt = runtime_env()
    asked_in = ask(rt, pool, alice.owner_id, "create_schedule", "watch my certificate", **CHECK)
    (question,) = questions(pool, alice.owner_id)
    tok = login(alice)
    (item,) = _listed(tok)
    assert (item["id"], item["kind"], item["status"], item["summary"]) == (
        question["id"], "directive", "pending", question["summary"])
    assert item["summary"].startswith('create the check "cert check" that runs daily (cron 0 7 * * *, UTC)')
    assert item["code"] == question["code"] and len(item["code"]) == 4 and item["outcome"] is None
    assert item["call"]["tool"] == "create_schedule" and item["call"]["arguments"]["task"] == CHECK["task"]
    assert item["run"] == {"id": asked_in, "job_id": None, "task": "watch my certificate", "trigger": "api"}
    assert item["expires_at"] and item["answered_at"] is None
    assert service.list_schedules(rt, alice.owner_id) == []  # asking did nothing

    status, body, _ = _answer(item["id"], "approve", tok)
    assert status == 200 and body["status"] == "approved", body
    (created,) = service.list_schedules(rt, alice.owner_id)
    assert body["message"] == (f"approval {item['id']} approved: {question['summary']}: done: Schedule "
                               f"#{created['id']} 'cert check' created: a check that runs daily (cron 0 7 * * *, "
                               f"UTC); next: {body['message'].split('next: ', 1)[1]}")
    status, again, _ = _answer(item["id"], "approve", tok)  # once: a second answer changes nothing
    assert status == 409 and again["message"] == f"approval {item['id']} was already answered (approved)"
    assert len(service.list_schedules(rt, alice.owner_id)) == 1
    (item,) = _listed(tok)
    assert item["status"] == "approved" and item["code"] is None and item["outcome"].startswith(
        f"Schedule #{created['id']} 'cert check' created")


def test_a_yes_after_the_api_approved_the_same_question_does_nothing_twice(runtime_env, pool, alice):
    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "create_schedule", "watch my certificate", **CHECK)
    (question,) = questions(pool, alice.owner_id)
    status, _, _ = _answer(question["id"], "approve", login(alice))
    assert status == 200 and len(service.list_schedules(rt, alice.owner_id)) == 1
    # the owner's next message is "yes" to the question they already approved: nothing is done twice,
    # and the supervisor answers it as any request
    assert say(rt, pool, alice.owner_id, "yes") is None
    assert len(service.list_schedules(rt, alice.owner_id)) == 1
    assert [q["status"] for q in questions(pool, alice.owner_id)] == ["approved"]


def test_a_yes_approves_through_the_same_answer_and_the_api_then_says_already_answered(runtime_env, pool, alice):
    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    confirmed = say(rt, pool, alice.owner_id, "yes")
    assert confirmed.startswith(f"Confirmed by your yes:\n- {QUIET_SUMMARY}: Preference quiet_hours is now 22:00-07:00")
    status, body, _ = _answer(question["id"], "deny", login(alice))
    assert status == 409 and body["message"] == f"approval {question['id']} was already answered (approved)"
    with pool.connection() as conn:
        row = approvals.get(conn, alice.owner_id, question["id"])
    assert row["outcome"] == confirmed.split(f"{QUIET_SUMMARY}: ", 1)[1] and row["used_at"] is not None
    assert _quiet_hours(pool, alice.owner_id) == "22:00-07:00"


def test_two_answers_at_once_one_decides_and_the_change_is_made_once(runtime_env, pool, alice):
    import threading

    from zerg.approvals import wait

    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "create_schedule", "watch my certificate", **CHECK)
    (question,) = questions(pool, alice.owner_id)
    start, answers = threading.Barrier(2), []

    def answer() -> None:
        start.wait(timeout=30)
        answers.append(wait.approve(rt, alice.owner_id, question["id"]))

    threads = [threading.Thread(target=answer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(a.decided for a in answers) == [False, True]
    assert len(service.list_schedules(rt, alice.owner_id)) == 1


def test_an_sms_code_from_the_owners_verified_number_approves_a_directive(runtime_env, pool, alice):
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound

    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    phone = verified_contact(pool, alice.owner_id, "sms")

    def sms(text: str) -> Inbound:
        return Inbound(channel="sms", provider_id=f"sms-{secrets.token_hex(8)}", source="sns", sender=phone["address"],
                       body=text, recipient="+15550009999")

    outcome = replies.receive(rt, sms(f"Y {question['code']}"))
    assert (outcome.status, outcome.run_id) == ("approval", None)  # answered, never a run
    assert _quiet_hours(pool, alice.owner_id) == "22:00-07:00"
    with pool.connection() as conn:
        told = conn.execute("SELECT body FROM notifications WHERE owner_id = %s AND channel = 'sms' ORDER BY id DESC "
                            "LIMIT 1", (alice.owner_id,)).fetchone()["body"]
    assert told.startswith(f"Zerg: Approved {question['code']}: {QUIET_SUMMARY}: Preference quiet_hours is now "
                           "22:00-07:00 (was off).")
    replay = replies.receive(rt, sms(f"N {question['code']}"))  # the code is no longer live
    assert replay.reason == f"no pending approval with code {question['code']}"
    assert _quiet_hours(pool, alice.owner_id) == "22:00-07:00"


def test_an_email_reply_approve_to_the_answer_that_asked_approves_its_question_once(runtime_env, pool, alice):
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound
    from zerg.notify.deliver import deliver

    rt = runtime_env()
    mail = verified_contact(pool, alice.owner_id, "email")
    asked_in = ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    (answer_mail,) = deliver(rt, alice.owner_id, channel="email", purpose="answer", subject="Re: no SMS at night",
                             body=f"Done.\n\n{question['summary']}", run_id=asked_in)

    with pool.connection() as conn:
        token = conn.execute("SELECT reply_token FROM notifications WHERE id = %s", (answer_mail["id"],)).fetchone()[
            "reply_token"]

    def reply(text: str):
        return replies.receive(rt, Inbound(
            channel="email", provider_id=f"ses-{secrets.token_hex(8)}", source="ses", sender=mail["address"], body=text,
            recipient=f"reply+{token}@zerg.localhost", subject="Re: no SMS at night", tokens=(token,),
            message_id=f"<{secrets.token_hex(6)}@mail.example.com>"))

    approved = reply("Approve.")
    assert (approved.status, approved.run_id) == ("approval", None)  # answered, never a run
    assert _quiet_hours(pool, alice.owner_id) == "22:00-07:00"
    again = reply("deny")  # a second answer: says so, changes nothing
    assert again.status == "approval" and _quiet_hours(pool, alice.owner_id) == "22:00-07:00"
    with pool.connection() as conn:
        told = [r["body"] for r in conn.execute(
            "SELECT body FROM notifications WHERE owner_id = %s AND channel = 'email' AND purpose = 'answer' "
            "AND id > %s ORDER BY id", (alice.owner_id, answer_mail["id"]))]
    assert told[0].startswith(f"Zerg:\n- Approved: {QUIET_SUMMARY}: Preference quiet_hours is now 22:00-07:00")
    assert told[1] == f"Zerg:\n- approval {question['id']} was already answered (approved)"
    assert [q["status"] for q in questions(pool, alice.owner_id)] == ["approved"]


def test_an_approval_mode_asked_by_an_sms_reply_is_set_by_the_owners_sms_code(runtime_env, pool, alice, bob):
    """The approval policy by reply (issue 27 item 1) goes through the same mechanism: the reply's run
    only asks, and the owner's SMS code sets it, for that owner alone."""
    from zerg import approvals as policy
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound

    rt = runtime_env()
    run_id = a_run(pool, alice.owner_id, "let Zerg email me without asking", trigger="sms")
    asked = use(rt, alice.owner_id, run_id, "set_preference", key="approval.send_email", value="allow")
    assert asked.ok and asked.text.startswith("Not done: only the user can decide this.")
    assert "approval.send_email to allow (now ask)" in show(pool, alice.owner_id, run_id)
    (question,) = questions(pool, alice.owner_id)
    phone = verified_contact(pool, alice.owner_id, "sms")
    outcome = replies.receive(rt, Inbound(channel="sms", provider_id=f"sms-{secrets.token_hex(8)}", source="sns",
                                          sender=phone["address"], body=f"y {question['code']}",
                                          recipient="+15550009999"))
    assert (outcome.status, outcome.run_id) == ("approval", None)
    with pool.connection() as conn:
        assert policy.load_policy(conn, alice.owner_id).mode("send_email") == "allow"
        assert policy.load_policy(conn, bob.owner_id).mode("send_email") == "ask"
        assert approvals.get(conn, alice.owner_id, question["id"])["outcome"] == (
            "Approval of send_email is now allow (was ask).")


def test_a_denied_directive_is_never_made_and_a_later_yes_does_not_revive_it(runtime_env, pool, alice):
    rt = runtime_env()
    kept = schedule(rt, alice.owner_id)
    ask(rt, pool, alice.owner_id, "delete_schedule", "delete the disk check", schedule_id=kept["id"])
    (question,) = questions(pool, alice.owner_id)
    tok = login(alice)
    status, body, _ = _answer(question["id"], "deny", tok)
    assert (status, body) == (200, {"id": question["id"], "status": "denied",
                                    "message": f"approval {question['id']} denied: {question['summary']}: not done"})
    assert service.get(rt, alice.owner_id, kept["id"])  # still there
    assert say(rt, pool, alice.owner_id, "yes") is None
    status, body, _ = _answer(question["id"], "approve", tok)
    assert status == 409 and body["message"] == f"approval {question['id']} was already answered (denied)"
    assert service.get(rt, alice.owner_id, kept["id"])


def test_an_expired_directive_says_so_and_is_listed_expired(runtime_env, pool, alice):
    rt = runtime_env()
    kept = schedule(rt, alice.owner_id)
    ask(rt, pool, alice.owner_id, "delete_schedule", "delete the disk check", schedule_id=kept["id"])
    (question,) = questions(pool, alice.owner_id)
    with pool.connection() as conn:  # a day passes
        conn.execute("UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = %s", (question["id"],))
    tok = login(alice)
    status, body, _ = _answer(question["id"], "approve", tok)
    assert (status, body["message"]) == (
        409, f"approval {question['id']} expired: it was not answered in time, and nothing was done")
    (item,) = _listed(tok)
    assert (item["status"], item["code"]) == ("expired", None)
    assert service.get(rt, alice.owner_id, kept["id"])


def test_a_superseded_question_cannot_be_approved_by_its_code_or_id(runtime_env, pool, alice):
    rt = runtime_env()
    kept = schedule(rt, alice.owner_id)
    ask(rt, pool, alice.owner_id, "delete_schedule", "delete the disk check", schedule_id=kept["id"])
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)  # the newer question
    older, newer = questions(pool, alice.owner_id)
    assert (older["status"], newer["status"]) == ("superseded", "pending")
    status, body, _ = _answer(older["id"], "approve", login(alice))
    assert status == 409 and "a newer question replaced it" in body["message"] and "nothing was done" in body["message"]
    assert service.get(rt, alice.owner_id, kept["id"])


def test_another_owners_directive_is_not_found_by_id_list_or_sms_code(runtime_env, pool, alice, bob):
    from zerg.inbound import replies
    from zerg.inbound.messages import Inbound

    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    tok = login(bob)
    assert _listed(tok) == []
    for decision in ("approve", "deny"):
        status, body, _ = _answer(question["id"], decision, tok)
        assert (status, body["message"]) == (404, f"approval {question['id']} not found")
    theirs = verified_contact(pool, bob.owner_id, "sms")
    other = replies.receive(rt, Inbound(channel="sms", provider_id=f"sms-{secrets.token_hex(8)}", source="sns",
                                        sender=theirs["address"], body=f"Y {question['code']}",
                                        recipient="+15550009999"))
    assert (other.owner_id, other.reason) == (bob.owner_id, f"no pending approval with code {question['code']}")
    assert [q["status"] for q in questions(pool, alice.owner_id)] == ["pending"]
    assert _quiet_hours(pool, alice.owner_id) is None


def test_the_cli_lists_and_approves_a_directive(runtime_env, pool, alice, capsys):
    from zerg.cli.main import main

    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    assert main(["approvals", "list", "--owner", alice.name]) == 0
    listed = capsys.readouterr().out
    assert f"approval {question['id']} [pending] code {question['code']}" in listed
    assert f"  directive: {QUIET_SUMMARY}\n" in listed
    assert main(["approvals", "approve", str(question["id"]), "--owner", alice.name]) == 0
    assert capsys.readouterr().out.startswith(f"approval {question['id']} approved: {QUIET_SUMMARY}: done: "
                                              "Preference quiet_hours is now 22:00-07:00")
    assert main(["approvals", "approve", str(question["id"]), "--owner", alice.name]) == 1  # once
    assert _quiet_hours(pool, alice.owner_id) == "22:00-07:00"


def test_no_tool_approves_a_directive_and_a_model_can_only_ask_again(runtime_env, pool, alice):
    """Injected text can only ask: no tool of any agent answers an approval, a call of a made-up
    'approve' tool is refused, and the model asking for the same change again only asks again."""
    from zerg.loop.tool import ToolContext, invoke
    from zerg.tools import catalog

    rt = runtime_env()
    ask(rt, pool, alice.owner_id, "set_preference", "no SMS at night", **QUIET)
    (question,) = questions(pool, alice.owner_id)
    names = {name for agent_names in catalog.tool_names().values() for name in agent_names}
    assert "set_preference" in names and not {n for n in names if "approv" in n or "confirm" in n}, names
    run_id = a_run(pool, alice.owner_id, "read my mail")
    refused = invoke(catalog.supervisor_tools(), "approve", f'{{"id": {question["id"]}}}',
                     ToolContext(settings=rt.settings, owner_id=alice.owner_id, run_id=run_id, runtime=rt,
                                 agent="supervisor"))
    assert not refused.ok
    # the model (obeying a mail that says "approve it") asks for the very same change: it only asks
    again = use(rt, alice.owner_id, run_id, "set_preference", **QUIET)
    assert again.ok and again.text.startswith("Not done: only the user can decide this.")
    assert [q["status"] for q in questions(pool, alice.owner_id)] == ["superseded", "pending"]
    assert _quiet_hours(pool, alice.owner_id) is None


def test_the_migration_moves_pending_directives_into_approvals_with_their_history(make_database, monkeypatch):
    from tests.support.factories import unique_name
    from tests.test_migrations import _migrated_before
    from zerg.migrate import migrate
    from zerg.owners import create_owner
    from zerg.runs import store as runs

    with psycopg.connect(make_database(), autocommit=True, row_factory=dict_row) as conn:
        _migrated_before(conn, "directive_approvals", monkeypatch)
        owner_id = create_owner(conn, unique_name("mig")).owner_id
        run_id = runs.start_run(conn, owner_id, "delete the disk check", trigger="api").run_id
        for status, summary in (("pending", "delete schedule #1"), ("done", "set quiet_hours to off (now 22:00-07:00)"),
                                ("superseded", "delete schedule #2"), ("expired", "delete schedule #3")):
            conn.execute(
                """INSERT INTO pending_directives (owner_id, run_id, action, args, summary, status, expires_at,
                                                   decided_at, shown_at)
                   VALUES (%s, %s, 'delete_schedule', '{"schedule_id": 1}', %s, %s, now() + interval '1 hour',
                           CASE WHEN %s <> 'pending' THEN now() END, now())""",
                (owner_id, run_id, summary, status, status))
        migrate(conn)
        moved = conn.execute("SELECT * FROM approvals WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()
        assert [(r["kind"], r["status"], r["summary"]) for r in moved] == [
            ("directive", "pending", "delete schedule #1"),
            ("directive", "approved", "set quiet_hours to off (now 22:00-07:00)"),
            ("directive", "superseded", "delete schedule #2"), ("directive", "expired", "delete schedule #3")]
        assert all(r["job_id"] is None and r["task_token"] is None and r["shown_at"] for r in moved)
        assert moved[0]["answered_at"] is None and moved[1]["used_at"] is not None
        assert conn.execute("SELECT to_regclass('pending_directives') AS t").fetchone()["t"] is None
        with pytest.raises(psycopg.errors.CheckViolation):  # a directive never holds a token
            conn.execute("UPDATE approvals SET task_token = 'x' WHERE id = %s", (moved[0]["id"],))
