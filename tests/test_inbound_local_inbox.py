"""The inbox directory ``zerg serve`` watches (zerg.inbound.local_inbox): a reply dropped into
``new/`` goes through the same pipeline as one from SES or SNS, then moves to ``processed/`` or to
``failed/`` with its reason; files still being written are left alone; the same file twice is one
message, also when the process stopped between the pipeline and the move."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.inbound import runs_with_trigger
from tests.support.notify import verified_contact
from tests.support.schedules import answer_directly, finished_run
from zerg.inbound import local_inbox


@pytest.fixture
def rt(runtime_env, llm):
    llm.respond_with(answer_directly("Disk usage is at 41%."))
    return runtime_env()


def alert_sms(rt, pool, owner_id: int) -> dict:
    """The owner's verified number, and an SMS alert Zerg sent it (what a reply answers)."""
    from zerg.notify.deliver import deliver

    phone = verified_contact(pool, owner_id, "sms")
    deliver(rt, owner_id, channel="sms", purpose="alert", subject="Disk", body="Disk at 91%", severity="warning")
    return phone


def drop(rt, name: str, content: bytes | str) -> None:
    new = rt.settings.inbound_root / "new"
    new.mkdir(parents=True, exist_ok=True)
    (new / name).write_bytes(content.encode() if isinstance(content, str) else content)


def sms_file(sender: str, text: str, **more) -> str:
    return json.dumps({"from": sender, "text": text, **more})


