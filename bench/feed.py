"""The dashboard's reads over a year of history: the usage report (``GET /api/jarvis/usage``) over
100,000 ledger rows of one owner (beside another owner's 100,000), the runs list's first and a
deep page over 10,000 runs, and one poll of the owner-wide feed (``GET /api/jarvis/events``:
every open client asks this every 0.2 s) with nothing new over 100,000 events.

Run: .venv/bin/python -m bench.feed
"""

from __future__ import annotations

import os
import random
import tempfile
from datetime import date, datetime, timedelta, timezone

from bench._common import bench_database, fmt, measure, script

COMPONENTS = ("supervisor", "worker", "summary", "memory", "intent", "quick")
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-5-mini", "o4-mini", "local-model")


def _load_ledger(conn, owner_id: int, n: int, first: datetime, days: int, seed: int) -> None:
    """``n`` calls spread over ``days`` days from ``first`` (1 in 20 without a price), by COPY."""
    rng = random.Random(seed)
    with conn.cursor() as cur, cur.copy("COPY llm_calls (owner_id, component, model, tokens_in, tokens_out, "
                                        "cost_usd, latency_ms, created_at) FROM STDIN") as copy:
        for _ in range(n):
            at = first + timedelta(seconds=rng.randrange(days * 86400))
            cost = None if rng.random() < 0.05 else round(rng.random() / 100, 8)
            copy.write_row((owner_id, rng.choice(COMPONENTS), rng.choice(MODELS), rng.randrange(50, 5000),
                            rng.randrange(5, 800), cost, rng.randrange(100, 3000), at))


def _load_runs(conn, owner_id: int, thread_id: int, n_runs: int, events_per_run: int) -> None:
    """``n_runs`` finished runs of the owner with ``events_per_run`` events each, by COPY."""
    with conn.cursor() as cur, cur.copy("COPY runs (owner_id, thread_id, task, status, started_at, finished_at, "
                                        "duration_ms) FROM STDIN") as copy:
        now = datetime.now(timezone.utc)
        for i in range(n_runs):
            copy.write_row((owner_id, thread_id, f"bench task {i}", "success", now, now, 1000))
    run_ids = [r["id"] for r in conn.execute("SELECT id FROM runs WHERE owner_id = %s ORDER BY id", (owner_id,))]
    kinds = ["supervisor_started"] + ["supervisor_thinking"] * (events_per_run - 2) + ["supervisor_complete"]
    with conn.cursor() as cur, cur.copy("COPY run_events (run_id, owner_id, event_type, payload) FROM STDIN") as copy:
        for run_id in run_ids:
            for kind in kinds:
                copy.write_row((run_id, owner_id, kind, f'{{"run_id": {run_id}}}'))


def main(smoke: bool = False) -> None:
    from zerg import config
    from zerg.llm.ledger import usage_report
    from zerg.owners import create_owner
    from zerg.runs import events
    from zerg.runs import store as runs
    from zerg.runs.threads import find_or_create_thread
    from zerg.wiring import get_runtime

    calls, n_runs, per_run, repeat = (2_000, 200, 10, 5) if smoke else (100_000, 10_000, 10, 50)
    today = datetime.now(timezone.utc).date()
    year_ago = datetime.combine(today - timedelta(days=365), datetime.min.time(), timezone.utc)
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        os.environ.update(DATABASE_URL=url, ZERG_DATA_DIR=tmp)
        config.get_settings.cache_clear()
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner_id = create_owner(conn, "bench-feed").owner_id
            other = create_owner(conn, "bench-feed-other").owner_id
            _load_ledger(conn, owner_id, calls, year_ago, 366, seed=1)
            _load_ledger(conn, other, calls, year_ago, 366, seed=2)
            _load_runs(conn, owner_id, find_or_create_thread(conn, owner_id), n_runs, per_run)
            conn.execute("ANALYZE llm_calls")
            conn.execute("ANALYZE runs")
            conn.execute("ANALYZE run_events")
            latest = events.latest_event_id(conn, owner_id)
        print(f"setup: {calls:,} ledger rows over 366 days (and another owner's {calls:,}); "
              f"{n_runs:,} runs with {n_runs * per_run:,} events")

        def report(first: date, group_by: str) -> None:
            with rt.pool.connection() as conn:
                usage_report(conn, owner_id, first, today, group_by)

        measure(lambda: report(today, "day"), 3)  # warm the pool
        print("== usage report (GET /api/jarvis/usage) ==")
        for days in (30, 366):
            first = today - timedelta(days=days - 1)
            for group_by in ("day", "model", "component"):
                print(fmt(f"{days} days, group_by={group_by}", measure(lambda f=first, g=group_by: report(f, g), repeat)))

        def listed(before_id: int | None) -> None:
            with rt.pool.connection() as conn:
                runs.list_runs(conn, owner_id, limit=20, before_id=before_id)

        with rt.pool.connection() as conn:
            middle = runs.list_runs(conn, owner_id, limit=1, before_id=None)[0]["id"] - n_runs // 2
        print("== runs list (GET /api/jarvis/runs) ==")
        print(fmt("first page of 20", measure(lambda: listed(None), repeat)))
        print(fmt(f"a page {n_runs // 2:,} runs deep", measure(lambda: listed(middle), repeat)))

        def poll(after: int) -> None:
            with rt.pool.connection() as conn:
                events.owner_feed(conn, owner_id, after_id=after)

        print("== owner-wide feed (GET /api/jarvis/events) ==")
        print(fmt("one poll, nothing new", measure(lambda: poll(latest), repeat)))
        print(fmt("one poll, the last 100 runs' events", measure(lambda: poll(latest - 100 * per_run), repeat)))


if __name__ == "__main__":
    script(main)
