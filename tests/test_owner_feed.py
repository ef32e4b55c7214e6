"""GET /api/jarvis/events: the owner-wide feed of runs starting and finishing (schedules, replies,
other devices), live under ``zerg serve`` and long-polled under Lambda, resumable by Last-Event-ID."""

from __future__ import annotations

import json
import threading

import httpx
from httpx_sse import EventSource, connect_sse

from tests.support.api import call, http_login
from tests.support.waiting import wait_for
from zerg.runs import events
from zerg.runs import store as runs

FEED = "/api/jarvis/events"
ANNOUNCED = ("run_started", "run_finished")


def _latest(pool, owner_id: int) -> int:
    with pool.connection() as conn:
        return events.latest_event_id(conn, owner_id)


def _scheduled_run_that_ends(pool, owner_id: int, task: str) -> int:
    """A run started by a schedule (not by this client), then cancelled: two announcements."""
    with pool.connection() as conn:
        run_id = runs.start_run(conn, owner_id, task, trigger="schedule").run_id
        events.emit(conn, run_id, owner_id, "supervisor_thinking", {"message": "not announced"})
        runs.cancel_run(conn, owner_id, run_id)
    return run_id


def _announcements(frames, count: int) -> list[tuple[int, str, dict]]:
    """The next ``count`` announcements of an open feed (``frames``: its iter_sse())."""
    got = []
    for sse in frames:
        if sse.event in ANNOUNCED:
            got.append((int(sse.id), sse.event, json.loads(sse.data)))
            if len(got) == count:
                return got
    raise AssertionError(f"the feed ended after {got}")


def test_a_live_feed_announces_a_scheduled_run_and_never_another_owners(zerg_server, pool, alice, bob):
    with pool.connection() as conn:
        before = runs.start_run(conn, alice.owner_id, "before the client connected").run_id
    client = http_login(zerg_server.url, alice)
    with connect_sse(client, "GET", FEED) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        frames = source.iter_sse()
        cursor = next(f for f in frames if f.id)  # the id-only frame: where this client starts
        assert (cursor.id, cursor.data) == (str(_latest(pool, alice.owner_id)), "")
        with pool.connection() as conn:
            bobs = runs.start_run(conn, bob.owner_id, "bob's secret", trigger="schedule").run_id
        mine = _scheduled_run_that_ends(pool, alice.owner_id, "nightly disk check")
        got = _announcements(frames, 2)
    with pool.connection() as conn:
        thread_id = runs.get_run(conn, alice.owner_id, mine)["thread_id"]
    assert [(kind, payload) for _, kind, payload in got] == [
        ("run_started", {"run_id": mine, "thread_id": thread_id, "task": "nightly disk check", "trigger": "schedule"}),
        ("run_finished", {"run_id": mine, "status": "cancelled"}),
    ]
    assert before not in {p["run_id"] for _, _, p in got} and bobs not in {p["run_id"] for _, _, p in got}
    assert got[0][0] > int(cursor.id)


def test_reconnecting_with_last_event_id_loses_and_repeats_nothing(zerg_server, pool, alice):
    client = http_login(zerg_server.url, alice)
    with connect_sse(client, "GET", FEED) as source:
        cursor = next(f for f in source.iter_sse() if f.id).id
    first = _scheduled_run_that_ends(pool, alice.owner_id, "while the client was away")
    with connect_sse(client, "GET", FEED, headers={"Last-Event-ID": cursor}) as source:
        got = _announcements(source.iter_sse(), 2)
    assert [(p["run_id"], kind) for _, kind, p in got] == [(first, "run_started"), (first, "run_finished")]
    second = _scheduled_run_that_ends(pool, alice.owner_id, "away again")
    with connect_sse(client, "GET", f"{FEED}?last_event_id={got[-1][0]}") as source:
        again = _announcements(source.iter_sse(), 2)
    assert [(p["run_id"], kind) for _, kind, p in again] == [(second, "run_started"), (second, "run_finished")]