def rows_of(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM inbound_messages WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def row_by_id(pool, inbound_id: int) -> dict:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM inbound_messages WHERE id = %s", (inbound_id,)).fetchone()


def listing(rt, where: str) -> list[str]:
    folder = rt.settings.inbound_root / where
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_dropped_sms_from_the_owner_starts_a_run_and_moves_to_processed(rt, pool, owner):
    phone = alert_sms(rt, pool, owner)
    drop(rt, "0001-reply.json", sms_file(phone["address"], "what is using the disk?"))

    (taken,) = local_inbox.sweep(rt)

    assert (taken.name, taken.moved_to, taken.status) == ("0001-reply.json", "processed", "run")
    (row,) = rows_of(pool, owner)
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert (row["source"], row["status"], row["run_id"], row["id"]) == ("local", "run", run["id"], taken.inbound_id)
    assert row["provider_id"].startswith("local-") and "what is using the disk?" in run["task"]
    assert listing(rt, "new") == [] and listing(rt, "processed") == ["0001-reply.json"]
    assert finished_run(pool, owner, run["id"])["status"] == "success"


def test_a_bad_file_moves_to_failed_with_its_reason_and_is_recorded_and_nothing_runs(rt, pool, owner):
    phone = alert_sms(rt, pool, owner)
    drop(rt, "a-not-json.json", b"{this is not json")
    drop(rt, "b-stranger.json", sms_file("+15550000001", "ack"))  # a number nobody verified
    drop(rt, "c-no-text.json", json.dumps({"from": phone["address"]}))
    drop(rt, "d-notes.txt", "not a reply")

    taken = {t.name: t for t in local_inbox.sweep(rt)}

    assert {name: t.moved_to for name, t in taken.items()} == dict.fromkeys(taken, "failed")
    assert listing(rt, "failed") == sorted([*taken, *(f"{name}.reason" for name in taken)])
    failed = rt.settings.inbound_root / "failed"
    for name, t in taken.items():
        reason = (failed / f"{name}.reason").read_text()
        assert f"reason: {t.reason}" in reason and t.reason, name
    assert taken["a-not-json.json"].reason.startswith("not a JSON SMS file")
    assert taken["b-stranger.json"].reason == "unknown sender"
    assert "text" in taken["c-no-text.json"].reason
    assert taken["d-notes.txt"].inbound_id is None  # not a message: no row
    for name in ("a-not-json.json", "b-stranger.json", "c-no-text.json"):  # each recorded, refused, with why
        row = row_by_id(pool, taken[name].inbound_id)
        assert (row["status"], row["reason"], row["run_id"]) == ("rejected", taken[name].reason, None), name
    assert runs_with_trigger(pool, owner, "sms") == []
    assert (failed / "b-stranger.json").read_text() == sms_file("+15550000001", "ack")  # nothing lost


def test_a_file_still_being_written_is_left_where_it_is(rt, pool, owner):
    phone = alert_sms(rt, pool, owner)
    for name in (".0002.json", "0002.json.tmp"):
        drop(rt, name, sms_file(phone["address"], "half written"))

    assert local_inbox.sweep(rt) == []

    assert listing(rt, "new") == [".0002.json", "0002.json.tmp"] and rows_of(pool, owner) == []


def test_the_same_file_dropped_twice_is_one_message_and_one_run(rt, pool, owner):
    phone = alert_sms(rt, pool, owner)
    content = sms_file(phone["address"], "restart the backup job")
    drop(rt, "reply.json", content)
    (first,) = local_inbox.sweep(rt)
    drop(rt, "reply.json", content)  # the same name again: processed/ has it already
    drop(rt, "reply-copy.json", content)

    again = local_inbox.sweep(rt)

    assert [(t.moved_to, t.status, t.inbound_id, t.run_id) for t in again] == [
        ("processed", "run", first.inbound_id, first.run_id)] * 2
    assert listing(rt, "processed") == ["reply-1.json", "reply-copy.json", "reply.json"]  # never overwritten
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert len(rows_of(pool, owner)) == 1 and run["id"] == first.run_id
    finished_run(pool, owner, run["id"])


def test_a_stop_between_the_pipeline_and_the_move_redelivers_the_file_as_the_same_message(rt, pool, owner, monkeypatch):
    phone = alert_sms(rt, pool, owner)
    drop(rt, "reply.json", sms_file(phone["address"], "how full is /var?"))

    def stopped(src, dst):  # the process dies after receive() returned, before the file moved
        raise KeyboardInterrupt

    monkeypatch.setattr(local_inbox.os, "rename", stopped)
    with pytest.raises(KeyboardInterrupt):
        local_inbox.sweep(rt)
    monkeypatch.undo()
    assert listing(rt, "new") == ["reply.json"]

    (taken,) = local_inbox.sweep(rt)

    (run,) = runs_with_trigger(pool, owner, "sms")
    assert (taken.moved_to, taken.run_id) == ("processed", run["id"])
    assert len(rows_of(pool, owner)) == 1 and listing(rt, "new") == []
    finished_run(pool, owner, run["id"])


def test_symlinks_directories_and_other_files_are_never_read_and_go_to_failed(rt, pool, owner, tmp_path):
    phone = alert_sms(rt, pool, owner)
    secret = tmp_path / "elsewhere.json"
    secret.write_text(sms_file(phone["address"], "a file outside the inbox"))
    new = rt.settings.inbound_root / "new"
    new.mkdir(parents=True)
    os.symlink(secret, new / "link.json")
    (new / "folder.eml").mkdir()

    taken = {t.name: t for t in local_inbox.sweep(rt)}

    assert taken["link.json"].reason == "a symbolic link: only regular files dropped here are read"
    assert taken["folder.eml"].reason == "unreadable: not a regular file"
    assert {t.moved_to for t in taken.values()} == {"failed"} and rows_of(pool, owner) == []
    assert (rt.settings.inbound_root / "failed" / "link.json").is_symlink()  # moved as it was, not followed


def test_an_oversized_email_is_refused_from_its_size_and_kept(rt, pool, monkeypatch):
    from zerg.inbound import email

    monkeypatch.setattr(email, "from_local_file", lambda rt, raw: pytest.fail("an oversized file was read whole"))
    drop(rt, "big.eml", b"")
    big = rt.settings.inbound_root / "new" / "big.eml"
    with open(big, "r+b") as fh:
        fh.truncate(20 * 1024 * 1024)  # 20 MB (sparse)

    (taken,) = local_inbox.sweep(rt)

    assert taken.moved_to == "failed"
    assert taken.reason == f"message of {20 * 1024 * 1024} bytes exceeds the {10 * 1024 * 1024}-byte limit"
    row = row_by_id(pool, taken.inbound_id)
    assert (row["status"], row["owner_id"], row["channel"]) == ("rejected", None, "email")
    assert (rt.settings.inbound_root / "failed" / "big.eml").stat().st_size == 20 * 1024 * 1024


def test_zerg_serve_takes_dropped_replies_every_two_seconds(runtime_env):
    from zerg.local.housekeeping import default_tasks

    task = {t.name: t for t in default_tasks(runtime_env())}["inbound"]

    assert task.interval_s == local_inbox.SWEEP_EVERY_S == 2.0 and task.first_delay_s == 0
    assert task.run.func is local_inbox.run_sweep


def test_a_file_the_code_chokes_on_goes_to_failed_and_never_blocks_the_files_after_it(rt, pool, owner, monkeypatch):
    from zerg.inbound import sms

    phone = alert_sms(rt, pool, owner)
    real = sms.from_local

    def choking(sender, text, **kw):
        if text == "poison":
            raise ValueError("a bug in the parser")
        return real(sender, text, **kw)

    monkeypatch.setattr(sms, "from_local", choking)
    drop(rt, "1-poison.json", sms_file(phone["address"], "poison"))
    drop(rt, "2-fine.json", sms_file(phone["address"], "STOP"))

    taken = {t.name: t for t in local_inbox.sweep(rt)}

    assert (taken["1-poison.json"].moved_to, taken["1-poison.json"].reason) == (
        "failed", "could not be processed: ValueError")
    assert (taken["2-fine.json"].moved_to, taken["2-fine.json"].status) == ("processed", "keyword")


def test_a_database_outage_leaves_the_file_in_new_for_the_next_sweep(rt, pool, owner, monkeypatch):
    from psycopg import OperationalError

    from zerg.inbound import replies

    phone = alert_sms(rt, pool, owner)
    drop(rt, "reply.json", sms_file(phone["address"], "STOP"))

    def outage(rt, inbound):
        raise OperationalError("connection refused")

    monkeypatch.setattr(replies, "receive", outage)
    with pytest.raises(OperationalError):  # housekeeping logs it and runs the task again
        local_inbox.sweep(rt)
    monkeypatch.undo()

    assert listing(rt, "new") == ["reply.json"] and listing(rt, "failed") == []
    (taken,) = local_inbox.sweep(rt)
    assert (taken.moved_to, taken.status) == ("processed", "keyword")


def test_a_reply_whose_run_could_not_start_stays_run_and_its_file_goes_to_processed(rt, pool, owner, monkeypatch):
    phone = alert_sms(rt, pool, owner)
    drop(rt, "reply.json", sms_file(phone["address"], "what is using the disk?"))

    def refused(*args, **kwargs):
        raise RuntimeError("the executor is gone")

    monkeypatch.setattr(rt.starter, "start", refused)
    (taken,) = local_inbox.sweep(rt)

    # The message was taken (its run exists, closed failed with why): not a file for failed/.
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert (taken.moved_to, taken.status, taken.run_id) == ("processed", "run", run["id"])
    assert run["status"] == "failed" and row_by_id(pool, taken.inbound_id)["status"] == "run"
    assert listing(rt, "processed") == ["reply.json"] and listing(rt, "failed") == []


@pytest.mark.parametrize("status", ["received", "rejected", "acknowledged", "run", "keyword", "failed"])
def test_a_file_goes_to_processed_exactly_when_its_outcome_took_the_message(rt, pool, owner, monkeypatch, status):
    from zerg.inbound import messages, replies

    assert status in messages.STATUSES
    drop(rt, "reply.json", sms_file("+15550000003", "ok"))
    monkeypatch.setattr(replies, "receive", lambda rt, inbound: replies.Outcome(status, "why", 1, None, owner))

    (taken,) = local_inbox.sweep(rt)

    expected = "processed" if status in messages.HANDLED else "new" if status == "received" else "failed"
    assert taken.moved_to == expected and "reply.json" in listing(rt, expected)
