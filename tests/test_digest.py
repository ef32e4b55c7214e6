"""The morning digest: one email of the owner's background results not in any digest yet ("New")
plus older unacknowledged warnings and criticals ("Still open"); nothing new, no email; marked digested only once
actually sent; model text escaped; links to the runs; one owner's items never in another's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.support.reachable import outbox, parts, verified_contact
from zerg.alerts import inbox
from zerg.alerts.digest import send_digest
from zerg.alerts.severity import Assessment
from zerg.runs import store as runs
from zerg.schedules import service
from zerg.schedules import store as schedules
from zerg.schedules.spec import ScheduleSpec

PUBLIC = "https://zerg.example.com"


@pytest.fixture
def rt(runtime_env):
    return runtime_env(ZERG_PUBLIC_URL=PUBLIC)


def background_result(pool, owner_id: int, severity: str, headline: str, details: str = "") -> int:
    """A closed scheduled run with its inbox item; its run id."""
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, "check the servers", trigger="schedule")
        runs.complete_run(conn, runs.get_run(conn, owner_id, started.run_id), "{}")
        inbox.add(conn, owner_id, started.run_id, None, Assessment(severity, headline, details, "model"))
    return started.run_id


def digest_schedule(rt, pool, owner_id: int) -> dict:
    created = service.create(rt, owner_id, ScheduleSpec(name="morning", kind="digest", cron="0 6 * * *",
                                                        timezone="Europe/Berlin"))
    with pool.connection() as conn:
        return schedules.get(conn, owner_id, created["id"])


def ack(pool, owner_id: int, *run_ids: int) -> None:
    with pool.connection() as conn:
        for run_id in run_ids:
            assert inbox.acknowledge(conn, owner_id, run_id)


def listed(text: str) -> dict[str, list[str]]:
    """The headlines of each section of a digest's text part."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(("New (", "Still open (")):
            current = sections.setdefault(line.split(" (")[0], [])
        elif line.startswith("- [") and current is not None:
            current.append(line.split("] ", 1)[1].removesuffix(" (acknowledged)").rsplit(" (", 1)[0])
    return sections


def test_the_digest_collects_exactly_the_unacknowledged_or_new_background_results_since_the_last_one(
        rt, pool, alice, bob, tmp_path):
    verified_contact(pool, alice.owner_id, "email")
    verified_contact(pool, bob.owner_id, "email")
    schedule = digest_schedule(rt, pool, alice.owner_id)
    a = background_result(pool, alice.owner_id, "info", "Backups ran")
    b = background_result(pool, alice.owner_id, "warning", "Disk at 91% on web1", "df -h: /dev/sda1 91%")
    c = background_result(pool, alice.owner_id, "info", "Certificates fine")
    background_result(pool, bob.owner_id, "critical", "Bob's database is down")
    now = datetime.now(UTC)

    assert send_digest(rt, schedule, now)[0] == "sent"
    (first,) = outbox(tmp_path / "zerg-data")["email"]  # alice's only: bob's result is not in her digest
    text, html = parts(first)
    assert first["Subject"].strip() == "Zerg digest: 3 background results (1 warning)"  # no digest before: no "since"
    assert listed(text) == {"New": ["Disk at 91% on web1", "Certificates fine", "Backups ran"]}  # severity, newest
    assert f"{PUBLIC}/api/jarvis/runs/{b}" in text and f'href="{PUBLIC}/api/jarvis/runs/{b}"' in html
    assert "df -h: /dev/sda1 91%" in text and "Europe/Berlin" in text
    assert "Bob" not in text and "Bob" not in html

    ack(pool, alice.owner_id, c)  # acknowledged after a digest: never again
    # a (info) stays unacknowledged: it was told once, as New, and is not repeated every morning
    d = background_result(pool, alice.owner_id, "critical", "web2 unreachable")
    e = background_result(pool, alice.owner_id, "info", "Updates installed")
    ack(pool, alice.owner_id, e)  # new since the last digest: listed once even though acknowledged
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "sent"
    second = outbox(tmp_path / "zerg-data")["email"][-1]
    text, _ = parts(second)
    assert listed(text) == {"New": ["web2 unreachable", "Updates installed"], "Still open": ["Disk at 91% on web1"]}
    assert second["Subject"].strip().startswith("Zerg digest: 3 background results (1 critical, 1 warning) since ")
    assert "Still open (1): from earlier digests, not acknowledged yet" in text
    assert "(acknowledged)" in text and f"/api/jarvis/runs/{d}" in text and f"/api/jarvis/runs/{e}" in text
    assert f"/api/jarvis/runs/{a}" not in text

    # nothing new: no email, though b and d are still open; they ride along with the next new result
    assert send_digest(rt, schedule, datetime.now(UTC)) == (
        "nothing", "nothing new since the last digest; 2 still open item(s) wait for the next new result")
    assert len(outbox(tmp_path / "zerg-data")["email"]) == 2
    background_result(pool, alice.owner_id, "info", "Backups ran again")
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "sent"
    text, _ = parts(outbox(tmp_path / "zerg-data")["email"][-1])
    assert listed(text) == {"New": ["Backups ran again"], "Still open": ["web2 unreachable", "Disk at 91% on web1"]}

    ack(pool, alice.owner_id, b, d)
    assert send_digest(rt, schedule, datetime.now(UTC)) == ("nothing", "no background results since the last digest")
    assert len(outbox(tmp_path / "zerg-data")["email"]) == 3  # nothing to say: no email


