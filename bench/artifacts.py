"""Artifact store (local backend) per-operation latency, tail scaling, and index rebuild time.

Run: .venv/bin/python -m bench.artifacts   (smoke: main(smoke=True), tiny counts, same code paths)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench._common import bench_database, environ, fmt, measure, script
from zerg.artifacts.local import LocalArtifactStore


def main(smoke: bool = False) -> None:
    many, some = (3, 3) if smoke else (500, 300)
    sizes_mb = (1,) if smoke else (1, 10, 100)
    n_workers = 10 if smoke else 1000
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalArtifactStore(Path(tmp) / "a")
        owner = 1
        print("== local artifact store ==")
        print(fmt("create_worker", measure(lambda: store.create_worker("check disk on cube", owner), many)))
        wid = store.create_worker("bench", owner)
        ten_kb = "x" * 10_000
        print(fmt("save_tool_output (10 KB)", measure(lambda: store.save_tool_output(wid, "ssh_exec", ten_kb), some)))
        print(fmt("append_thread (1 message)", measure(lambda: store.append_thread(wid, {"role": "tool", "content": "ok"}), many)))
        rel = store.save_tool_output(wid, "ssh_exec", ten_kb)
        print(fmt("read_file (10 KB)", measure(lambda: store.read_file(wid, rel), many)))
        for size_mb in sizes_mb:
            big = store.save_tool_output(wid, "container_exec", "y" * (size_mb * 1_000_000))
            before = store.bytes_read
            stats = measure(lambda: store.tail(wid, big, 2048), many)
            per_call = (store.bytes_read - before) / stats["n"]
            print(fmt(f"tail 2 KB of a {size_mb} MB file", stats) + f"   bytes read/call {per_call:.0f}")

    with tempfile.TemporaryDirectory() as tmp, environ(), bench_database() as url:
        from zerg.db import open_pool
        from zerg.owners import create_owner
        from zerg.runs import jobs

        store = LocalArtifactStore(Path(tmp) / "a")
        pool = open_pool(url)
        with pool.connection() as conn:
            owner = create_owner(conn, "bench").owner_id
        for n in range(n_workers):
            wid = store.create_worker(f"task {n}", owner, job_id=n + 1)
            store.save_result(wid, "ok")
            store.complete_worker(wid, "success")
        with pool.connection() as conn:
            start = time.perf_counter()
            report = jobs.reindex(conn, store)
            elapsed = time.perf_counter() - start
        pool.close()
        print(f"{f'index rebuild, {n_workers:,} workers':<44} {elapsed * 1000:8.1f} ms total   "
              f"({report.indexed} indexed, {len(report.skipped)} skipped)")


if __name__ == "__main__":
    script(main)
