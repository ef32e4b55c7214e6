"""The evidence under an answer (issue 29): a run's workers carry a title, the command they ran and
their tool calls (path, outcome, time), so the page shows "[1] Check disk usage ✓ 106 ms" with the
command and opens the worker's output without reading its artifacts; every read is the owner's."""

from __future__ import annotations

import pytest

from tests.support.scripts import run_script
from zerg.runs import store as runs
from zerg.runs.launch import start_execution
from zerg.text import title
from zerg.workers.runner import CALL_LINE_CHARS, call_line


def test_a_title_is_the_tasks_first_sentence_cut_at_a_word():
    assert title("check disk usage on cube. Report the biggest folders.") == "Check disk usage on cube"
    assert title("\n\n  list the  failed units\nthen restart them") == "List the failed units"
    long = title("Look at the nginx logs on web1 and count the 500 errors in the last hour, by path")
    assert long == "Look at the nginx logs on web1 and count the 500 errors in…" and len(long) <= 60
    assert title("x" * 100).endswith("…") and len(title("x" * 100)) == 60
    assert title("") == ""


def test_a_calls_line_is_its_command_url_or_query_cut_and_never_more():
    assert call_line('{"command": "df -h  /\\n"}') == "df -h /"
    assert call_line('{"host": "cube", "command": "uptime"}') == "[cube] uptime"
    assert call_line('{"url": "https://example.com/x", "method": "GET"}') == "https://example.com/x"
    assert call_line('{"limit": 3}') is None
    assert call_line("not json") is None and call_line("[1, 2]") is None and call_line("") is None
    cut = call_line('{"command": "' + "a" * 1000 + '"}')
    assert len(cut) == CALL_LINE_CHARS and cut.endswith("…")


@pytest.mark.e2e
def test_the_run_document_names_each_workers_command_and_output_for_its_owner_only(runtime_env, llm, pool, alice, bob):
    from tests.support.api import call, login

    rt = runtime_env()
    llm.respond_with(run_script(["Check disk usage on cube. Then report.", "Check memory"],
                                commands={"Check disk usage on cube. Then report.": "df -h /",
                                          "Check memory": "free -m"}))
    with pool.connection() as conn:
        started = runs.start_run(conn, alice.owner_id, "check disk and memory", trigger="cli")
        run = runs.get_run(conn, alice.owner_id, started.run_id)
    desc = rt.starter.engine().wait(start_execution(rt, run), timeout=120)
    assert desc["status"] == "SUCCEEDED", desc
    rt.starter.drain(timeout=120)

    token = login(alice)
    status, doc, _ = call("GET", f"/api/jarvis/runs/{run['id']}", token=token)
    assert status == 200, doc
    disk, memory = doc["workers"]
    assert (disk["title"], memory["title"]) == ("Check disk usage on cube", "Check memory")
    assert (disk["command"], memory["command"]) == ("df -h /", "free -m")
    for worker in (disk, memory):
        (tool,) = worker["tool_calls"]
        assert tool["tool"] == "container_exec" and tool["ok"] is True and tool["exit_code"] == 0
        assert tool["path"].startswith("tool_calls/001_") and tool["command"] == worker["command"]
        assert tool["duration_ms"] >= 0 and worker["started_at"] <= tool["started_at"] <= worker["finished_at"]
        # The call's output is the worker's file: the owner reads it, and the result beside it.
        status, body, _ = call("GET", f"/api/jarvis/workers/{worker['job_id']}/files/{tool['path'].replace('/', '%2F')}",
                               token=token)
        assert status == 200 and body.startswith(f"$ {worker['command']}"), body

    other = login(bob)  # another owner's ids: not found, whichever route
    for path in (f"/api/jarvis/runs/{run['id']}", f"/api/jarvis/workers/{disk['job_id']}",
                 f"/api/jarvis/workers/{disk['job_id']}/files/result.txt",
                 f"/api/jarvis/workers/{disk['job_id']}/files/{disk['tool_calls'][0]['path'].replace('/', '%2F')}"):
        status, body, _ = call("GET", path, token=other)
        assert status == 404 and body["error"] == "not_found", (path, body)

    with pool.connection() as conn:  # the index row is rebuilt from metadata.json with its calls
        conn.execute("UPDATE worker_jobs SET tool_calls = NULL WHERE run_id = %s", (run["id"],))
        from zerg.runs import jobs

        jobs.reindex(conn, rt.store)
        again = runs.run_document(conn, alice.owner_id, run["id"])
    assert [w["tool_calls"] for w in again["workers"]] == [disk["tool_calls"], memory["tool_calls"]]
