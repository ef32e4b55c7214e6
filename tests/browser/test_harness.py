"""The harness itself, without a browser: ``zerg serve`` as a subprocess on the test database runs
the conductor's two-worker run, holds its workers at the gate until released, and stops cleanly."""

from __future__ import annotations

from tests.support.browser import api_client
from tests.support.waiting import wait_for


def test_the_served_subprocess_runs_the_scripted_two_worker_run_and_holds_it_at_the_gate(
        served, conductor, new_owner, pool):
    owner = new_owner()
    client = api_client(served.url, owner)
    conductor.hold()
    resp = client.post("/api/jarvis/supervisor", json={"task": "Investigate disk and memory"})
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["run_id"]
    wait_for(lambda: conductor.held == 2, "both workers held at the gate", 120)
    assert client.get(f"/api/jarvis/runs/{run_id}").json()["status"] == "running"
    conductor.release()
    run = wait_for(lambda: (r := client.get(f"/api/jarvis/runs/{run_id}").json())["status"] == "success" and r,
                   "the run's answer", 120)
    assert run["result"] == conductor.answer
    with pool.connection() as conn:
        jobs = conn.execute("SELECT id, task, status, summary FROM worker_jobs WHERE run_id = %s ORDER BY id",
                            (run_id,)).fetchall()
    assert [(j["task"], j["status"]) for j in jobs] == [(t, "success") for t in conductor.tasks]
    assert [j["summary"] for j in jobs] == [f"summary of {t}" for t in conductor.tasks]
    detail = client.get(f"/api/jarvis/workers/{jobs[0]['id']}")
    assert "tool_calls/001_container_exec.txt" in [f["path"] for f in detail.json()["files"]]
    output = client.get(f"/api/jarvis/workers/{jobs[0]['id']}/files/tool_calls/001_container_exec.txt")
    assert "EVIDENCE-" in output.text
