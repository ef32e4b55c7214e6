"""A file the embedding model refuses never blocks the others: the OpenAI embedder cuts input to a
size the model always reads, a refused batch is retried file by file, a file refused alone is
recorded and skipped after three tries until it is edited, and a transient failure records nothing.
Driven through the real OpenAI client against the scripted server."""

from __future__ import annotations

from tests.support.memory_rows import add_file, edit_file
from zerg.embeddings.openai import MAX_BYTES
from zerg.memory import embed_failures, indexer, vectors
from zerg.wiring import make_embedder

MODEL = "text-embedding-3-small"
MARKER = "REFUSE-ME"


def _refuse_marked(request):
    """The model's answer to an input it cannot read: HTTP 400 for the whole request."""
    if any(MARKER in text for text in request["input"]):
        return {"status": 400, "message": "This model's maximum context length is 8192 tokens"}
    return None


def _embedded(pool, owner_id: int) -> set[int]:
    with pool.connection() as conn:
        return {r["file_id"] for r in conn.execute(
            "SELECT file_id FROM memory_embeddings WHERE owner_id = %s AND model = %s", (owner_id, MODEL)).fetchall()}


def _eight_files_one_refused(pool, owner_id: int) -> tuple[int, list[int]]:
    with pool.connection() as conn:
        good = [add_file(conn, owner_id, f"notes/{i}.md", f"note number {i}") for i in range(7)]
        bad = add_file(conn, owner_id, "notes/huge.md", f"{MARKER} a file the model cannot read")
    return bad, good


def test_the_openai_embedder_sends_at_most_8000_utf8_bytes_of_any_script(llm):
    embedder = make_embedder(_settings(llm))
    texts = ["漢" * 20_000, "🙂" * 20_000, "a" * 20_000, "short"]
    embedder.embed(texts, timeout=5)
    sent = llm.embedding_requests[0]["input"]
    assert all(len(t.encode()) <= MAX_BYTES for t in sent)
    assert sent[0] == "漢" * (MAX_BYTES // 3) and sent[1] == "🙂" * (MAX_BYTES // 4)  # whole characters
    assert sent[2] == "a" * 8_000 and sent[3] == "short"  # ASCII is cut where it always was


def test_one_refused_file_among_8_does_not_keep_the_other_7_from_their_vectors(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="openai")
    llm.respond_embeddings_with(_refuse_marked)
    bad, good = _eight_files_one_refused(pool, owner)
    assert indexer.embed_pending(rt, owner_id=owner) == 7
    assert _embedded(pool, owner) == set(good)
    assert len(llm.embedding_requests[0]["input"]) == 8  # the batch, then each file alone
    assert [len(r["input"]) for r in llm.embedding_requests[1:]] == [1] * 8
    with pool.connection() as conn:
        assert embed_failures.attempts(conn, owner, bad, MODEL) == 1
        (row,) = list(embed_failures.export_memory_embedding_failures(conn, owner))
    assert row["file_id"] == bad and "HTTP 400" in row["last_error"] and len(row["last_error"]) <= 1000


def test_a_file_refused_three_times_is_skipped_until_an_edit_makes_it_eligible_again(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="openai")
    llm.respond_embeddings_with(_refuse_marked)
    bad, _ = _eight_files_one_refused(pool, owner)
    for attempt in (1, 2, 3):  # one try per pass, never three in one
        indexer.embed_pending(rt, owner_id=owner)
        with pool.connection() as conn:
            assert embed_failures.attempts(conn, owner, bad, MODEL) == attempt
    sent = len(llm.embedding_requests)
    assert indexer.embed_pending(rt, owner_id=owner) == 0 and len(llm.embedding_requests) == sent  # skipped
    with pool.connection() as conn:
        assert vectors.stale(conn, MODEL, owner_id=owner, limit=10) == []

        edit_file(conn, owner, bad, f"{MARKER} still unreadable, but other content")
        assert [f["file_id"] for f in vectors.stale(conn, MODEL, owner_id=owner, limit=10)] == [bad]
    indexer.embed_pending(rt, owner_id=owner)
    with pool.connection() as conn:
        assert embed_failures.attempts(conn, owner, bad, MODEL) == 1  # new content: counted afresh
        edit_file(conn, owner, bad, "now a file the model reads")
    assert indexer.embed_pending(rt, owner_id=owner) == 1 and bad in _embedded(pool, owner)
    with pool.connection() as conn:
        assert embed_failures.attempts(conn, owner, bad, MODEL) == 0  # a vector clears the record


def test_a_transient_failure_stops_the_pass_and_records_nothing(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_EMBEDDINGS="openai")
    with pool.connection() as conn:
        files = [add_file(conn, owner, f"notes/{i}.md", f"note {i}") for i in range(3)]
    llm.script_embeddings({"status": 503, "message": "overloaded"})
    assert indexer.embed_pending(rt, owner_id=owner) == 0
    assert len(llm.embedding_requests) == 1  # no file-by-file retry of a transient failure
    with pool.connection() as conn:
        assert list(embed_failures.export_memory_embedding_failures(conn, owner)) == []
    assert indexer.embed_pending(rt, owner_id=owner) == 3 and _embedded(pool, owner) == set(files)


def test_failure_records_are_the_owners_own(runtime_env, llm, pool, owner, other_owner):
    rt = runtime_env(ZERG_EMBEDDINGS="openai")
    llm.respond_embeddings_with(_refuse_marked)
    bad, _ = _eight_files_one_refused(pool, owner)
    indexer.embed_pending(rt, owner_id=owner)
    with pool.connection() as conn:
        assert list(embed_failures.export_memory_embedding_failures(conn, other_owner)) == []
        assert embed_failures.attempts(conn, other_owner, bad, MODEL) == 0
        assert embed_failures.record(conn, other_owner, bad, MODEL, "h", "not theirs") == 0  # not their file
        assert embed_failures.attempts(conn, owner, bad, MODEL) == 1


def _settings(llm):
    from zerg.config import load_settings

    return load_settings({"ZERG_DATA_DIR": "/tmp/zerg-unused", "OPENAI_BASE_URL": llm.base_url})