def test_bobs_digest_has_none_of_alices_items(rt, pool, alice, bob, tmp_path):
    verified_contact(pool, bob.owner_id, "email")
    background_result(pool, alice.owner_id, "critical", "Alice's database is down")
    schedule = digest_schedule(rt, pool, bob.owner_id)
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "nothing"
    background_result(pool, bob.owner_id, "info", "Bob's backups ran")
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "sent"
    (message,) = outbox(tmp_path / "zerg-data")["email"]
    text, html = parts(message)
    assert "Bob's backups ran" in text and "Alice" not in text and "Alice" not in html


def test_a_digest_that_was_not_sent_leaves_its_items_for_the_next_one(rt, pool, alice, tmp_path):
    schedule = digest_schedule(rt, pool, alice.owner_id)
    run_id = background_result(pool, alice.owner_id, "warning", "Load is high")
    outcome, detail = send_digest(rt, schedule, datetime.now(UTC))
    assert outcome == "failed" and "no verified email contact" in detail
    with pool.connection() as conn:
        (item,) = inbox.for_digest(conn, alice.owner_id)
    assert item["run_id"] == run_id and item["new"]  # still new: no digest has included it

    verified_contact(pool, alice.owner_id, "email")
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "sent"
    text, _ = parts(outbox(tmp_path / "zerg-data")["email"][-1])
    assert listed(text) == {"New": ["Load is high"]}


def test_model_text_in_a_digest_is_escaped_and_never_a_header(rt, pool, alice, tmp_path):
    verified_contact(pool, alice.owner_id, "email")
    schedule = digest_schedule(rt, pool, alice.owner_id)
    background_result(pool, alice.owner_id, "warning", '<script>alert("x")</script>\r\nBcc: evil@example.com',
                      '<img src=x onerror=alert(1)> & more')
    assert send_digest(rt, schedule, datetime.now(UTC))[0] == "sent"
    (message,) = outbox(tmp_path / "zerg-data")["email"]
    _, html = parts(message)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt; &amp; more" in html
    assert message["Bcc"] is None and "script" not in message["Subject"]


def test_a_digest_schedule_fire_sends_the_digest_and_records_what_it_did(rt, pool, alice, tmp_path):
    from tests.support.schedules import fire_rows
    from zerg.schedules.firing import fire

    verified_contact(pool, alice.owner_id, "email")
    schedule = digest_schedule(rt, pool, alice.owner_id)
    run_id = background_result(pool, alice.owner_id, "warning", "Disk at 91% on web1")
    sent = fire(rt, schedule["id"], datetime(2026, 11, 23, 5, tzinfo=UTC), source="ticker")
    again = fire(rt, schedule["id"], datetime(2026, 11, 23, 5, tzinfo=UTC), source="scheduler")  # a duplicate
    ack(pool, alice.owner_id, run_id)
    quiet = fire(rt, schedule["id"], datetime(2026, 11, 24, 5, tzinfo=UTC), source="ticker")
    assert (sent.outcome, sent.run_id) == ("sent", None) and again.duplicate and again.outcome == "sent"
    assert sent.detail.startswith("digest of 1 new and 0 still open item(s) to ")
    assert quiet.outcome == "nothing"
    assert len(outbox(tmp_path / "zerg-data")["email"]) == 1
    assert [(f["outcome"], f["run_id"]) for f in fire_rows(pool, schedule["id"])] == [("sent", None), ("nothing", None)]
