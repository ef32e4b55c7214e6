"""A PostgreSQL outage under a running ``zerg serve``: 503s while it lasts, the first request after
it succeeds, a run in flight finishes with its job index agreeing with ``metadata.json``.

The database here is a server of the test's own (``DisposablePostgres``), stopped and started by
the test; never the shared test database.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest
from httpx_sse import connect_sse

from tests.support.disposable_pg import DisposablePostgres
from tests.support.factories import unique_name
from tests.support.push_service import Subscriber
from tests.support.scripts import role_of, run_script
from zerg import config, db, wiring
from zerg.migrate import migrate
from zerg.owners import create_owner


@pytest.fixture(scope="module")
def outage_pg():
    server = DisposablePostgres()
    with psycopg.connect(server.url, autocommit=True) as conn:
        migrate(conn)
    yield server
    db.close_pools()  # the served runtime's pool on this server
    server.close()


@pytest.fixture
def outage_db(outage_pg):
    """The disposable server, running at the start of every test (a failed test may leave it down)."""
    if not outage_pg.running:
        outage_pg.start()
    return outage_pg


@pytest.fixture
def served(outage_db, monkeypatch, tmp_path, llm):
    """``zerg serve`` (in-process, loopback) on the disposable database; yields its URL."""
    from zerg.local.server import make_server

    for key, value in {"DATABASE_URL": outage_db.url, "OPENAI_BASE_URL": llm.base_url,
                       "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"), "ZERG_LLM_MAX_RETRIES": "0",
                       "ZERG_DB_WAIT_S": "2", "ZERG_DB_RETRY_S": "60", "ZERG_HEARTBEAT_S": "1"}.items():
        monkeypatch.setenv(key, value)
    config.get_settings.cache_clear()
    wiring.reset_runtime()
    server = make_server("127.0.0.1", 0).start()
    yield server.url
    server.stop()


def login(base: str, outage_db: DisposablePostgres) -> httpx.Client:
    with psycopg.connect(outage_db.url, autocommit=True) as conn:
        conn.row_factory = psycopg.rows.dict_row
        owner = create_owner(conn, unique_name("outage"))
    client = httpx.Client(base_url=base, timeout=30)
    resp = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret})
    assert resp.status_code == 200, resp.text
    client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
    return client


# --- requests for every operation the OpenAPI document lists -----------------------------------

def _keypair() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    return private, key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                  serialization.PublicFormat.OpenSSH).decode()


def _valid_bodies() -> dict[str, Any]:
    """Bodies whose content is checked before the database is asked (schema name -> a valid one)."""
    private, public = _keypair()
    return {"HostSpec": {"hostname": "127.0.0.1", "user": "zerg", "private_key": private, "host_key": public},
            "PairBody": {"code": "ABCDE-23456", "device_name": "laptop"},
            "AddContactBody": {"kind": "email", "address": "owner@example.com"},
            "VerifyContactBody": {"kind": "email", "address": "owner@example.com", "code": "123456"},
            "ScheduleSpec": {"name": "daily", "task": "check the disks", "cron": "0 6 * * *"},
            "SubscriptionIn": {"endpoint": "https://8.8.8.8/push/x", "keys": Subscriber("/push/x").keys()},
            "ServerSpec": {"url": "https://8.8.8.8/mcp"}}


def _example(schema: dict[str, Any], doc: dict[str, Any]) -> Any:
    """A minimal value the schema accepts (enough to get past validation to the database)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return _valid_bodies().get(name) or _example(doc["components"]["schemas"][name], doc)
    if "anyOf" in schema:
        return _example(next(s for s in schema["anyOf"] if s.get("type") != "null"), doc)
    kind = schema.get("type")
    if kind == "object":
        return {name: _example(schema["properties"][name], doc) for name in schema.get("required", [])}
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if schema.get("format") == "uuid":
        return str(uuid.uuid4())
    return "x" * max(1, schema.get("minLength", 1))


# "METHOD /path" of operations that answer without the database (none today): they keep working.
ANSWERED_WITHOUT_THE_DATABASE: set[str] = set()


def every_operation(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, str], Any]]:
    """(method, url, headers, json body or None) for each operation, its required parameters filled."""
    out = []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if f"{method.upper()} {path}" in ANSWERED_WITHOUT_THE_DATABASE:
                continue
            url, query = path, {}
            for param in op.get("parameters", []):
                if param["in"] == "path":
                    url = url.replace("{%s}" % param["name"], str(_example(param["schema"], doc)))
                elif param["in"] == "query" and param.get("required"):
                    query[param["name"]] = str(_example(param["schema"], doc))
            if query:
                url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
            body_schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            out.append((method.upper(), url, {}, None if body_schema is None else _example(body_schema, doc)))
    return out


def assert_unavailable(resp: httpx.Response, what: str) -> None:
    assert resp.status_code == 503, f"{what}: {resp.status_code} {resp.text[:300]}"
    assert resp.headers["content-type"].startswith("application/json"), what
    assert resp.json()["error"] == "unavailable" and resp.json()["message"], what
    assert int(resp.headers["retry-after"]) > 0, what


# --- the tests ----------------------------------------------------------------------------------

