"""What verifying pooled connections costs: a checkout from psycopg's plain pool against the
project's ``VerifiedPool`` (one empty query per checkout), and how many checkouts an API request
makes, so the per-request cost is their product.

Run: .venv/bin/python -m bench.db
"""

from __future__ import annotations

import json
import os
import tempfile

from bench._common import bench_database, fmt, measure, script


def main(smoke: bool = False) -> None:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from zerg import config, db
    from zerg.local.server import to_apigw_event
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    repeat = 50 if smoke else 3000
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        pools = {
            "plain": ConnectionPool(url, min_size=2, max_size=2, kwargs={"row_factory": dict_row},
                                                    open=False),
            "verified": db.open_pool(url, max_size=2),
        }
        pools["plain"].open(wait=True)
        print("== connection checkout: psycopg's plain pool vs VerifiedPool (an empty query each) ==")
        results = {}
        for name, pool in pools.items():
            def checkout(pool=pool) -> None:
                with pool.connection():
                    pass

            def query(pool=pool) -> None:
                with pool.connection() as conn:
                    conn.execute("SELECT 1").fetchone()

            measure(query, repeat // 10 or 1)  # warm
            results[name] = measure(checkout, repeat)
            print(fmt(f"checkout, {name}", results[name]))
            print(fmt(f"checkout + SELECT 1, {name}", measure(query, repeat)))
        plain, verified = results.values()
        extra_ms = verified["p50_ms"] - plain["p50_ms"]
        print(f"{'check cost per checkout (p50 difference)':<44} {extra_ms * 1000:8.1f} µs")
        for pool in pools.values():
            pool.close()

        os.environ.update(DATABASE_URL=url, ZERG_DATA_DIR=tmp)
        config.get_settings.cache_clear()
        from functions.events.handler import handler

        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench")
        token = handler(to_apigw_event("POST", "/api/jarvis/auth", {"content-type": "application/json"},
                                       f'{{"device_secret": "{owner.device_secret}"}}'.encode()), None)
        bearer = {"authorization": "Bearer " + json.loads(token["body"])["token"]}
        print("== checkouts per API request (Lambda path, in-process) ==")
        for method, path in (("GET", "/api/jarvis/thread"), ("GET", "/api/jarvis/sessions"),
                             ("GET", "/api/jarvis/workers")):
            rt.pool.pop_stats()
            handler(to_apigw_event(method, path, bearer, b""), None)
            n = rt.pool.pop_stats().get("requests_num", 0)
            print(f"{method + ' ' + path:<44} {n:3d} checkouts  ≈ {n * extra_ms * 1000:6.1f} µs of checks")


if __name__ == "__main__":
    script(main)
