"""Replies on the way in: parsing, the size refusal, and the pipeline from an inbound message to its
run row.

- ``parse_email`` of a typical reply (a Gmail-style multipart/alternative answer quoting the alert
  email, text and HTML), and of a 5 MB message whose attachment is most of it (the MIME parse and
  the attachment's base64 are the cost; only the text part is kept).
- The size refusal on the SES path: a 20 MB message in (moto) S3; ``from_ses_record`` asks its size
  with ``HeadObject`` and refuses it. The S3 calls it made are listed (no GetObject), next to what
  downloading the same object costs.
- ``receive`` -> the run row committed: a verified sender's reply to an alert email (the row, the
  sender, the token, the run row in one transaction, then the start call) with a recording starter,
  so the figure is the pipeline's own work, not the run's; then the same message delivered again
  (a duplicate: the row exists, nothing new happens).

Smoke (main(smoke=True)): 3 parses, 1 big parse, 3 refusals, 1 download, 3 receives (and duplicates).

Run: .venv/bin/python -m bench.inbound
"""

from __future__ import annotations

import secrets
import tempfile
import time

from bench._common import bench_database, environ, fmt, measure, script

DOMAIN = "zerg.example.org"
BUCKET = "zerg-bench-inbound"
MB = 1024 * 1024


class RecordingStarter:
    """Starts nothing: the figure is the pipeline up to the start call, not the run."""

    def __init__(self) -> None:
        self.started: list[int] = []

    def start(self, run_id, owner_id, thread_id):
        self.started.append(run_id)
        return f"arn:recorded:{run_id}"

    def stop(self, arn, cause):
        pass

    def close(self):
        pass


def _alert(rt, owner_id: int) -> bytes:
    """An alert email to the owner, as their client received it (from the local outbox)."""
    from tests.support.notify import emails
    from zerg.notify.deliver import deliver

    deliver(rt, owner_id, channel="email", purpose="alert", severity="warning",
                     subject="[Zerg WARNING] Disk at 91% on cube", body="Disk at 91% on cube\n\n/ is 91% full")
    return emails(rt.settings.data_dir)[-1].as_bytes()