def test_every_route_answers_503_with_retry_after_while_the_database_is_down_and_the_first_request_after_succeeds(
    served, outage_db
):
    from tests.support.api import call

    client = login(served, outage_db)
    doc = client.get("/api/openapi.json").json()
    operations = every_operation(doc)
    assert len(operations) >= 19 and any(url.startswith("/api/jarvis/supervisor/events") for _, url, _, _ in operations)
    assert client.get("/api/jarvis/thread").status_code == 200  # the pool holds live connections
    pool = wiring.get_runtime().pool
    pool.pop_stats()

    outage_db.stop()

    def send(op: tuple[str, str, dict[str, str], Any]) -> tuple[str, httpx.Response]:
        method, url, headers, body = op
        return f"{method} {url}", client.request(method, url, headers=headers, json=body)

    # The first request alone: requests in flight together wait for a connection together.
    answers = [send(operations[0])]
    with ThreadPoolExecutor(max_workers=6) as senders:
        answers += senders.map(send, operations[1:])
    for what, resp in answers:
        assert_unavailable(resp, what)
    # Only the first request waited out ZERG_DB_WAIT_S for a connection; the server then knew the
    # database was down and refused the others at once (a direct connection attempt each).
    assert pool.pop_stats().get("requests_errors", 0) == 1
    # The event stream too: a real 503 response, not a dropped connection.
    with client.stream("GET", "/api/jarvis/supervisor/events?run_id=1", headers={"last-event-id": "3"}) as resp:
        resp.read()
        assert_unavailable(resp, "events with Last-Event-ID")
    # Without a session the answer is the same: nothing is known until the database answers.
    assert_unavailable(httpx.post(f"{served}/api/jarvis/auth", json={"device_secret": "x"}, timeout=30), "auth")
    # The Lambda path maps it the same way (one mapping for both hosts).
    status, body, raw = call("GET", "/api/jarvis/thread", token=client.headers["Authorization"][7:])
    assert status == 503 and body["error"] == "unavailable" and raw["headers"]["Retry-After"]

    outage_db.start()
    first = client.get("/api/jarvis/thread")
    assert first.status_code == 200, first.text


def test_pooled_connections_to_a_restarted_database_are_replaced_before_a_request_uses_them(served, outage_db):
    client = login(served, outage_db)
    pool = wiring.get_runtime().pool  # the served runtime's pool: fill it with idle connections
    held = [pool.getconn() for _ in range(6)]
    for conn in held:
        pool.putconn(conn)

    outage_db.stop()  # a restart with no request in between: every pooled connection is now dead
    outage_db.start()

    assert client.get("/api/jarvis/thread").status_code == 200
    assert client.get("/api/jarvis/sessions").status_code == 200


def test_a_run_in_flight_rides_out_an_outage_and_its_job_index_agrees_with_metadata(served, outage_db, llm):
    client = login(served, outage_db)
    stopped, following = threading.Event(), threading.Event()
    script = run_script(["Check disk usage", "Check memory"])
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        # The database goes down while the workers talk to the model: each then runs its
        # command, finishes, and must record its outcome while the database is still down.
        if role_of(request) == "worker":
            with lock:
                if not stopped.is_set():
                    following.wait(30)  # the stream is open before the outage begins
                    outage_db.stop()
                    stopped.set()
        return script(request)

    llm.respond_with(respond)
    run = client.post("/api/jarvis/supervisor", json={"task": "check disk and memory"}).json()
    frames: list[tuple[str, str]] = []

    def follow() -> None:  # opened before the outage: the stream must ride it out
        with httpx.Client(base_url=served, headers=client.headers, timeout=120) as c, \
                connect_sse(c, "GET", run["stream_url"]) as source:
            for event in source.iter_sse():
                following.set()
                frames.append((event.id, event.event))
                if event.event in ("supervisor_complete", "error"):
                    return

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    assert stopped.wait(60), "no worker reached the model"

    assert_unavailable(client.get(f"/api/jarvis/runs/{run['run_id']}"), "run during the outage")
    assert_unavailable(client.get(run["stream_url"]), "events during the outage")
    outage_db.start()
    first = client.get(f"/api/jarvis/runs/{run['run_id']}")
    assert first.status_code == 200, first.text

    follower.join(120)
    assert not follower.is_alive(), f"the stream did not end; got {frames}"
    doc = client.get(f"/api/jarvis/runs/{run['run_id']}").json()
    assert doc["status"] == "success", doc
    store = wiring.get_runtime().store
    with psycopg.connect(outage_db.url, row_factory=psycopg.rows.dict_row) as conn:
        rows = conn.execute("SELECT id, worker_id, status FROM worker_jobs WHERE run_id = %s ORDER BY id",
                            (run["run_id"],)).fetchall()
        completes = conn.execute("SELECT payload FROM run_events WHERE run_id = %s AND event_type = 'worker_complete'",
                                 (run["run_id"],)).fetchall()
    assert len(rows) == 2
    for row in rows:
        meta = store.read_metadata(row["worker_id"])
        assert (row["status"], meta["status"]) == ("success", "success"), (row, meta)
    assert sorted(c["payload"]["job_id"] for c in completes) == [r["id"] for r in rows]  # once each
    assert frames[-1][1] == "supervisor_complete"
    # Events only: the opening ``retry:`` block parses as an id-less message, a heartbeat repeats the last id.
    ids = [int(i) for i, kind in frames if kind not in ("heartbeat", "message")]
    assert ids == sorted(set(ids))  # nothing repeated or reordered across the outage
    assert "heartbeat" in [kind for _, kind in frames]  # the stream stayed open through the outage
    assert [kind for _, kind in frames].count("worker_complete") == 2
