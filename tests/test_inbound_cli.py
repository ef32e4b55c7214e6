"""``zerg inbound email|sms|list``: a reply injected through the same parsers and pipeline as one
from SES or two-way SMS; the outcome printed (and a started run's answer); exit 0 for a run, an
acknowledgement or a keyword, 1 refused (the reason on stderr), 2 bad usage."""

from __future__ import annotations

import re
import secrets
from email.message import EmailMessage

import pytest

from tests.support.inbound import inbound_rows, runs_with_trigger
from tests.support.notify import verified_contact
from tests.support.schedules import answer_directly, finished_run
from zerg.cli.main import main


@pytest.fixture
def rt(runtime_env, llm):
    llm.respond_with(answer_directly("Disk usage is at 41%."))
    return runtime_env()


def alert(rt, pool, owner_id: int, channel: str) -> tuple[dict, dict]:
    """The owner's verified contact of ``channel`` and an alert Zerg sent it (what a reply answers)."""
    from zerg.notify.deliver import deliver

    contact = verified_contact(pool, owner_id, channel)
    (note,) = deliver(rt, owner_id, channel=channel, purpose="alert", subject="Disk at 91% on cube",
                      body="Disk usage is at 91%.", severity="warning")
    with pool.connection() as conn:
        note = conn.execute("SELECT * FROM notifications WHERE id = %s", (note["id"],)).fetchone()
    return contact, note


def reply_eml(rt, contact: dict, note: dict, text: str) -> bytes:
    """A plain reply as a mail client writes it: to the alert's Reply-To, threaded, quoting it."""
    msg = EmailMessage()
    msg["From"] = contact["address"]
    msg["To"] = f"reply+{note['reply_token']}@{rt.settings.mail_domain}"
    msg["Subject"] = f"Re: {note['subject']}"
    msg["Message-ID"] = f"<{secrets.token_hex(8)}@example.com>"
    msg["In-Reply-To"] = msg["References"] = note["message_id"]
    msg.set_content(f"{text}\n\nOn Mon, 23 Nov 2026 at 06:01, Zerg <zerg@zerg.localhost> wrote:\n> Disk usage is at 91%.\n")
    return msg.as_bytes()


def test_an_email_file_from_the_owner_starts_a_run_and_prints_its_answer(rt, pool, owner, tmp_path, capsys):
    contact, note = alert(rt, pool, owner, "email")
    path = tmp_path / "reply.eml"
    path.write_bytes(reply_eml(rt, contact, note, "what is using the disk?"))

    assert main(["inbound", "email", str(path)]) == 0

    out = capsys.readouterr().out
    (row,) = inbound_rows(pool, owner)
    (run,) = runs_with_trigger(pool, owner, "email")
    assert f"inbound email {row['id']}: run {run['id']}" in out.splitlines()[0]
    assert "Disk usage is at 41%." in out and f"run {run['id']}: success" in out
    assert (row["status"], row["source"], row["body"]) == ("run", "local", "what is using the disk?")
    assert out.splitlines()[-1] == f"answer: email to {contact['address']}: sent"


def test_an_sms_from_the_owners_number_starts_a_run_and_prints_its_answer(rt, pool, owner, capsys):
    phone, _ = alert(rt, pool, owner, "sms")

    assert main(["inbound", "sms", "--from", phone["address"], "how", "full", "is", "/var?"]) == 0

    out = capsys.readouterr().out
    (row,) = inbound_rows(pool, owner)
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert out.splitlines()[0] == f"inbound sms {row['id']}: run {run['id']}"
    assert "Disk usage is at 41%." in out and row["body"] == "how full is /var?"
    assert out.splitlines()[-1] == f"answer: sms to {phone['address']}: sent"  # back on the same channel


def test_a_keyword_exits_0_and_is_recorded_as_one(rt, pool, owner, capsys):
    phone, _ = alert(rt, pool, owner, "sms")

    assert main(["inbound", "sms", "--from", phone["address"], "STOP"]) == 0

    (row,) = inbound_rows(pool, owner)
    assert row["status"] == "keyword" and capsys.readouterr().out.startswith(f"inbound sms {row['id']}: keyword")
    assert runs_with_trigger(pool, owner, "sms") == []