def _with_attachment(raw: bytes, size: int) -> bytes:
    """``raw`` (a reply) grown to about ``size`` bytes by an attachment (random bytes, so nothing
    compresses; base64 makes 3 bytes 4, plus its line breaks)."""
    import email
    import email.policy

    msg = email.message_from_bytes(raw, policy=email.policy.default)
    if not msg.is_multipart() or msg.get_content_type() != "multipart/mixed":
        msg.make_mixed()
    data = secrets.token_bytes(max(0, size - len(raw)) * 57 // 77)  # 57 bytes: one 76-character line + CRLF
    msg.add_attachment(data, maintype="application", subtype="octet-stream", filename="logs.tar.gz")
    return msg.as_bytes()


def _parse(reply: bytes, repeat: int, big_repeat: int) -> None:
    from zerg.inbound.email import parse_email

    def parse(raw: bytes):
        inbound = parse_email(raw, max_bytes=40 * MB, mail_domain=DOMAIN, provider_id="bench", source="local",
                              object_key=None)
        assert inbound.rejection is None, inbound.rejection
        return inbound

    big = _with_attachment(reply, 5 * MB)
    print("== parse_email ==")
    print(fmt(f"typical reply ({len(reply) / 1024:.1f} KB, quoted alert)", measure(lambda: parse(reply), repeat)))
    print(fmt(f"5 MB message with attachment ({len(big) / MB:.1f} MB)", measure(lambda: parse(big), big_repeat)))


def _refusal(rt, reply: bytes, repeat: int, big_repeat: int) -> None:
    import boto3
    from moto import mock_aws

    from zerg.inbound.email import from_ses_record

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        huge = _with_attachment(reply, 20 * MB)
        s3.put_object(Bucket=BUCKET, Key="inbound/email/huge", Body=huge)
        record = _ses_record("huge", "bench@example.com", [f"reply+{'0' * 32}@{DOMAIN}"])
        calls: list[str] = []  # every S3 operation from_ses_record makes, by name
        s3.meta.events.register("before-call.s3.*", lambda model, **kw: calls.append(model.name))
        inbound = from_ses_record(rt, record, s3=s3)
        assert inbound.rejection and "exceeds" in inbound.rejection, inbound.rejection
        refused = measure(lambda: from_ses_record(rt, record, s3=s3), repeat)
        made, gets = sorted(set(calls)), calls.count("GetObject")
        download = measure(lambda: s3.get_object(Bucket=BUCKET, Key="inbound/email/huge")["Body"].read(), big_repeat)
    print(f"== size refusal on the SES path: {len(huge) / MB:.1f} MB message in S3 ==")
    print(fmt("from_ses_record (HeadObject, refused)", refused))
    print(f"{'S3 calls while refusing':<44} {', '.join(made)} ({gets} GetObject)")
    print(fmt("(for scale: downloading that object)", download))
    print(f"{'refusal reason':<44} {inbound.rejection}")


def _ses_record(message_id: str, sender: str, recipients: list[str]) -> dict:
    passed = {"status": "PASS"}
    return {"eventSource": "aws:ses", "eventVersion": "1.0", "ses": {
        "mail": {"timestamp": "2026-11-23T06:05:00.000Z", "source": sender, "messageId": message_id,
                 "destination": recipients, "headersTruncated": False, "headers": [], "commonHeaders": {}},
        "receipt": {"timestamp": "2026-11-23T06:05:00.000Z", "processingTimeMillis": 400, "recipients": recipients,
                    "spamVerdict": passed, "virusVerdict": passed, "spfVerdict": passed, "dkimVerdict": passed,
                    "dmarcVerdict": passed,
                    "action": {"type": "Lambda", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:zerg",
                               "invocationType": "Event"}}}}


def _receive(rt, reply: bytes, repeat: int) -> None:
    from zerg.inbound.email import parse_email
    from zerg.inbound.replies import receive

    starter = RecordingStarter()
    rt.__dict__["starter"] = starter  # the runtime's cached starter: no execution, just the start call

    def fresh():  # a new message each time: the same Message-ID again is a replay, refused
        raw = reply.replace(b"Message-ID: <", b"Message-ID: <" + secrets.token_hex(6).encode() + b".", 1)
        assert raw != reply
        return parse_email(raw, max_bytes=40 * MB, mail_domain=DOMAIN, provider_id=f"bench-{secrets.token_hex(8)}",
                           source="ses", object_key=None)

    inbounds = [fresh() for _ in range(repeat)]
    outcomes = []
    firsts = iter(inbounds)
    first = measure(lambda: outcomes.append(receive(rt, next(firsts))), repeat)
    assert all(o.status == "run" and o.run_id for o in outcomes), outcomes
    again = iter(inbounds)
    dup = measure(lambda: outcomes.append(receive(rt, next(again))), repeat)
    assert all(o.duplicate for o in outcomes[repeat:]), outcomes[repeat:]
    assert len(starter.started) == repeat and rt.starter is starter
    print("== receive (email reply to an alert) ==")
    print(fmt("receive -> run row committed", first))
    print(fmt("duplicate delivery (same provider id)", dup))


def main(smoke: bool = False) -> None:
    from tests.support.mail import reply_to_alert
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    repeat, big_repeat = (3, 1) if smoke else (200, 10)
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_ARTIFACT_DIR=tmp, ZERG_MAIL_DOMAIN=DOMAIN,
                ZERG_SENDER_EMAIL=f"zerg@{DOMAIN}", ZERG_ARTIFACT_BUCKET=BUCKET, ZERG_MEMORY_EXTRACT="off",
                ZERG_EMBEDDINGS="off", AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench"),
    ):
        rt = get_runtime()
        address = f"bench-{secrets.token_hex(4)}@example.com"
        started = time.perf_counter()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench-inbound").owner_id
            conn.execute("INSERT INTO owner_contacts (owner_id, kind, address, verified_at) "
                         "VALUES (%s, 'email', %s, now())", (owner, address))
        alert = _alert(rt, owner)
        reply = reply_to_alert(alert, "make this weekly", client="gmail", sender=address)
        print(f"setup: an alert email and a Gmail-style reply to it in {(time.perf_counter() - started) * 1000:.1f} ms")
        _parse(reply, repeat, big_repeat)
        _refusal(rt, reply, repeat, big_repeat)
        _receive(rt, reply, repeat)


if __name__ == "__main__":
    script(main)
