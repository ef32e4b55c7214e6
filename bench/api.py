"""The API on the local server (uvicorn): start latency, the token check, SSE replay, fan-out to 50 live
SSE clients, and the API handler's import time.

POST /supervisor is measured with a recording starter (the run itself is not executed, so the
figure is the API's own work: auth check, validation, run row, supervisor_started event).

Run: .venv/bin/python -m bench.api
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time

from bench._common import bench_database, fmt, measure
from bench.worker import import_time_ms


def main() -> None:
    import httpx
    from httpx_sse import connect_sse

    from zerg import config
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

    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        os.environ.update(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_HEARTBEAT_S="30")
        config.get_settings.cache_clear()
        rt = get_runtime()
        rt.starter = RecordingStarter()  # the bench measures the API, not the run
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench")
        server = make_server("127.0.0.1", 0).start()
        base = server.url
        client = httpx.Client(base_url=base, timeout=30)
        token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
        client.headers["Authorization"] = f"Bearer {token}"

        print("== local API server ==")
        print(fmt("POST /api/jarvis/supervisor (run not executed)",
                  measure(lambda: client.post("/api/jarvis/supervisor", json={"task": "check disk"}), 200)))
        print(fmt("GET /api/jarvis/sessions", measure(lambda: client.get("/api/jarvis/sessions"), 200)))

        # What authenticating one request costs: the signature alone, and with the session row
        # (revocation) that every request now reads.
        import jwt

        from zerg.auth import jwt_secret, verify_token

        key = jwt_secret(rt.settings)
        print(fmt("token check: JWT signature only", measure(lambda: jwt.decode(token, key, algorithms=["HS256"]), 1000)))
        print(fmt("token check: JWT + session row", measure(lambda: verify_token(rt.settings, token, rt.pool), 1000)))

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

        print(fmt("SSE replay of a finished run (10 events)", measure(replay, 100)))

        # 50 live clients on one run while a producer writes 200 events.
        with rt.pool.connection() as conn:
            live = runs.start_run(conn, owner.owner_id, "live")
        n_clients, n_events = 50, 200
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
        print(f"{'50 live SSE clients, 200 events each':<44} {total:,} events delivered in {elapsed:.2f} s "
              f"= {total / elapsed:,.0f} events/s (every client got {statistics.mean(received):.0f})")
        server.stop()
    print(f"import functions.events.handler (fresh interpreter, median of 5): {import_time_ms('functions.events.handler'):.1f} ms")


if __name__ == "__main__":
    main()