def test_an_sms_from_an_unknown_number_is_refused_with_its_reason_on_stderr_and_exit_1(rt, pool, owner, capsys):
    alert(rt, pool, owner, "sms")

    assert main(["inbound", "sms", "--from", "+15550000002", "ack"]) == 1

    captured = capsys.readouterr()
    assert re.match(r"inbound sms \d+: rejected \(unknown sender\)", captured.out)
    assert captured.err.splitlines()[-1] == "zerg: rejected: unknown sender"  # (after any log lines)
    assert inbound_rows(pool, owner) == [] and runs_with_trigger(pool, owner, "sms") == []


def test_the_same_sms_id_twice_is_one_message_and_one_run(rt, pool, owner, capsys):
    phone, _ = alert(rt, pool, owner, "sms")
    sms = ["inbound", "sms", "--from", phone["address"], "--id", f"replay-{secrets.token_hex(4)}", "restart nginx"]

    assert main(sms) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert main(sms) == 0

    again = capsys.readouterr().out
    assert again.strip() == first + " [a duplicate: the first delivery's outcome]"  # not waited for twice
    (run,) = runs_with_trigger(pool, owner, "sms")
    assert len(inbound_rows(pool, owner)) == 1
    finished_run(pool, owner, run["id"])


def test_a_missing_file_a_directory_and_an_empty_text_are_bad_usage(rt, tmp_path, capsys):
    assert main(["inbound", "email", str(tmp_path / "nope.eml")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"zerg: error: {tmp_path / 'nope.eml'}: no such file"
    assert main(["inbound", "email", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert main(["inbound", "sms", "--from", "+15550000003", "  "]) == 2
    assert "give the text of the SMS" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse: a missing --from
        main(["inbound", "sms", "ack"])
    assert usage.value.code == 2


def test_an_oversized_email_file_is_refused_from_its_size_never_read_whole(rt, pool, tmp_path, capsys, monkeypatch):
    from zerg.inbound import email, local_inbox

    path = tmp_path / "big.eml"
    with open(path, "wb") as fh:
        fh.truncate(20 * 1024 * 1024)  # 20 MB (sparse)
    reads: list[int] = []
    real_fdopen = local_inbox.os.fdopen

    class Counted:  # every read the file gets, by size asked
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            reads.append(n)
            return self.fh.read(n)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(local_inbox.os, "fdopen", lambda fd, mode: Counted(real_fdopen(fd, mode)))
    monkeypatch.setattr(email, "from_local_file", lambda rt, raw: pytest.fail("an oversized file was parsed"))

    assert main(["inbound", "email", str(path)]) == 1

    assert reads and 0 < max(reads) <= local_inbox._CHUNK  # hashed in chunks, never read whole
    limit = rt.settings.inbound_max_bytes
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"zerg: rejected: message of {20 * 1024 * 1024} bytes exceeds the {limit}-byte limit")
    assert path.stat().st_size == 20 * 1024 * 1024  # the file stays where it was


def test_inbound_list_shows_the_owners_messages_only(rt, pool, alice, bob, capsys):
    mine, _ = alert(rt, pool, alice.owner_id, "sms")
    theirs, _ = alert(rt, pool, bob.owner_id, "sms")
    assert main(["inbound", "sms", "--from", mine["address"], "STOP"]) == 0
    assert main(["inbound", "sms", "--from", theirs["address"], "STOP"]) == 0
    capsys.readouterr()

    assert main(["inbound", "list", "--owner", alice.name]) == 0

    lines = capsys.readouterr().out.splitlines()
    (row,) = inbound_rows(pool, alice.owner_id)
    assert len(lines) == 1 and lines[0].split("\t")[:2] == [str(row["id"]), "sms"]
    assert lines[0].split("\t")[3:] == ["keyword", "-", "STOP"]


def closed_loopback_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv", [["inbound", "sms", "--from", "+15550000003", "ack"], ["inbound", "list"]],
                         ids=["sms", "list"])
def test_a_database_that_cannot_be_reached_is_one_line_and_exit_2_never_a_traceback(runtime_env, capsys, argv):
    runtime_env(DATABASE_URL=f"postgresql://zerg@127.0.0.1:{closed_loopback_port()}/zerg", ZERG_DB_WAIT_S="0.5")

    assert main(argv) == 2

    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("zerg: error: the database is unreachable") and "DATABASE_URL" in last
