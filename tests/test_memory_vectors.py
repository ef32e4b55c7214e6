"""The vector side of memory search on real PostgreSQL with pgvector: owner and tag filters
before the top-k on both paths, models never compared, and re-embedding that follows the content
hash in the background."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from psycopg import sql

from tests.support.memory_rows import add_file, add_files_with_vectors, edit_file
from tests.support.waiting import wait_for
from zerg.embeddings import EmbeddingError
from zerg.memory import indexer, vectors

MINILM = "all-MiniLM-L6-v2"


def _unit(rows):
    rows = np.asarray(rows, dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def _query_and_crowd(seed: int, own: int, crowd: int):
    """A query, ``own`` vectors loosely around it and ``crowd`` vectors much nearer to it."""
    rng = np.random.default_rng(seed)
    query = _unit(rng.normal(size=384))
    mine = _unit(rng.uniform(0.2, 1.0, size=(own, 1)) * query + rng.normal(size=(own, 384)) / 10)
    nearer = _unit(query + rng.normal(size=(crowd, 384)) / 200)
    return query, mine, nearer


def _pgvector(pool) -> str:
    with pool.connection() as conn:
        return conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()["extversion"]


def _need_iterative_scans(pool) -> None:
    version = _pgvector(pool)
    if not vectors.iterative_scans(version):
        pytest.skip(f"pgvector {version} has no iterative index scans (>= 0.8 needed; the exact path covers it)")


@pytest.fixture(scope="module")
def crowded(pool):
    """An owner with enough MiniLM vectors to take the index path (half tagged ops), and another
    owner's 1,000 vectors all nearer to the query (tagged ops too)."""
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    _need_iterative_scans(pool)
    own = vectors.EXACT_SCAN_BELOW + 200
    query, mine, nearer = _query_and_crowd(1, own, 1000)
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("crowded owner")).owner_id
        other = create_owner(conn, unique_name("crowd")).owner_id
        ops = add_files_with_vectors(conn, owner, "ops", mine[: own // 2], model=MINILM, tags=["ops"])
        rest = add_files_with_vectors(conn, owner, "misc", mine[own // 2:], model=MINILM)
        theirs = add_files_with_vectors(conn, other, "ops", nearer, model=MINILM, tags=["ops"])
        conn.execute("ANALYZE memory_embeddings")
    return {"owner": owner, "other": other, "query": query.tolist(), "ops": set(ops),
            "mine": set(ops) | set(rest), "theirs": set(theirs)}


def test_index_path_gives_the_owner_limit_results_of_their_own_past_1000_nearer_memories_of_another(pool, crowded):
    query = crowded["query"]
    with pool.connection() as conn:
        assert vectors.plan(conn, crowded["owner"], MINILM) == "index"
        indexed = vectors.index_scan(conn, crowded["owner"], MINILM, query, limit=10)
        exact = vectors.exact_scan(conn, crowded["owner"], MINILM, query, limit=10)
        auto = vectors.nearest(conn, crowded["owner"], MINILM, query, limit=10)
        crowd_view = vectors.nearest(conn, crowded["other"], MINILM, query, limit=10)
    assert len(indexed) == 10 and {f for f, _ in indexed} <= crowded["mine"]
    assert [d for _, d in indexed] == sorted(d for _, d in indexed)
    assert len({f for f, _ in indexed} & {f for f, _ in exact}) >= 8  # recall@10 of the index path
    assert len(auto) == 10 and {f for f, _ in auto} <= crowded["mine"]
    assert {f for f, _ in crowd_view} <= crowded["theirs"]  # and the other way round


def test_index_path_applies_the_tag_filter_before_the_top_k(pool, crowded):
    with pool.connection() as conn:
        hits = vectors.index_scan(conn, crowded["owner"], MINILM, crowded["query"], limit=10, tags=["ops"])
        auto = vectors.nearest(conn, crowded["owner"], MINILM, crowded["query"], limit=10, tags=["ops"])
        none = vectors.nearest(conn, crowded["owner"], MINILM, crowded["query"], limit=10, tags=["ops", "nothing"])
    assert len(hits) == 10 and {f for f, _ in hits} <= crowded["ops"]
    assert len(auto) == 10 and {f for f, _ in auto} <= crowded["ops"]
    assert none == []


def _plan_json(conn, query: sql.Composed, params: list) -> str:
    return json.dumps(conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + query, params).fetchone())


def test_explain_shows_the_index_path_on_the_hnsw_index_and_the_exact_path_off_it(pool, crowded):
    literal = "[" + ",".join(f"{x:.7g}" for x in crowded["query"]) + "]"
    with pool.connection() as conn:
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        index_plan = _plan_json(conn, vectors.index_scan_sql(MINILM, crowded["query"], crowded["owner"], limit=10), [])
        exact_plan = _plan_json(conn, vectors.exact_scan_sql(tags=False), [literal, crowded["owner"], MINILM, 384, 10])
    assert '"Index Name": "memory_embeddings_hnsw_minilm"' in index_plan
    assert "hnsw" not in exact_plan


def test_every_indexed_model_has_its_hnsw_index_for_the_index_path(pool, owner):
    """Each model of INDEXED (Titan Text Embeddings V2 too, issue 28) has a partial index its index-path
    query can use: with sequential scans and sorts off (the table is near empty here), the plan names it."""
    names = {"all-MiniLM-L6-v2": "memory_embeddings_hnsw_minilm", "text-embedding-3-small": "memory_embeddings_hnsw_te3s",
             "amazon.titan-embed-text-v2:0": "memory_embeddings_hnsw_titan2"}
    assert set(names) == set(vectors.INDEXED)
    with pool.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")  # on a near-empty table: only the HNSW index gives the order
        for model, dims in vectors.INDEXED.items():
            plan = _plan_json(conn, vectors.index_scan_sql(model, [1.0] + [0.0] * (dims - 1), owner, limit=5), [])
            assert f'"Index Name": "{names[model]}"' in plan, model


def test_exact_path_gives_a_small_owner_limit_results_of_their_own_past_1000_nearer_memories(pool, owner, other_owner):
    query, mine, nearer = _query_and_crowd(2, 30, 1000)
    with pool.connection() as conn:
        tagged = add_files_with_vectors(conn, owner, "t", mine[:10], model=MINILM, tags=["ops"])
        mine_ids = set(tagged) | set(add_files_with_vectors(conn, owner, "u", mine[10:], model=MINILM))
        add_files_with_vectors(conn, other_owner, "n", nearer, model=MINILM, tags=["ops"])
        assert vectors.plan(conn, owner, MINILM) == "exact"
        hits = vectors.nearest(conn, owner, MINILM, query.tolist(), limit=5)
        ops = vectors.nearest(conn, owner, MINILM, query.tolist(), limit=5, tags=["ops"])
        everything = vectors.nearest(conn, owner, MINILM, query.tolist(), limit=100)
    distances = (1 - mine @ query)
    assert [f for f, _ in hits] == [sorted(mine_ids)[i] for i in np.argsort(distances)[:5]]
    assert len(ops) == 5 and {f for f, _ in ops} <= set(tagged)
    assert {f for f, _ in everything} == mine_ids  # another owner's never come back, however near


def test_vectors_of_different_models_are_never_compared(pool, owner):
    with pool.connection() as conn:
        a = add_files_with_vectors(conn, owner, "a", [[1.0, 0.0, 0.0]], model="model-a")
        b = add_files_with_vectors(conn, owner, "b", [[1.0, 0.0, 0.0]], model="model-b")
        c = add_files_with_vectors(conn, owner, "c", [[1.0, 0.0, 0.0, 0.0]], model="model-a")  # another size
        assert vectors.nearest(conn, owner, "model-a", [1.0, 0.0, 0.0], limit=10) == [(a[0], 0.0)]
        assert vectors.nearest(conn, owner, "model-b", [0.0, 1.0, 0.0], limit=10) == [(b[0], 1.0)]
        assert vectors.nearest(conn, owner, "model-a", [0.0, 0.0, 0.0, 1.0], limit=10) == [(c[0], 1.0)]
        with pytest.raises(vectors.VectorSizeError, match="384-dimensional vectors, not 3"):
            vectors.nearest(conn, owner, MINILM, [1.0, 0.0, 0.0], limit=10)
        with pytest.raises(vectors.VectorSizeError):
            vectors.store(conn, owner, a[0], "text-embedding-3-small", [vectors.Chunk(0, 5, [0.1] * 384)], "h")


def test_store_refuses_another_owners_file_and_replaces_all_of_its_own_chunks(pool, owner, other_owner):
    def chunks(*vecs):
        return [vectors.Chunk(n * 10, n * 10 + 15, v) for n, v in enumerate(vecs)]

    with pool.connection() as conn:
        fid = add_file(conn, owner, "notes/a.md", "alpha")
        assert not vectors.store(conn, other_owner, fid, "model-a", chunks([1.0, 0.0]), "h1")
        assert vectors.store(conn, owner, fid, "model-a", chunks([1.0, 0.0], [0.6, 0.8], [0.8, 0.6]), "h1")
        # A file is as near as its nearest chunk, and comes back once.
        assert vectors.nearest(conn, owner, "model-a", [0.6, 0.8], limit=5) == [(fid, 0.0)]
        assert vectors.store(conn, owner, fid, "model-a", chunks([0.0, 1.0]), "h2")  # fewer chunks: the rest go
        stored = conn.execute("SELECT chunk, chunk_start, chunk_end, content_hash FROM memory_embeddings "
                              "WHERE file_id = %s ORDER BY chunk", (fid,)).fetchall()
        assert [(r["chunk"], r["chunk_start"], r["chunk_end"], r["content_hash"]) for r in stored] == [(0, 0, 15, "h2")]
        assert vectors.nearest(conn, owner, "model-a", [0.0, 1.0], limit=5) == [(fid, 0.0)]
        assert vectors.nearest(conn, other_owner, "model-a", [0.0, 1.0], limit=5) == []


def test_two_passes_storing_the_same_file_at_once_both_succeed_and_leave_one_set_of_chunks(database_url, pool, owner):
    """The CLI's post-run pass and the background indexer can embed the same new file at the same
    time: the second store waits for the first and replaces its chunks, it does not fail on the
    unique (file, model, chunk) key. Connections of their own: the suite's shared pool may be busy."""
    import threading

    import psycopg
    from psycopg.rows import dict_row

    def connect():
        return psycopg.connect(database_url, row_factory=dict_row)

    with pool.connection() as conn:
        fid = add_file(conn, owner, "notes/raced.md", "raced")
    outcome = {}
    with connect() as first, connect() as watcher:
        watcher.autocommit = True
        with first.transaction():
            assert vectors.store(first, owner, fid, "model-a", [vectors.Chunk(0, 5, [1.0, 0.0])], "h1")
            second_pid = []

            def second():
                try:
                    with connect() as conn:
                        second_pid.append(conn.info.backend_pid)
                        outcome["stored"] = vectors.store(conn, owner, fid, "model-a",
                                                          [vectors.Chunk(0, 5, [0.0, 1.0])], "h1")
                        conn.commit()
                except Exception as exc:  # the failure this test is about
                    outcome["error"] = exc

            thread = threading.Thread(target=second)
            thread.start()
            # the second store is blocked behind the first's transaction (its backend waits on a lock)
            wait_for(lambda: second_pid and watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                (second_pid[0],)).fetchone()["wait_event_type"] == "Lock" or ("error" in outcome),
                "the second store to wait on a lock", limit_s=60)
        thread.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["stored"] is True
    with pool.connection() as conn:
        rows = conn.execute("SELECT chunk, embedding::text AS v FROM memory_embeddings WHERE file_id = %s",
                            (fid,)).fetchall()
    assert [(r["chunk"], r["v"]) for r in rows] == [(0, "[0,1]")]


def test_pgvector_before_0_8_takes_the_exact_path():
    assert not vectors.iterative_scans("0.6.2") and not vectors.iterative_scans("0.7.4")
    assert vectors.iterative_scans("0.8.0") and vectors.iterative_scans("0.8.6") and vectors.iterative_scans("1.0")
    assert not vectors.iterative_scans(None)


# --- background (re-)embedding -------------------------------------------------------------------

class CountingEmbedder:
    """A tiny deterministic embedder that counts what it was asked to embed."""

    model, dimension, max_chars = "counting-4d", 4, 1000

    def __init__(self, fail: bool = False) -> None:
        self.texts: list[str] = []
        self.fail = fail

    def embed(self, texts, *, timeout):
        if self.fail:
            raise EmbeddingError("counting-4d: down")
        self.texts.extend(texts)
        return [[1.0, float(len(t)), 0.0, 1.0] for t in texts]


def _stored(pool, owner_id: int, model: str) -> dict[int, str]:
    with pool.connection() as conn:
        return {r["file_id"]: r["content_hash"] for r in conn.execute(
            "SELECT file_id, content_hash FROM memory_embeddings WHERE owner_id = %s AND model = %s",
            (owner_id, model)).fetchall()}


def test_an_edit_makes_the_file_stale_and_it_is_re_embedded_with_the_new_hash_only(runtime_env, pool, owner, other_owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    counting = rt.__dict__["embedder"] = CountingEmbedder()
    with pool.connection() as conn:
        first = add_file(conn, owner, "notes/backup.md", "the backup server is cube", title="Backup")
        second = add_file(conn, owner, "notes/pizza.md", "dough, tomato, basil")
        add_file(conn, other_owner, "notes/theirs.md", "not mine")
    assert indexer.embed_pending(rt, owner_id=owner) == 2
    assert sorted(counting.texts) == ["Backup\n\nthe backup server is cube", "dough, tomato, basil"]
    with pool.connection() as conn:
        hashes = {r["id"]: r["content_hash"] for r in conn.execute(
            "SELECT id, content_hash FROM memory_files WHERE owner_id = %s", (owner,)).fetchall()}
    assert _stored(pool, owner, counting.model) == hashes
    assert _stored(pool, other_owner, counting.model) == {}  # another owner's pass, not this one

    counting.texts.clear()
    assert indexer.embed_pending(rt, owner_id=owner) == 0 and counting.texts == []  # unchanged: not again

    with pool.connection() as conn:
        new_hash = edit_file(conn, owner, first, "the backup server is now called cubby")
        assert [f["file_id"] for f in vectors.stale(conn, counting.model, owner_id=owner, limit=10)] == [first]
    assert indexer.embed_pending(rt, owner_id=owner) == 1
    assert counting.texts == ["Backup\n\nthe backup server is now called cubby"]
    assert _stored(pool, owner, counting.model) == {first: new_hash, second: hashes[second]}


def test_a_failing_embedder_stops_the_pass_quietly_and_leaves_the_files_stale(runtime_env, pool, owner, caplog):
    caplog.set_level(logging.WARNING)
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    rt.__dict__["embedder"] = CountingEmbedder(fail=True)
    with pool.connection() as conn:
        fid = add_file(conn, owner, "notes/a.md", "alpha")
    assert indexer.embed_pending(rt, owner_id=owner) == 0
    with pool.connection() as conn:
        assert [f["file_id"] for f in vectors.stale(conn, "counting-4d", owner_id=owner, limit=10)] == [fid]
    assert [r for r in caplog.records if r.getMessage().startswith("memory indexer: pass stopped")]

    rt.__dict__["embedder"] = CountingEmbedder()  # the embedder is back: the next pass catches up
    assert indexer.embed_pending(rt, owner_id=owner) == 1


def test_without_an_embedder_nothing_is_embedded_and_kick_is_a_no_op(runtime_env, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    with pool.connection() as conn:
        add_file(conn, owner, "notes/a.md", "alpha")
    assert rt.embedder is None and indexer.embed_pending(rt, owner_id=owner) == 0
    indexer.kick(rt, owner)  # returns at once, starts nothing


def test_kick_embeds_new_and_edited_files_in_the_background_with_the_local_model(runtime_env, pool, owner):
    from zerg.embeddings.local import MODEL

    rt = runtime_env(ZERG_EMBEDDINGS="local")
    assert rt.embedder.model == MODEL
    with pool.connection() as conn:
        backup = add_file(conn, owner, "notes/backup.md", "The backup server is called cube.")
        cooking = add_file(conn, owner, "notes/lasagne.md", "Layer pasta, ragu and bechamel, bake for 45 minutes.")
    indexer.kick(rt, owner)
    wait_for(lambda: len(_stored(pool, owner, MODEL)) == 2, "both files embedded in the background")
    query = rt.embedder.embed(["which machine keeps the backups?"], timeout=30)[0]
    with pool.connection() as conn:
        assert [f for f, _ in vectors.nearest(conn, owner, MODEL, query, limit=2)] == [backup, cooking]
        new_hash = edit_file(conn, owner, cooking, "Knead the dough, proof it overnight, bake at 250 C.")
    indexer.kick(rt, owner)
    wait_for(lambda: _stored(pool, owner, MODEL).get(cooking) == new_hash, "the edited file re-embedded")


def test_housekeeping_runs_an_embedding_pass_only_when_an_embedder_exists(runtime_env):
    from zerg.local.housekeeping import default_tasks

    with_model = {t.name: t for t in default_tasks(runtime_env(ZERG_EMBEDDINGS="local"))}
    assert with_model["embed"].interval_s == indexer.SWEEP_EVERY_S
    assert "embed" not in {t.name for t in default_tasks(runtime_env(ZERG_EMBEDDINGS="off"))}


def test_the_sweep_works_off_a_backlog_bigger_than_one_pass(runtime_env, pool, owner, monkeypatch):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    counting = rt.__dict__["embedder"] = CountingEmbedder()
    monkeypatch.setattr(indexer, "PASS_LIMIT", 3)
    with pool.connection() as conn:
        for i in range(7):
            add_file(conn, owner, f"notes/{i}.md", f"note number {i}")
    answers = iter([False] + [True] * 10)  # asked before each batch and after each pass
    assert indexer.run_sweep(rt, should_stop=lambda: next(answers)) == {"embedded": 3}  # told to stop after a pass
    assert indexer.run_sweep(rt, should_stop=lambda: True) == {"embedded": 0}  # told at once: no batch starts
    assert indexer.run_sweep(rt)["embedded"] >= 4  # the rest (other tests' files may be stale too)
    assert len(_stored(pool, owner, counting.model)) == 7


def test_on_aws_the_embed_housekeeping_event_embeds_what_is_stale_and_starts_nothing_near_the_timeout(
        runtime_env, llm, pool, owner):
    from types import SimpleNamespace

    from functions.events.handler import handler

    rt = runtime_env(ZERG_EMBEDDINGS="openai")
    with pool.connection() as conn:
        files = {add_file(conn, owner, f"notes/api-{i}.md", f"written through the API {i}") for i in range(3)}
    event = {"trigger": "housekeeping", "task": "embed"}
    out = handler(event, SimpleNamespace(get_remaining_time_in_millis=lambda: 4_000))
    assert out["result"] == {"embedded": 0} and llm.embedding_requests == []  # within the margin: nothing starts
    out = handler(event, SimpleNamespace(get_remaining_time_in_millis=lambda: 25_000))
    assert out["task"] == "embed" and out["result"]["embedded"] >= 3
    assert files <= set(_stored(pool, owner, rt.embedder.model))
