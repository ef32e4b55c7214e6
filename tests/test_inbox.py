"""The task inbox: one item per background run, unacknowledged first then newest first, through the
API (GET /api/jarvis/inbox, POST /api/jarvis/inbox/{run_id}/ack) and the CLI (zerg inbox, zerg inbox
ack); acknowledging is idempotent and owner-scoped."""

from __future__ import annotations

import pytest

from tests.support.api import call
from zerg.alerts import inbox
from zerg.alerts.severity import Assessment
from zerg.cli.main import main
from zerg.runs import store as runs


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def background_result(pool, owner_id: int, severity: str = "info", headline: str = "All fine",
                      details: str = "nothing to report", *, created: str | None = None) -> int:
    """A closed scheduled run with its inbox item (as on_run_end leaves it); its run id."""
    with pool.connection() as conn:
        started = runs.start_run(conn, owner_id, "check the servers", trigger="schedule")
        runs.complete_run(conn, runs.get_run(conn, owner_id, started.run_id), "{}", to_thread=False)
        assert inbox.add(conn, owner_id, started.run_id, None, Assessment(severity, headline, details, "model"))
        if created:  # a test's own clock for the ordering (SQL of the table stays in inbox.py otherwise)
            conn.execute("UPDATE inbox_items SET created_at = %s WHERE run_id = %s", (created, started.run_id))
    return started.run_id


def token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


def test_add_is_idempotent_by_run_and_says_who_wrote_the_item(rt, pool, alice):
    run_id = background_result(pool, alice.owner_id, "warning", "Disk at 91%")
    with pool.connection() as conn:
        again = inbox.add(conn, alice.owner_id, run_id, None, Assessment("critical", "other", "", "model"))
        item = inbox.get(conn, alice.owner_id, run_id)
    assert again is None  # the second writer notifies nobody
    assert (item["severity"], item["headline"], item["assessed_by"]) == ("warning", "Disk at 91%", "model")


def test_the_list_is_unacknowledged_first_then_newest_first(rt, pool, alice):
    old = background_result(pool, alice.owner_id, "info", "old", created="2026-01-01T06:00:00Z")
    mid = background_result(pool, alice.owner_id, "critical", "mid", created="2026-01-02T06:00:00Z")
    new = background_result(pool, alice.owner_id, "warning", "new", created="2026-01-03T06:00:00Z")
    with pool.connection() as conn:
        inbox.acknowledge(conn, alice.owner_id, new)
        listed = [r["run_id"] for r in inbox.list_for_owner(conn, alice.owner_id)]
        open_only = [r["run_id"] for r in inbox.list_for_owner(conn, alice.owner_id, unacknowledged_only=True)]
        limited = [r["run_id"] for r in inbox.list_for_owner(conn, alice.owner_id, limit=1)]
    assert listed == [mid, old, new] and open_only == [mid, old] and limited == [mid]


def test_the_api_lists_the_items_with_severity_headline_and_schedule(rt, pool, alice):
    first = background_result(pool, alice.owner_id, "info", "All fine", "disk 40%")
    second = background_result(pool, alice.owner_id, "critical", "nginx is down", "port 443 refused")
    status, body, _ = call("GET", "/api/jarvis/inbox", token=token(alice))
    assert status == 200
    assert [i["run_id"] for i in body["items"]] == [second, first]
    item = body["items"][0]
    assert {k: item[k] for k in ("severity", "headline", "details", "assessed_by", "acknowledged_at",
                                 "schedule_id", "schedule_name")} == {
        "severity": "critical", "headline": "nginx is down", "details": "port 443 refused", "assessed_by": "model",
        "acknowledged_at": None, "schedule_id": None, "schedule_name": None}
    assert item["created_at"].endswith("Z")


def test_ack_is_idempotent_keeps_the_first_time_and_moves_the_item_down(rt, pool, alice):
    tok = token(alice)
    first = background_result(pool, alice.owner_id, "warning", "Disk at 91%")
    second = background_result(pool, alice.owner_id, "info", "All fine")
    status, body, _ = call("POST", f"/api/jarvis/inbox/{first}/ack", token=tok)
    assert status == 200 and body["run_id"] == first and body["acknowledged_at"]
    again = call("POST", f"/api/jarvis/inbox/{first}/ack", token=tok)
    assert again[:2] == (200, body)  # the same time: acknowledging twice changes nothing
    listed = call("GET", "/api/jarvis/inbox", token=tok)[1]["items"]
    assert [i["run_id"] for i in listed] == [second, first]
    assert [i["run_id"] for i in call("GET", "/api/jarvis/inbox?unacknowledged=true", token=tok)[1]["items"]] == [second]


def test_bob_sees_none_of_alices_items_and_cannot_ack_them(rt, pool, alice, bob):
    mine = background_result(pool, alice.owner_id, "critical", "nginx is down")
    bob_token = token(bob)
    assert call("GET", "/api/jarvis/inbox", token=bob_token)[:2] == (200, {"items": [], "approvals": []})
    assert call("POST", f"/api/jarvis/inbox/{mine}/ack", token=bob_token)[:2] == (
        404, {"error": "not_found", "message": f"inbox item of run {mine} not found"})
    with pool.connection() as conn:
        assert inbox.get(conn, alice.owner_id, mine)["acknowledged_at"] is None
        assert inbox.get(conn, bob.owner_id, mine) is None and inbox.acknowledge(conn, bob.owner_id, mine) is None


def test_a_run_without_an_item_and_bad_input_get_clear_errors(rt, pool, alice):
    tok = token(alice)
    with pool.connection() as conn:
        chat = runs.start_run(conn, alice.owner_id, "a chat").run_id
    assert call("POST", f"/api/jarvis/inbox/{chat}/ack", token=tok)[:2] == (
        404, {"error": "not_found", "message": f"inbox item of run {chat} not found"})
    for path in ("/api/jarvis/inbox?limit=0", "/api/jarvis/inbox?limit=abc", "/api/jarvis/inbox?unacknowledged=maybe"):
        status, body, _ = call("GET", path, token=tok)
        assert status == 422 and body["error"] == "validation_error", path
    status, body, _ = call("POST", "/api/jarvis/inbox/0/ack", token=tok)
    assert status == 422 and "run_id" in body["message"]


def test_the_cli_lists_and_acknowledges_for_the_owner_it_names(rt, pool, alice, bob, capsys):
    item = background_result(pool, alice.owner_id, "warning", "Disk at 91% on cube")
    assert main(["inbox", "--owner", alice.name]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"{item}\tWARNING\t") and out[0].endswith("\tDisk at 91% on cube")

    assert main(["inbox", "ack", str(item), "--owner", bob.name]) == 1  # not bob's
    assert capsys.readouterr().err == f"zerg: no inbox item for run {item}\n"
    assert main(["inbox", "--owner", bob.name]) == 0 and capsys.readouterr().out == "the inbox is empty\n"

    assert main(["inbox", "ack", str(item), "--owner", alice.name]) == 0
    assert capsys.readouterr().out.startswith(f"acknowledged: {item}\tWARNING\t")
    assert main(["inbox", "--unacknowledged", "--owner", alice.name]) == 0
    assert capsys.readouterr().out == "the inbox is empty (nothing unacknowledged)\n"
    assert main(["inbox", "--owner", alice.name]) == 0
    assert capsys.readouterr().out.rstrip().endswith("\t(acknowledged)")


def test_the_cli_refuses_a_bad_run_id_with_one_line(rt, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["inbox", "ack", "abc"])
    assert exit_.value.code == 2
    assert "'abc' is not a run id" in capsys.readouterr().err
