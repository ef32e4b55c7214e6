"""Memory search: full-text with tags, the fallback for queries PostgreSQL reduces to nothing, the
fusion with a vector side (a tiny deterministic embedder defined here), the full-text fallback when
the embedder fails, and the owner boundary before the top-k."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import re

import psycopg
import pytest
from psycopg.rows import dict_row

from zerg.memory import facts, files, recall
from zerg.memory import filesystem as fs
from zerg.memory.paths import MemoryInputError
from zerg.memory.search import SEARCH_TIMEOUT, fuse, rrf, search_memory, snippet

DIMS = 384
MODEL = "all-MiniLM-L6-v2"  # the name the 384-d partial HNSW index is for


class BagOfWords:
    """Hashed bag of words into 384 dimensions, L2-normalised, with a few synonyms folded together
    so the vector side can find what the words alone cannot ("automobile" ~ "car")."""

    model = MODEL
    dimension = DIMS
    SYNONYMS = {"automobile": "car", "vehicle": "car", "motorcar": "car"}

    def __init__(self) -> None:
        self.calls = 0

    def vector(self, text: str) -> list[float]:
        vec = [0.0] * DIMS
        for word in re.findall(r"\w+", text.lower()):
            word = self.SYNONYMS.get(word, word)
            vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        self.calls += 1
        return [self.vector(t) for t in texts]


class Failing(BagOfWords):
    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        from zerg.embeddings import EmbeddingError

        raise EmbeddingError(f"{self.model}: no answer within {timeout:g} s")


@pytest.fixture
def rt(runtime_env):
    return runtime_env(ZERG_EMBEDDINGS="off")  # full text only, unless a test gives an embedder


def put(rt, pool, owner_id, path, content, tags=(), embedder=None):
    """A memory file, and (given an embedder) its embedding, as the indexer would store it."""
    written = fs.write(rt, owner_id, path, content, tags=list(tags), writer="user")
    if embedder is not None:
        literal = "[" + ",".join(map(str, embedder.vector(content))) + "]"
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash) "
                "VALUES (%s, %s, %s, %s, %s::vector, 'h')", (written.file.id, owner_id, MODEL, DIMS, literal))
    return written.file


# --- full text ------------------------------------------------------------------------------------

def test_full_text_finds_the_note_that_answers_a_question_with_a_snippet_around_the_words(rt, pool, owner):
    put(rt, pool, owner, "notes/backup.md", "Infra notes.\n" + "filler text " * 200 + "\nThe backup server is called cube.")
    put(rt, pool, owner, "notes/web.md", "The web server is called box.")
    put(rt, pool, owner, "notes/cats.md", "Cats sleep a lot.")
    out = search_memory(rt, owner, "what is the backup server called?")
    assert out.methods == ["fulltext"] and out.note == "no embedder is configured: full-text search only"
    assert [h.path for h in out.hits] == ["notes/backup.md", "notes/web.md"]  # any word; all words rank first
    best = out.hits[0]
    assert best.method == "fulltext" and "cube" in best.snippet and len(best.snippet) <= 300 and "\n" not in best.snippet


def test_tags_must_all_be_carried_and_apply_before_the_limit(rt, pool, owner):
    for n in range(30):  # better full-text matches without the tag: they must not crowd the tagged ones out
        put(rt, pool, owner, f"noise/{n:02d}.md", "disk disk disk disk usage")
    put(rt, pool, owner, "ops/a.md", "disk usage on cube", tags=["ops", "cube"])
    put(rt, pool, owner, "ops/b.md", "disk usage on box", tags=["ops"])
    out = search_memory(rt, owner, "disk", tags=["OPS"], limit=5)
    assert sorted(h.path for h in out.hits) == ["ops/a.md", "ops/b.md"]
    assert [h.path for h in search_memory(rt, owner, "disk", tags=["ops", "cube"]).hits] == ["ops/a.md"]
    assert search_memory(rt, owner, "disk", tags=["nothing-has-this"]).hits == []


def test_a_query_of_stop_words_or_symbols_matches_as_a_substring(rt, pool, owner):
    put(rt, pool, owner, "a.md", "To be or not to be, that is the question.")
    put(rt, pool, owner, "b.md", "price: $$$ (C++ & C#)")
    assert [h.path for h in search_memory(rt, owner, "to be or not").hits] == ["a.md"]
    (hit,) = search_memory(rt, owner, "C++ &").hits
    assert hit.path == "b.md" and "C++ &" in hit.snippet


def test_websearch_operators_are_honoured(rt, pool, owner):
    put(rt, pool, owner, "a.md", "backup server cube in the rack")
    put(rt, pool, owner, "b.md", "backup disk on the shelf")
    assert [h.path for h in search_memory(rt, owner, "backup -cube").hits] == ["b.md"]
    assert [h.path for h in search_memory(rt, owner, '"server cube"').hits] == ["a.md"]


def test_a_standalone_or_is_an_operator_and_any_word_still_matches_without_one(rt, pool, owner):
    put(rt, pool, owner, "a.md", "backup server cube in the rack")
    put(rt, pool, owner, "b.md", "web server box on the shelf")
    assert sorted(h.path for h in search_memory(rt, owner, "cube OR box").hits) == ["a.md", "b.md"]
    assert sorted(h.path for h in search_memory(rt, owner, "cube or box").hits) == ["a.md", "b.md"]
    assert sorted(h.path for h in search_memory(rt, owner, "the rack and the shelf").hits) == ["a.md", "b.md"]


@pytest.mark.parametrize("query", [
    "what is the backup server? double-check it",  # a hyphenated word: a phrase once parsed, not "all words"
    "what is the backup server, not the e-mail one",
    "which backup server is it - the one from last week?",
])
def test_a_hyphen_in_a_plain_question_still_matches_any_word(rt, pool, owner, query):
    put(rt, pool, owner, "notes/backup.md", "the backup server is called cube")
    put(rt, pool, owner, "notes/cats.md", "Cats sleep a lot.")
    hits = search_memory(rt, owner, query).hits
    assert [h.path for h in hits] == ["notes/backup.md"] and "cube" in hits[0].snippet


def test_a_pasted_url_finds_the_file_holding_it(rt, pool, owner):
    url = "https://status.example.com/checks?id=7&view=full"  # '&' inside a lexeme, '<->' once parsed
    put(rt, pool, owner, "notes/monitoring.md", f"The uptime page is {url} (shared with the team).")
    put(rt, pool, owner, "notes/cats.md", "Cats sleep a lot.")
    hits = search_memory(rt, owner, f"is {url} still the page we use?").hits
    assert [h.path for h in hits] == ["notes/monitoring.md"] and "uptime page" in hits[0].snippet


def test_quotes_and_backslashes_in_a_query_are_words_not_syntax(rt, pool, owner):
    put(rt, pool, owner, "notes/neil.md", "O'Neil keeps the logs in c:\\temp\\logs on the laptop.")
    assert [h.path for h in search_memory(rt, owner, "where does O'Neil keep c:\\temp\\logs").hits] == ["notes/neil.md"]
    assert search_memory(rt, owner, "'|&!<->():*\\").hits == []  # symbols only: a substring, found nowhere


def test_full_text_is_served_by_its_gin_index_whatever_the_owner_holds(rt, database_url, owner):
    # The tsquery is a parameter, not a row of a joined CTE: the planner can take memory_files_search
    # (before, the match was a join filter and every file of the owner was read, on every search).
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("""INSERT INTO memory_files (owner_id, path, content, writer, content_hash)
                        SELECT %s, 'bulk/' || g, 'disk usage report number ' || g, 'user', 'h'
                        FROM generate_series(1, 3000) g""", (owner,))
        conn.execute("VACUUM ANALYZE memory_files")  # as autovacuum would: GIN's pending list merged, statistics
        query = files.text_query(conn, "where is the zyzzogeton note?")
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + files.FULLTEXT_SQL,
                            {"match": query.match, "bonus": query.bonus, "owner": owner, "tags": [],
                             "limit": 20}).fetchone()
    assert query.match == "'zyzzogeton' | 'note'" or query.match == "'note' | 'zyzzogeton'"
    assert '"Index Name": "memory_files_search"' in json.dumps(plan)


def test_the_substring_fallback_reads_only_the_owners_newest_files_up_to_a_size(rt, pool, owner, monkeypatch):
    monkeypatch.setattr(files, "SUBSTRING_FILES", 2)
    monkeypatch.setattr(files, "SUBSTRING_CHARS", 100)
    put(rt, pool, owner, "old.md", "it is what it is")
    put(rt, pool, owner, "far.md", "x" * 200 + " it is what it is")  # past the size read
    put(rt, pool, owner, "new.md", "and it is what it is")
    assert [h.path for h in search_memory(rt, owner, "it is what it is").hits] == ["new.md"]


@contextlib.contextmanager
def memory_files_locked(database_url):
    """memory_files under an ACCESS EXCLUSIVE lock held by another session: any statement reading it waits."""
    with psycopg.connect(database_url) as conn:
        conn.execute("LOCK TABLE memory_files IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def test_a_search_past_its_statement_timeout_returns_no_hits_with_a_note(rt, pool, owner, database_url, caplog):
    put(rt, pool, owner, "notes/backup.md", "the backup server is called cube")
    with caplog.at_level(logging.WARNING), memory_files_locked(database_url):
        out = search_memory(rt, owner, "backup server")
    assert out.hits == [] and out.methods == ["fulltext"]
    assert out.note.endswith(f"full-text search took longer than {SEARCH_TIMEOUT}: no full-text hits")
    assert any("took longer than" in r.getMessage() for r in caplog.records)
    assert [h.path for h in search_memory(rt, owner, "backup server").hits] == ["notes/backup.md"]  # pool is fine


def test_recall_past_the_search_timeout_still_shows_the_profile(rt, pool, owner, database_url):
    put(rt, pool, owner, "notes/backup.md", "the backup server is called cube")
    with pool.connection() as conn:
        facts.add_fact(conn, owner, "profile", "Call them Sam", importance=8)
    with memory_files_locked(database_url):
        layer = recall.memory_layer(rt, owner, "what is the backup server called?")
    assert "Call them Sam" in layer and "notes/backup.md" not in layer


@pytest.mark.parametrize(("query", "limit", "message"), [
    ("  ", 5, "query is empty"), ("x" * 1001, 5, "query is 1001 characters; at most 1000"),
    ("x", 0, "limit must be between 1 and 50, not 0"), ("x", 51, "limit must be between 1 and 50, not 51"),
])
def test_bad_queries_are_clear_errors(rt, owner, query, limit, message):
    with pytest.raises(MemoryInputError, match=f"^{re.escape(message)}$"):
        search_memory(rt, owner, query, limit=limit)


# --- fusion ---------------------------------------------------------------------------------------

def test_rrf_adds_reciprocal_ranks():
    scores = rrf([[1, 2, 3], [3, 4]])
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61) and scores[1] == pytest.approx(1 / 61)
    assert max(scores, key=scores.get) == 3
    assert snippet("a  b\n\nc") == "a b c" and len(snippet("word " * 200)) <= 300 and snippet("word " * 200).endswith("…")


def test_the_vector_side_finds_what_the_words_cannot_and_both_sides_are_fused(rt, pool, owner):
    emb = BagOfWords()
    put(rt, pool, owner, "notes/car.md", "My automobile is a blue hatchback parked at home.", embedder=emb)
    put(rt, pool, owner, "notes/car-insurance.md", "The car insurance renews in May for the red car.", embedder=emb)
    put(rt, pool, owner, "notes/garden.md", "Tomatoes need water every day.", embedder=emb)
    out = search_memory(rt, owner, "red car", embedder=emb, limit=2)
    assert out.methods == ["fulltext", "vector"] and out.note is None and emb.calls == 1
    assert [(h.path, h.method) for h in out.hits] == [("notes/car-insurance.md", "both"), ("notes/car.md", "vector")]
    assert out.hits[0].score > out.hits[1].score  # found by both: ranked first
    # Full-text alone cannot find the automobile note.
    assert "notes/car.md" not in [h.path for h in search_memory(rt, owner, "red car", limit=3).hits]


def test_vectors_of_another_model_are_never_compared(rt, pool, owner):
    emb = BagOfWords()
    written = fs.write(rt, owner, "x.md", "automobile", writer="user").file
    literal = "[" + ",".join(map(str, emb.vector("car"))) + "]"
    with pool.connection() as conn:
        conn.execute("INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash) "
                     "VALUES (%s, %s, 'another-model', %s, %s::vector, 'h')", (written.id, owner, DIMS, literal))
        out = fuse(conn, owner, "car", vector=emb.vector("car"), model=MODEL, limit=5)
    assert out.hits == [] and out.methods == ["fulltext", "vector"]


def test_a_failing_embedder_leaves_full_text_and_says_so(rt, pool, owner):
    put(rt, pool, owner, "notes/backup.md", "The backup server is called cube.")
    out = search_memory(rt, owner, "backup server", embedder=Failing())
    assert [h.path for h in out.hits] == ["notes/backup.md"] and out.hits[0].method == "fulltext"
    assert out.methods == ["fulltext"] and "no answer within 2 s" in out.note and "full-text search only" in out.note


def test_tags_are_honoured_on_the_vector_side_too(rt, pool, owner):
    emb = BagOfWords()
    put(rt, pool, owner, "a.md", "automobile", tags=["mine"], embedder=emb)
    put(rt, pool, owner, "b.md", "automobile vehicle", embedder=emb)
    out = search_memory(rt, owner, "car", tags=["mine"], embedder=emb)
    assert [(h.path, h.method) for h in out.hits] == [("a.md", "vector")]


def test_another_owners_nearer_vectors_never_take_the_owners_places(rt, pool, owner, other_owner):
    emb = BagOfWords()
    query = emb.vector("car")
    literal = "[" + ",".join(map(str, query)) + "]"
    with pool.connection() as conn:  # 1,000 files of another owner, exactly on the query's vector
        conn.execute("""INSERT INTO memory_files (owner_id, path, content, writer, content_hash)
                        SELECT %s, 'n/' || g, 'car car car', 'user', 'h' FROM generate_series(1, 1000) g""",
                     (other_owner,))
        conn.execute("""INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash)
                        SELECT id, owner_id, %s, %s, %s::vector, 'h' FROM memory_files WHERE owner_id = %s""",
                     (MODEL, DIMS, literal, other_owner))
    for n in range(8):
        put(rt, pool, owner, f"mine/{n}.md", f"vehicle number {n} garage", embedder=emb)
    out = search_memory(rt, owner, "car", embedder=emb, limit=5)
    assert len(out.hits) == 5 and all(h.path.startswith("mine/") and h.method == "vector" for h in out.hits)
    theirs = search_memory(rt, other_owner, "garage", embedder=emb, limit=50).hits
    assert len(theirs) == 50 and not any(h.path.startswith("mine/") for h in theirs)