def test_the_live_feed_checks_the_session_and_the_id_before_streaming(zerg_server, alice):
    assert httpx.get(zerg_server.url + FEED).status_code == 401
    client = http_login(zerg_server.url, alice)
    resp = client.get(FEED, headers={"Last-Event-ID": "abc"})
    assert resp.status_code == 422 and "last-event-id" in resp.json()["message"]
    resp = client.get(f"{FEED}?last_event_id=-1")
    assert resp.status_code == 422 and "last_event_id" in resp.json()["message"]


def test_a_live_feed_ends_when_its_session_is_revoked(zerg_server, alice):
    client = http_login(zerg_server.url, alice)
    with connect_sse(client, "GET", FEED) as source:
        frames = source.iter_sse()
        next(f for f in frames if f.id)
        assert client.post("/api/jarvis/logout").status_code == 200
        assert [f.event for f in frames if f.event in ANNOUNCED] == []  # the stream ends by itself
    wait_for(lambda: not zerg_server.app.live_streams, "the revoked feed's thread to end")
    assert client.get(FEED).status_code == 401


def _token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


def _parse(body: str) -> list:
    return list(EventSource(httpx.Response(200, content=body.encode(),
                                           headers={"content-type": "text/event-stream"})).iter_sse())


def test_the_lambda_long_poll_starts_now_then_resumes_by_id(runtime_env, pool, alice, bob):
    runtime_env(ZERG_SSE_POLL_S="0.5", ZERG_HEARTBEAT_S="0.2")
    token = _token(alice)
    _scheduled_run_that_ends(pool, alice.owner_id, "history, not replayed")
    status, _, raw = call("GET", FEED, token=token)
    assert status == 200 and raw["headers"]["Content-Type"] == "text/event-stream"
    assert raw["body"].startswith(f"id: {_latest(pool, alice.owner_id)}\n\n")  # where the client resumes
    assert raw["body"].rstrip().endswith("retry: 5000") and "run_started" not in raw["body"]
    cursor = _latest(pool, alice.owner_id)

    with pool.connection() as conn:
        runs.start_run(conn, bob.owner_id, "bob's", trigger="email")
    mine = _scheduled_run_that_ends(pool, alice.owner_id, "a reply came in")
    _, _, raw = call("GET", FEED, token=token, headers={"last-event-id": str(cursor)})
    got = [(int(e.id), e.event, json.loads(e.data)) for e in _parse(raw["body"]) if e.event in ANNOUNCED]
    assert [(kind, p["run_id"]) for _, kind, p in got] == [("run_started", mine), ("run_finished", mine)]
    assert got[1][2]["status"] == "cancelled"

    later = _scheduled_run_that_ends(pool, alice.owner_id, "the next one")
    _, _, raw = call("GET", f"{FEED}?last_event_id=0", token=token, headers={"last-event-id": str(got[-1][0])})
    again = [(e.event, json.loads(e.data)["run_id"]) for e in _parse(raw["body"]) if e.event in ANNOUNCED]
    assert again == [("run_started", later), ("run_finished", later)]  # the header wins; nothing repeated


def test_the_lambda_long_poll_of_another_owner_holds_none_of_alices_runs(runtime_env, pool, alice, bob):
    runtime_env(ZERG_SSE_POLL_S="0.3", ZERG_HEARTBEAT_S="0.2")
    mine = _scheduled_run_that_ends(pool, alice.owner_id, "alice's private run")
    _, _, raw = call("GET", f"{FEED}?last_event_id=0", token=_token(bob))
    runs_shown = [json.loads(e.data).get("run_id") for e in _parse(raw["body"]) if e.data.startswith("{")]
    assert mine not in runs_shown and "alice's private run" not in raw["body"]
    assert "run_started" not in raw["body"] and "run_finished" not in raw["body"]  # bob has no runs
    assert call("GET", FEED)[0] == 401


