"""The Jarvis API over real HTTP against the local server (and the Lambda path directly)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from httpx_sse import EventSource, connect_sse

from tests.support.api import call, http_login
from tests.support.factories import unique_name
from tests.support.scripts import run_script
from tests.support.waiting import wait_for


def read_stream(client, url, last_id=None, stop_after=None):
    events = []
    headers = {"Last-Event-ID": str(last_id)} if last_id else {}
    with connect_sse(client, "GET", url, headers=headers, timeout=30) as source:
        for sse in source.iter_sse():
            if sse.event in ("heartbeat", "message", ""):
                continue
            events.append((int(sse.id), sse.event, json.loads(sse.data)))
            if stop_after and len(events) >= stop_after:
                break
    return events


def db_events(pool, run_id):
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, event_type, payload FROM run_events WHERE run_id=%s ORDER BY id", (run_id,)).fetchall()
    return [(r["id"], r["event_type"], r["payload"]) for r in rows]


def test_full_flow_auth_start_stream_and_details(api_server, llm, alice, pool):
    base, _ = api_server
    llm.respond_with(run_script(["Check disk", "Check memory"], answer=lambda r: "All good."))
    resp = httpx.post(f"{base}/api/jarvis/auth", json={"device_secret": alice.device_secret})
    assert resp.status_code == 200
    cookie = resp.headers["set-cookie"]
    assert "zerg_session=" in cookie and "HttpOnly" in cookie
    client = http_login(base, alice)
    started = client.post("/api/jarvis/supervisor", json={"task": "check disk and memory"})
    assert started.status_code == 202
    body = started.json()
    assert body["status"] == "running" and body["stream_url"] == f"/api/jarvis/supervisor/events?run_id={body['run_id']}"

    events = read_stream(client, body["stream_url"])
    kinds = [k for _, k, _ in events if k not in ("supervisor_thinking", "answer_delta")]
    assert "".join(p["text"] for _, k, p in events if k == "answer_delta") == "All good."  # streamed, then stored
    assert kinds[0] == "supervisor_started" and kinds[1:3] == ["worker_spawned"] * 2 and kinds[-1] == "supervisor_complete"
    assert sorted(kinds[3:-1]) == sorted(["worker_started", "worker_complete", "worker_summary_ready"] * 2)
    assert events == db_events(pool, body["run_id"])  # exactly the log, in order, ids = row ids

    doc = client.get(f"/api/jarvis/runs/{body['run_id']}").json()
    assert doc["status"] == "success" and doc["result"] == "All good." and doc["thread_id"] == body["thread_id"]
    assert len(doc["workers"]) == 2 and all(w["status"] == "success" and w["summary"] == "short summary" for w in doc["workers"])
    assert doc["tokens_used"] > 0 and doc["duration_ms"] is not None
    job = doc["workers"][0]
    detail = client.get(f"/api/jarvis/workers/{job['job_id']}").json()
    assert detail["worker_id"] == job["worker_id"]
    assert {"result.txt", "thread.jsonl", "metadata.json", "tool_calls/001_container_exec.txt"} <= {f["path"] for f in detail["files"]}
    result = client.get(f"/api/jarvis/workers/{job['job_id']}/files/result.txt")
    assert result.status_code == 200 and result.text == f"Finished: {job['task']}"
    tool = client.get(f"/api/jarvis/workers/{job['job_id']}/files/tool_calls/001_container_exec.txt")
    assert tool.status_code == 200 and "evidence for" in tool.text
    encoded = client.get(f"/api/jarvis/workers/{job['job_id']}/files/tool_calls%2F001_container_exec.txt")
    assert encoded.text == tool.text
    listing = client.get("/api/jarvis/workers").json()["workers"]
    assert {w["job_id"] for w in listing} == {w["job_id"] for w in doc["workers"]}
    assert all("Finished:" not in json.dumps(w) for w in listing)  # summaries, never results
    thread = client.get("/api/jarvis/thread").json()
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [("user", "check disk and memory"), ("assistant", "All good.")]


def test_reconnecting_with_last_event_id_loses_and_duplicates_nothing(api_server, llm, alice, pool):
    base, _ = api_server
    llm.respond_with(run_script(["a", "b"], commands={"a": "sleep 0.5; echo a", "b": "sleep 0.5; echo b"}))
    client = http_login(base, alice)
    run = client.post("/api/jarvis/supervisor", json={"task": "two slow things"}).json()
    first = read_stream(client, run["stream_url"], stop_after=2)  # then the client drops the connection
    rest = read_stream(client, run["stream_url"], last_id=first[-1][0])
    assert first + rest == db_events(pool, run["run_id"])
    # After the final event was delivered, EventSource is told to stop reconnecting.
    done = client.get(run["stream_url"], headers={"Last-Event-ID": str(rest[-1][0])})
    assert done.status_code == 204


def test_idempotency_key_replay_returns_the_same_run_and_starts_one_execution(api_server, llm, alice, pool):
    base, _ = api_server
    llm.respond_with(run_script(["x"]))
    client = http_login(base, alice)
    a = client.post("/api/jarvis/supervisor", json={"task": "once"}, headers={"Idempotency-Key": "k-123"})
    b = client.post("/api/jarvis/supervisor", json={"task": "once"}, headers={"Idempotency-Key": "k-123"})
    assert a.status_code == b.status_code == 202 and a.json()["run_id"] == b.json()["run_id"]
    read_stream(client, a.json()["stream_url"])
    with pool.connection() as conn:
        n_runs = conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id=%s", (alice.owner_id,)).fetchone()["n"]
    starts = [k for _, k, _ in db_events(pool, a.json()["run_id"]) if k == "supervisor_started"]
    plans = [r for r in llm.requests if any(t["function"]["name"] == "spawn_worker" for t in r.get("tools") or [])
             and not any(m["role"] == "tool" for m in r["messages"])]
    assert n_runs == 1 and len(starts) == 1 and len(plans) == 1


def test_two_owners_cannot_see_each_others_anything(api_server, llm, alice, bob, pool):
    base, _ = api_server
    llm.respond_with(run_script(["alice's private check"]))
    a = http_login(base, alice)
    run = a.post("/api/jarvis/supervisor", json={"task": "alice secret task"}).json()
    read_stream(a, run["stream_url"])
    job = a.get(f"/api/jarvis/runs/{run['run_id']}").json()["workers"][0]["job_id"]
    b = http_login(base, bob)
    for path in (f"/api/jarvis/runs/{run['run_id']}", run["stream_url"], f"/api/jarvis/workers/{job}",
                 f"/api/jarvis/workers/{job}/files/result.txt"):
        resp = b.get(path)
        assert resp.status_code == 404, path
        assert resp.json()["error"] == "not_found"
    assert b.post(f"/api/jarvis/runs/{run['run_id']}/cancel").status_code == 404
    assert b.get("/api/jarvis/workers").json()["workers"] == []
    assert b.get("/api/jarvis/thread").json()["messages"] == []
    # Same answer as for ids that do not exist at all.
    assert b.get("/api/jarvis/runs/999999999").json()["message"] == "run 999999999 not found"


def test_lambda_mode_events_long_poll_parsed_by_an_sse_client_gives_the_same_events(api_server, llm, alice, pool):
    base, configure = api_server
    llm.respond_with(run_script(["x"]))
    client = http_login(base, alice)
    run = client.post("/api/jarvis/supervisor", json={"task": "lambda mode"}).json()
    live = read_stream(client, run["stream_url"])
    token = client.headers["Authorization"].split()[1]
    status, body, raw = call("GET", run["stream_url"], token=token)
    assert status == 200 and raw["headers"]["Content-Type"] == "text/event-stream"
    assert raw["body"].rstrip().endswith("retry: 5000")
    parsed = EventSource(httpx.Response(200, content=raw["body"].encode(), headers={"content-type": "text/event-stream"}))
    got = [(int(e.id), e.event, json.loads(e.data)) for e in parsed.iter_sse() if e.event not in ("message", "heartbeat")]
    assert got == live
    # Resuming in the middle gives the rest; after the end, 204 (stop reconnecting).
    status, _, raw = call("GET", run["stream_url"], token=token, headers={"last-event-id": str(live[1][0])})
    rest = EventSource(httpx.Response(200, content=raw["body"].encode(), headers={"content-type": "text/event-stream"}))
    assert [(int(e.id), e.event, json.loads(e.data)) for e in rest.iter_sse() if e.event != "message"] == live[2:]
    assert call("GET", run["stream_url"], token=token, headers={"last-event-id": str(live[-1][0])})[0] == 204


def test_lambda_mode_long_poll_returns_within_its_bound_when_nothing_happens(runtime_env, alice, pool):
    from zerg.runs import store as runs

    runtime_env(ZERG_SSE_POLL_S="0.5", ZERG_HEARTBEAT_S="0.2")
    with pool.connection() as conn:
        started = runs.start_run(conn, alice.owner_id, "idle")
    token = _token(alice)
    status, _, raw = call("GET", f"/api/jarvis/supervisor/events?run_id={started.run_id}", token=token,
                          headers={"last-event-id": "1"})
    assert status == 200 and "event: heartbeat" in raw["body"] and raw["body"].rstrip().endswith("retry: 5000")


def _token(owner):
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200
    return body["token"]


def test_cancel_stops_the_run_and_its_unfinished_jobs(api_server, llm, alice, pool):
    from zerg.wiring import get_runtime

    base, _ = api_server
    worker_calls = []

    def respond(req):
        if any(t["function"]["name"] == "container_exec" for t in req.get("tools") or []):
            worker_calls.append(req)
        return script(req)

    script = run_script(["slow"], commands={"slow": "sleep 3"})
    llm.respond_with(respond)
    client = http_login(base, alice)
    run = client.post("/api/jarvis/supervisor", json={"task": "slow thing"}).json()
    wait_for(lambda: any(k == "worker_started" for _, k, _ in db_events(pool, run["run_id"])), "the worker to start")
    resp = client.post(f"/api/jarvis/runs/{run['run_id']}/cancel")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
    events = read_stream(client, run["stream_url"])
    assert events[-1][1] == "error" and events[-1][2]["message"] == "cancelled by the user"
    # The worker that was mid-command finishes (its metadata.json says how): it must not
    # resurrect the job, and it stops instead of asking the model for more commands.
    (worker,) = client.get(f"/api/jarvis/runs/{run['run_id']}").json()["workers"]
    store = get_runtime().store
    ended = wait_for(lambda: (m := store.read_metadata(worker["worker_id"])).get("finished_at") and m,
                     "the worker to finish", limit_s=60)
    assert ended["status"] == "cancelled" and len(worker_calls) == 1
    doc = client.get(f"/api/jarvis/runs/{run['run_id']}").json()
    assert doc["status"] == "cancelled" and [w["status"] for w in doc["workers"]] == ["cancelled"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM thread_messages WHERE owner_id=%s", (alice.owner_id,)).fetchone()["n"] == 0


# --- bad input ------------------------------------------------------------------------------

def _expired_token(owner_id):
    import jwt

    from zerg.auth import jwt_secret
    from zerg.config import get_settings

    past = datetime.now(timezone.utc) - timedelta(days=8)
    return jwt.encode({"sub": str(owner_id), "iat": past, "exp": past + timedelta(days=7)}, jwt_secret(get_settings()), algorithm="HS256")


def test_bad_input_gets_precise_json_errors(api_server, alice, bob, pool, llm):
    base, _ = api_server
    llm.respond_with(run_script(["x"]))
    client = http_login(base, alice)
    run = client.post("/api/jarvis/supervisor", json={"task": "mine"}).json()
    read_stream(client, run["stream_url"])
    job = client.get(f"/api/jarvis/runs/{run['run_id']}").json()["workers"][0]["job_id"]
    anon = httpx.Client(base_url=base, timeout=30)
    cases = [
        (client.post("/api/jarvis/supervisor", content=b"{not json", headers={"content-type": "application/json"}), 400, "bad_request", "not valid JSON"),
        (client.post("/api/jarvis/supervisor", json={}), 422, "validation_error", "task: Field required"),
        (client.post("/api/jarvis/supervisor", json={"task": "   "}), 422, "validation_error", "task"),
        (client.post("/api/jarvis/supervisor", json={"task": "x" * 9000}), 413, "payload_too_large", "limit is 8192"),
        (anon.post("/api/jarvis/supervisor", json={"task": "hi"}), 401, "unauthorized", "missing credentials"),
        (anon.get("/api/jarvis/runs/1", headers={"Authorization": "Bearer not.a.token"}), 401, "unauthorized", "invalid token"),
        (anon.get("/api/jarvis/runs/1", headers={"Authorization": f"Bearer {_expired_token(alice.owner_id)}"}), 401, "unauthorized", "expired"),
        (http_login(base, bob).get(f"/api/jarvis/runs/{run['run_id']}"), 404, "not_found", "not found"),
        (client.get(f"/api/jarvis/workers/{job}/files/..%2F..%2Fetc%2Fpasswd"), 400, "bad_path", "'..'"),
        (client.get(f"/api/jarvis/workers/{job}/files/%2Fetc%2Fpasswd"), 400, "bad_path", "absolute"),
        (client.get("/api/jarvis/nothing-here"), 404, "not_found", "no route"),
        (client.delete("/api/jarvis/supervisor"), 405, "method_not_allowed", "DELETE"),
        (client.get("/api/jarvis/runs/abc"), 422, "validation_error", "run_id"),
        (anon.post("/api/jarvis/auth", json={"device_secret": "wrong"}), 401, "unauthorized", "unknown device secret"),
    ]
    for resp, status, error, fragment in cases:
        body = resp.json()
        assert (resp.status_code, body["error"]) == (status, error), (resp.request.url, resp.text)
        assert fragment in body["message"], body
        assert set(body) == {"error", "message"} and "Traceback" not in resp.text


def test_openapi_document_describes_the_routes(api_server):
    base, _ = api_server
    doc = httpx.get(f"{base}/api/openapi.json").json()
    assert doc["info"]["title"] == "Zerg Jarvis API"
    assert {"/api/jarvis/auth", "/api/jarvis/supervisor", "/api/jarvis/supervisor/events", "/api/jarvis/runs/{run_id}",
            "/api/jarvis/runs/{run_id}/cancel", "/api/jarvis/workers", "/api/jarvis/thread"} <= set(doc["paths"])
    schema = doc["paths"]["/api/jarvis/supervisor"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema


def test_owners_add_prints_the_secret_once_and_stores_only_its_hash(database_url, pool):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERG_")} | {"DATABASE_URL": database_url}
    name = unique_name("carol")
    out = subprocess.run([sys.executable, "-m", "zerg.cli", "owners", "add", name], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    secret = out.stdout.split("device secret (shown once, store it now): ")[1].strip()
    with pool.connection() as conn:
        rows = conn.execute("SELECT * FROM owners o JOIN devices d ON d.owner_id = o.id WHERE o.name = %s", (name,)).fetchall()
    assert len(rows) == 1 and secret not in json.dumps(rows, default=str)
    assert call("POST", "/api/jarvis/auth", {"device_secret": secret})[0] == 200


def test_zerg_ask_follows_the_stream_and_prints_the_answer(api_server, llm, alice):
    from zerg.local.client import ask

    base, _ = api_server
    llm.respond_with(run_script(["Check disk"], answer=lambda r: "Disk is fine."))
    lines: list[str] = []
    doc = ask(base, alice.device_secret, "is my disk ok?", out=lines.append)
    assert doc["status"] == "success" and doc["result"] == "Disk is fine."
    assert lines[0].startswith("> run ") and any("+ worker #" in line for line in lines)


def test_zerg_ask_reports_a_wrong_secret_and_an_unreachable_api_in_one_line(api_server):
    import os
    import subprocess
    import sys

    base, _ = api_server
    wrong = subprocess.run([sys.executable, "-m", "zerg.cli", "ask", "--url", base, "--secret-stdin", "hi"],
                           input="nope\n", capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "HTTP 401" in wrong.stderr and "unknown device secret" in wrong.stderr
    down = subprocess.run([sys.executable, "-m", "zerg.cli", "ask", "--url", "http://127.0.0.1:9", "hi"],
                          env={**os.environ, "ZERG_DEVICE_SECRET": "s"}, capture_output=True, text=True, timeout=60)
    assert down.returncode == 2 and "cannot reach http://127.0.0.1:9" in down.stderr and "Traceback" not in down.stderr


def test_a_failed_start_frees_the_idempotency_key_so_the_retry_starts_a_new_run(api_server, llm, alice, monkeypatch):
    from zerg.wiring import get_runtime

    base, _ = api_server
    llm.respond_with(run_script(["x"]))
    rt = get_runtime()
    calls = {"n": 0}

    class FailingOnce:
        inner = rt.starter

        def start(self, *args):
            calls["n"] += 1
            if calls["n"] == 1:
                raise ConnectionError("step functions unreachable")
            return self.inner.start(*args)

        def stop(self, *args):
            return self.inner.stop(*args)

        def close(self):
            return self.inner.close()

    monkeypatch.setattr(rt, "starter", FailingOnce())
    client = http_login(base, alice)
    first = client.post("/api/jarvis/supervisor", json={"task": "t"}, headers={"Idempotency-Key": "retry-me"})
    assert first.status_code == 503 and first.json()["error"] == "unavailable"
    second = client.post("/api/jarvis/supervisor", json={"task": "t"}, headers={"Idempotency-Key": "retry-me"})
    assert second.status_code == 202 and second.json()["status"] == "running"
    events = read_stream(client, second.json()["stream_url"])
    assert events[-1][1] == "supervisor_complete"


def test_a_replay_starts_the_execution_the_first_attempt_never_started(api_server, llm, alice, pool):
    from zerg.runs import store as runs

    base, _ = api_server
    llm.respond_with(run_script(["x"]))
    with pool.connection() as conn:  # the ingress died after inserting the run
        orphan = runs.start_run(conn, alice.owner_id, "t", idempotency_key="crashed")
    client = http_login(base, alice)
    resp = client.post("/api/jarvis/supervisor", json={"task": "t"}, headers={"Idempotency-Key": "crashed"})
    assert resp.status_code == 202 and resp.json()["run_id"] == orphan.run_id
    assert read_stream(client, resp.json()["stream_url"])[-1][1] == "supervisor_complete"


def test_bob_and_alice_are_isolated_both_ways_including_the_lambda_events_path(api_server, llm, alice, bob):
    base, _ = api_server
    llm.respond_with(run_script(["private"]))
    clients = {"alice": http_login(base, alice), "bob": http_login(base, bob)}
    runs_of = {}
    for name, client in clients.items():
        run = client.post("/api/jarvis/supervisor", json={"task": f"{name} task"}).json()
        read_stream(client, run["stream_url"])
        runs_of[name] = run
    for reader, other in (("alice", "bob"), ("bob", "alice")):
        client, run = clients[reader], runs_of[other]
        token = client.headers["Authorization"].split()[1]
        assert client.get(f"/api/jarvis/runs/{run['run_id']}").status_code == 404
        assert call("GET", run["stream_url"], token=token)[0] == 404  # Lambda long-poll path
        own = client.get("/api/jarvis/workers").json()["workers"]
        assert own and all(w["run_id"] == runs_of[reader]["run_id"] for w in own)
        assert [m["content"] for m in client.get("/api/jarvis/thread").json()["messages"]][0] == f"{reader} task"


def test_zerg_ask_stops_at_once_on_an_api_error_from_the_stream(api_server, alice):
    from zerg.local.client import ClientError, follow

    base, _ = api_server
    client = http_login(base, alice)
    with pytest.raises(ClientError, match="HTTP 404 .*run 987654 not found"):
        follow(client, "/api/jarvis/supervisor/events?run_id=987654", lambda kind, payload: None, max_reconnects=3)


def test_lambda_long_poll_never_outlives_the_function():
    from zerg.api.routes.runs import long_poll_seconds

    class Context:
        def __init__(self, ms):
            self.ms = ms

        def get_remaining_time_in_millis(self):
            return self.ms

    assert long_poll_seconds(25, None) == 25  # the local server: no Lambda context
    assert long_poll_seconds(25, Context(3_000)) == 1.0  # 3 s left: answer with 2 s to spare
    assert long_poll_seconds(25, Context(60_000)) == 25
    assert long_poll_seconds(25, Context(1_000)) == 0.5
