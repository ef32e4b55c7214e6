"""The API on the local server (uvicorn): start latency, the token check, another owner's runs list
with slow requests in flight (issue 25), SSE replay, fan-out to 50 live SSE clients, and the API
handler's import time.

POST /supervisor is measured with a recording starter (the run itself is not executed, so the
figure is the API's own work: auth check, validation, run row, supervisor_started event).
The slow requests are quick answers whose model call (the scripted model on loopback) is held
until the measurement is over: they are in flight for all of it, and still are at its end.

Run: .venv/bin/python -m bench.api   (smoke: main(smoke=True), fewer samples and clients, same code paths)
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time

from bench._common import bench_database, environ, fmt, measure, script
from bench.worker import import_time_ms

SLOW = 3  # slow requests in flight (issue 25: three quick requests waiting on the model)
TARGET_P99_MS = 50  # another owner's GET with them in flight, on 2 cores
TARGET_EVENTS_S = 5_000  # 50 live SSE clients


class HeldModel:
    """The scripted model's answers wait for :meth:`release` (a slow model call that lasts as long
    as the benchmark needs it to)."""

    def __init__(self, llm) -> None:
        self._release = threading.Event()
        self._arrived = threading.Semaphore(0)
        llm.respond_with(self._respond)

    def _respond(self, request: dict) -> dict:
        self._arrived.release()
        self._release.wait(300)
        return {"content": "a slow answer"}

    def wait_for(self, n: int) -> None:
        for _ in range(n):
            if not self._arrived.acquire(timeout=60):
                raise RuntimeError("the slow requests never reached the model")

    def release(self) -> None:
        self._release.set()


def main(smoke: bool = False) -> None:
    import httpx
    from httpx_sse import connect_sse

    from tests.support.llm_server import ScriptedLLM
    from zerg.local.server import make_server
    from zerg.owners import create_owner
    from zerg.runs import events
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    class RecordingStarter:
        def start(self, run_id, owner_id, thread_id):
            return f"arn:recorded:{run_id}"

        def stop(self, arn, cause):
            pass

        def close(self):
            pass

    repeat = 20 if smoke else 200
    n_clients, n_events = (5, 20) if smoke else (50, 200)
    llm = ScriptedLLM()
    model = HeldModel(llm)
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url, \
            environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_HEARTBEAT_S="30", OPENAI_BASE_URL=llm.base_url,
                    ZERG_EMBEDDINGS="off", ZERG_QUICK_TIMEOUT_S="120"):
        rt = get_runtime()
        rt.starter = RecordingStarter()  # the bench measures the API, not the run
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench")
            slow_owner = create_owner(conn, "bench-slow")
        server = make_server("127.0.0.1", 0).start()
        base = server.url
        client = httpx.Client(base_url=base, timeout=30)
        token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
        client.headers["Authorization"] = f"Bearer {token}"

        print("== local API server ==")
        print(fmt("POST /api/jarvis/supervisor (run not executed)",
                  measure(lambda: client.post("/api/jarvis/supervisor", json={"task": "check disk"}), repeat)))
        print(fmt("GET /api/jarvis/sessions", measure(lambda: client.get("/api/jarvis/sessions"), repeat)))

        concurrent_serve(base, client, slow_owner, model, repeat)

        # What authenticating one request costs: the signature alone, and with the session row
        # (revocation) that every request now reads.
        import jwt

        from zerg.auth import jwt_secret, verify_token

        key = jwt_secret(rt.settings)
        checks = 100 if smoke else 1000
        print(fmt("token check: JWT signature only", measure(lambda: jwt.decode(token, key, algorithms=["HS256"]), checks)))
        print(fmt("token check: JWT + session row", measure(lambda: verify_token(rt.settings, token, rt.pool), checks)))

        def finished_run(n_events: int) -> int:
            with rt.pool.connection() as conn:
                run = runs.start_run(conn, owner.owner_id, "replay")  # event 1: supervisor_started
                for i in range(n_events - 2):
                    events.emit(conn, run.run_id, owner.owner_id, "supervisor_thinking", {"message": f"step {i}"})
                events.emit(conn, run.run_id, owner.owner_id, "supervisor_complete", {"run_id": run.run_id, "result": "ok"})
            return run.run_id

        replay_run = finished_run(10)

        def replay():
            with connect_sse(client, "GET", f"/api/jarvis/supervisor/events?run_id={replay_run}") as source:
                got = sum(1 for e in source.iter_sse() if e.id)
            assert got == 10, got

        print(fmt("SSE replay of a finished run (10 events)", measure(replay, repeat // 2)))

        # Live clients on one run while a producer writes the events.
        with rt.pool.connection() as conn:
            live = runs.start_run(conn, owner.owner_id, "live")
        received = [0] * n_clients
        ready = threading.Barrier(n_clients + 1)

        def reader(i: int) -> None:
            c = httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"})
            with connect_sse(c, "GET", f"/api/jarvis/supervisor/events?run_id={live.run_id}") as source:
                ready.wait()
                for e in source.iter_sse():
                    if e.id:
                        received[i] += 1
                    if e.event == "supervisor_complete":
                        return

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(n_clients)]
        for t in threads:
            t.start()
        ready.wait()
        start = time.perf_counter()
        with rt.pool.connection() as conn:
            for i in range(n_events - 2):
                events.emit(conn, live.run_id, owner.owner_id, "supervisor_thinking", {"message": f"e{i}"})
                conn.commit()
                time.sleep(0.005)
            events.emit(conn, live.run_id, owner.owner_id, "supervisor_complete", {"run_id": live.run_id, "result": "ok"})
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        total = sum(received)
        lost = n_clients * n_events - total
        rate = total / elapsed
        verdict = "" if smoke else f"; target {TARGET_EVENTS_S:,}: {'met' if rate >= TARGET_EVENTS_S else 'MISSED'}"
        print(f"{f'{n_clients} live SSE clients, {n_events} events each':<44} {total:,} events delivered in "
              f"{elapsed:.2f} s = {rate:,.0f} events/s ({'none lost' if not lost else f'{lost:,} LOST'}; "
              f"every client got {statistics.mean(received):.0f}{verdict})")
        server.stop()
    llm.close()
    print(f"import functions.events.handler (fresh interpreter, median of 5): {import_time_ms('functions.events.handler'):.1f} ms")


def concurrent_serve(base: str, client, slow_owner, model: HeldModel, repeat: int) -> None:
    """Another owner's ``GET /api/jarvis/runs``, with no slow request in flight and with ``SLOW``."""
    import httpx

    def runs_list() -> None:
        resp = client.get("/api/jarvis/runs")
        assert resp.status_code == 200, resp.text

    def slow_quick(results: list) -> None:
        with httpx.Client(base_url=base, timeout=300) as c:
            token = c.post("/api/jarvis/auth", json={"device_secret": slow_owner.device_secret}).json()["token"]
            resp = c.post("/api/jarvis/quick", json={"utterance": "how cold does it get on mars at night"},
                          headers={"Authorization": f"Bearer {token}"})
            results.append(resp.status_code)

    print("== concurrent serve: GET /api/jarvis/runs of another owner ==")
    for _ in range(5):
        runs_list()
    print(fmt("no slow request in flight", measure(runs_list, repeat)))
    finished: list[int] = []
    threads = [threading.Thread(target=slow_quick, args=(finished,)) for _ in range(SLOW)]
    for t in threads:
        t.start()
    model.wait_for(SLOW)  # every one of them is waiting on the model
    stats = measure(runs_list, repeat)
    in_flight = SLOW - len(finished)
    model.release()
    for t in threads:
        t.join()
    assert finished == [200] * SLOW, finished
    verdict = "met" if stats["p99_ms"] <= TARGET_P99_MS else "MISSED"
    print(fmt(f"{SLOW} slow quick requests in flight", stats)
          + f"   ({in_flight} of {SLOW} still in flight at the end; target p99 <= {TARGET_P99_MS} ms: {verdict})")


if __name__ == "__main__":
    script(main)