def test_a_finished_run_is_announced_with_its_final_status(runtime_env, pool, alice):
    runtime_env(ZERG_SSE_POLL_S="0.3", ZERG_HEARTBEAT_S="0.2")
    cursor = _latest(pool, alice.owner_id)
    with pool.connection() as conn:
        ok = runs.start_run(conn, alice.owner_id, "succeeds").run_id
        runs.complete_run(conn, runs.get_run(conn, alice.owner_id, ok), "done", to_thread=False)
        late = runs.start_run(conn, alice.owner_id, "times out").run_id
        runs.fail_run(conn, runs.get_run(conn, alice.owner_id, late), "timeout", "too slow")
    _, _, raw = call("GET", FEED, token=_token(alice), headers={"last-event-id": str(cursor)})
    finished = [json.loads(e.data) for e in _parse(raw["body"]) if e.event == "run_finished"]
    assert finished == [{"run_id": ok, "status": "success"}, {"run_id": late, "status": "timeout"}]


def test_an_owners_run_starts_and_ends_become_visible_in_id_order_across_runs(pool, alice):
    """A later start (or end) of another run of the owner waits for an earlier one's transaction:
    a feed that read id N can never later find a smaller id appear."""
    ids: dict[str, int] = {}
    with pool.connection() as holder:
        with holder.transaction():
            ids["a"] = runs.start_run(holder, alice.owner_id, "started first, committed last").run_id

            def later():
                with pool.connection() as conn:
                    ids["pid"] = conn.info.backend_pid
                    ids["b"] = runs.start_run(conn, alice.owner_id, "started second").run_id

            thread = threading.Thread(target=later)
            thread.start()

            def waiting_on_a_lock():
                pid = ids.get("pid")
                return pid and holder.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                              (pid,)).fetchone()["wait_event_type"] == "Lock"

            wait_for(waiting_on_a_lock, "the second start to wait for the first's transaction")
            assert "b" not in ids
        thread.join(60)
    with pool.connection() as conn:
        feed = events.owner_feed(conn, alice.owner_id, after_id=0)
    assert [e["payload"]["run_id"] for e in feed] == [ids["a"], ids["b"]]


def test_a_new_client_starts_below_a_run_start_still_committing_while_other_runs_log_work(pool, alice):
    """A worker event of another run can commit with a higher id while a run start is in flight:
    a client connecting then must start below that start, or it never sees it."""
    with pool.connection() as conn:
        other = runs.start_run(conn, alice.owner_id, "a run already at work").run_id
    with pool.connection() as holder:
        with holder.transaction():
            started = runs.start_run(holder, alice.owner_id, "started, not yet committed").run_id
            with pool.connection() as conn:  # commits with a higher id than the start's
                events.emit(conn, other, alice.owner_id, "worker_started", {"job_id": 1, "worker_id": "w"})
            start_at = _latest(pool, alice.owner_id)
    with pool.connection() as conn:
        feed = events.owner_feed(conn, alice.owner_id, after_id=start_at)
    assert [(e["kind"], e["payload"]["run_id"]) for e in feed] == [("run_started", started)]


class _DownFor:
    """The pool, refusing its first ``failures`` checkouts as an unreachable database does."""

    def __init__(self, pool, failures: int) -> None:
        self.pool, self.failures, self.timeout = pool, failures, pool.timeout

    def connection(self, timeout=None):
        from psycopg import OperationalError

        if self.failures:
            self.failures -= 1
            raise OperationalError("connection refused")
        return self.pool.connection(timeout=timeout)


def test_an_open_feed_rides_out_a_database_outage_and_goes_on_from_its_last_id(pool, alice):
    import time

    from zerg.api import sse

    start = _latest(pool, alice.owner_id)
    run_id = _scheduled_run_that_ends(pool, alice.owner_id, "written while the feed could not read")
    frames = list(sse.owner_stream(_DownFor(pool, 5), alice.owner_id, start, heartbeat_s=0.01, poll_s=0.01,
                                   linger_s=0.2, deadline=time.monotonic() + 20))
    assert any("event: heartbeat" in f for f in frames[:5])  # the connection was kept alive meanwhile
    announced = [json.loads(f.split("data: ", 1)[1]) for f in frames if "event: run_" in f]
    assert announced == [{"run_id": run_id, "thread_id": announced[0]["thread_id"], "task":
                          "written while the feed could not read", "trigger": "schedule"},
                         {"run_id": run_id, "status": "cancelled"}]
