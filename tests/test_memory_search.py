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

from zerg.memory import facts, files, recall, terms
from zerg.memory import filesystem as fs
from zerg.memory.paths import MemoryInputError
from zerg.memory.search import SEARCH_TIMEOUT, combine, fuse, proximity, search_memory, snippet

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


def test_operators_apply_only_after_the_strict_prefix(rt, pool, owner):
    put(rt, pool, owner, "a.md", "backup server cube in the rack")
    put(rt, pool, owner, "b.md", "backup disk on the shelf")
    assert [h.path for h in search_memory(rt, owner, "strict: backup -cube").hits] == ["b.md"]
    assert [h.path for h in search_memory(rt, owner, 'STRICT: "server cube"').hits] == ["a.md"]
    assert sorted(h.path for h in search_memory(rt, owner, "strict: cube or shelf").hits) == ["a.md", "b.md"]


@pytest.mark.parametrize("question", [
    'what did I note about "the backup server" or the disk?',  # quotes and a standalone "or"
    "backup -disk or cube",  # what would be operators, typed without the prefix
    'the "rack"',
])
def test_a_natural_question_is_never_read_with_operators(rt, pool, owner, question):
    put(rt, pool, owner, "a.md", "backup server cube in the rack")
    put(rt, pool, owner, "b.md", "backup disk on the shelf")
    put(rt, pool, owner, "c.md", "tomatoes need water")
    out = search_memory(rt, owner, question)
    assert out.hits and "c.md" not in [h.path for h in out.hits] and out.note.startswith("no embedder")
    assert all(h.method == "fulltext" for h in out.hits)


def test_a_strict_query_that_finds_nothing_falls_back_to_its_words_and_says_so(rt, pool, owner):
    put(rt, pool, owner, "a.md", "backup server cube in the rack")
    put(rt, pool, owner, "b.md", "backup disk on the shelf")
    out = search_memory(rt, owner, 'strict: "cube on the shelf"')
    assert sorted(h.path for h in out.hits) == ["a.md", "b.md"]
    assert "no file matches the strict query: files holding any of its words instead" in out.note


def test_a_standalone_or_and_any_word_match_without_the_prefix(rt, pool, owner):
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


def test_bm25_reads_only_the_postings_of_the_querys_words_from_their_index(rt, database_url, owner):
    # The ranking never reads the owner's files: the words' postings, their lengths and the owner's
    # statistics all come from memory_terms' primary key (tf is in it: an index-only scan).
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("""INSERT INTO memory_files (owner_id, path, content, writer, content_hash)
                        SELECT %s, 'bulk/' || g, 'disk usage report number ' || g, 'user', 'h'
                        FROM generate_series(1, 3000) g""", (owner,))
        conn.execute("VACUUM ANALYZE memory_terms")  # as autovacuum would: statistics, the visibility map
        query = files.text_query(conn, "where is the zyzzogeton note?")
        plan = json.dumps(conn.execute("EXPLAIN (FORMAT JSON) " + terms.BM25_SQL.format(files=""), {
            "owner": owner, "terms": query.lexemes, "tags": [], "require": None, "limit": 20, "k1": terms.K1,
            "b": terms.B}).fetchone())
    assert query.lexemes == ["note", "zyzzogeton"] and query.strict is None
    assert '"Index Name": "memory_terms_pkey"' in plan and "memory_files" not in plan
    assert '"Node Type": "Seq Scan"' not in plan


def test_the_substring_fallback_reads_only_the_owners_newest_files_up_to_a_size(rt, pool, owner, monkeypatch):
    monkeypatch.setattr(files, "SUBSTRING_FILES", 2)
    monkeypatch.setattr(files, "SUBSTRING_CHARS", 100)
    put(rt, pool, owner, "old.md", "it is what it is")
    put(rt, pool, owner, "far.md", "x" * 200 + " it is what it is")  # past the size read
    put(rt, pool, owner, "new.md", "and it is what it is")
    assert [h.path for h in search_memory(rt, owner, "it is what it is").hits] == ["new.md"]


@contextlib.contextmanager
def memory_files_locked(database_url, table="memory_files"):
    """``table`` under an ACCESS EXCLUSIVE lock held by another session: any statement reading it waits."""
    with psycopg.connect(database_url) as conn:
        conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def test_a_full_text_side_past_its_statement_timeout_leaves_the_vector_side_with_a_note(
        rt, pool, owner, database_url, caplog):
    emb = BagOfWords()
    put(rt, pool, owner, "notes/backup.md", "the backup server is called cube", embedder=emb)
    with caplog.at_level(logging.WARNING), memory_files_locked(database_url, "memory_terms"):
        out = search_memory(rt, owner, "backup server", embedder=emb)
    assert [(h.path, h.method) for h in out.hits] == [("notes/backup.md", "vector")]
    assert out.note.endswith(f"full-text search took longer than {SEARCH_TIMEOUT}: no full-text hits")
    assert any("took longer than" in r.getMessage() for r in caplog.records)


def test_a_search_past_its_statement_timeout_returns_no_hits_with_a_note(rt, pool, owner, database_url, caplog):
    emb = BagOfWords()
    put(rt, pool, owner, "notes/backup.md", "the backup server is called cube", embedder=emb)
    with caplog.at_level(logging.WARNING), memory_files_locked(database_url):  # the hits' files cannot be read
        out = search_memory(rt, owner, "backup server", embedder=emb)
    assert out.hits == [] and out.methods == ["fulltext", "vector"]
    assert out.note.endswith(f"the search took longer than {SEARCH_TIMEOUT}: no hits")
    assert any("took longer than" in r.getMessage() for r in caplog.records)
    assert [h.path for h in search_memory(rt, owner, "backup server", embedder=emb).hits] == ["notes/backup.md"]


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

def test_the_signals_are_scaled_to_their_best_weighted_and_added():
    weights = {"words": 1.0, "nearness": 1.0, "meaning": 0.5}
    scores = combine({1: 8.0, 2: 4.0}, {1: 1.0, 2: 3.0}, {2: 0.9, 3: 0.5, 4: 0.7}, weights)
    # words 1 and 0.5; nearness 1/3 and 1; meaning from the worst (0) to the best (1)
    assert scores == pytest.approx({1: 1 + 1 / 3, 2: 0.5 + 1 + 0.5, 3: 0.0, 4: 0.25})
    assert combine({}, {}, {7: 0.3}, weights) == {7: 0.5}  # one candidate: the best of its signal
    assert snippet("a  b\n\nc") == "a b c" and len(snippet("word " * 200)) <= 300 and snippet("word " * 200).endswith("…")


def test_nearness_is_the_rarest_words_held_together_in_one_window():
    idf = {"pottery": 3.0, "class": 1.0, "caroline": 0.1}
    found = {
        1: {"pottery": [100], "class": [101], "caroline": [5, 60, 99]},  # together, on one line
        2: {"pottery": [10], "class": [500], "caroline": [11, 400]},  # scattered over the file
        3: {"caroline": [1, 2, 3, 4, 5, 6, 7, 8]},  # a name, many times: counted once
    }
    near = proximity(found, idf, window=20)
    assert near == pytest.approx({1: 4.1, 2: 3.1, 3: 0.1})


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


# --- BM25 and chunks ------------------------------------------------------------------------------

def conversation(topic_line: str, n_turns: int = 30, at: int | None = None) -> str:
    """A two-person session: names on every line, small talk, and ``topic_line`` as turn ``at``."""
    small_talk = ["How was your day?", "Pretty good, thanks for asking.", "The weather was lovely today.",
                  "I went for a walk with the dog.", "That sounds nice, I stayed home."]
    lines = [f"{'Caroline' if i % 2 else 'Melanie'}: {small_talk[i % len(small_talk)]}" for i in range(n_turns)]
    lines.insert(n_turns if at is None else at, f"Caroline: {topic_line}")
    return "\n".join(lines)


def test_rare_words_outweigh_names_on_every_line_and_length_earns_nothing(rt, pool, owner):
    for n in range(8):  # long sessions, full of the names the question also holds
        put(rt, pool, owner, f"sessions/{n}.md", conversation("Nothing new here.", n_turns=60 + 10 * n))
    put(rt, pool, owner, "sessions/pottery.md", conversation("I signed up for a pottery class on Friday!", n_turns=20))
    out = search_memory(rt, owner, "When did Caroline sign up for the pottery class, Melanie?")
    assert out.hits[0].path == "sessions/pottery.md" and "pottery" in out.hits[0].snippet


def test_another_owners_files_change_no_score(rt, pool, owner, other_owner):
    put(rt, pool, owner, "a.md", "the backup server cube sits in the rack")
    put(rt, pool, owner, "b.md", "the backup disk is on the shelf")
    before = [(h.path, h.score) for h in search_memory(rt, owner, "backup cube rack").hits]
    for n in range(30):  # the same words, many times over, in another owner's memory
        put(rt, pool, other_owner, f"theirs/{n}.md", "backup backup cube rack " * (n + 1))
    assert [(h.path, h.score) for h in search_memory(rt, owner, "backup cube rack").hits] == before
    assert all(h.path.startswith("theirs/") for h in search_memory(rt, other_owner, "backup cube rack", limit=50).hits)


def test_the_database_keeps_each_files_terms_on_write_edit_and_delete(rt, pool, owner):
    def stored_terms(path):
        with pool.connection() as conn:
            return {r["lexeme"]: r["tf"] for r in conn.execute(
                """SELECT t.lexeme, t.tf FROM memory_terms t JOIN memory_files f ON f.id = t.file_id
                   WHERE t.owner_id = %s AND f.path = %s""", (owner, path)).fetchall()}

    put(rt, pool, owner, "n.md", "Disks fill up. The disk on cube is full.")
    # Each word's count, and (the empty word) the file's length in words, stop words left out.
    assert stored_terms("n.md") == {"": 5, "disk": 2, "fill": 1, "cube": 1, "full": 1}
    fs.edit(rt, owner, "n.md", "cube", "box", writer="user")
    assert stored_terms("n.md") == {"": 5, "disk": 2, "fill": 1, "box": 1, "full": 1}
    assert [h.path for h in search_memory(rt, owner, "box").hits] == ["n.md"] and not search_memory(rt, owner, "cube").hits
    fs.delete(rt, owner, "n.md")
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM memory_terms WHERE owner_id = %s", (owner,)).fetchone()["n"] == 0


def test_evidence_past_the_models_window_is_found_by_its_chunk(runtime_env, pool, owner, other_owner):
    from zerg.memory import chunks, indexer

    rt = runtime_env(ZERG_EMBEDDINGS="off")
    emb = rt.__dict__["embedder"] = BagOfWords()
    late = conversation("My automobile got a new coat of paint.", n_turns=60, at=55)  # ~2,000 characters in
    assert late.index("automobile") > 2 * chunks.CHUNK_CHARS
    fs.write(rt, owner, "sessions/late.md", late, writer="user")
    fs.write(rt, owner, "sessions/other.md", conversation("We talked about gardening.", n_turns=60), writer="user")
    fs.write(rt, other_owner, "sessions/theirs.md", conversation("My automobile is red.", n_turns=60), writer="user")
    for someone in (owner, other_owner):
        while indexer.embed_pending(rt, owner_id=someone) > 0:
            pass
    with pool.connection() as conn:
        rows = conn.execute("""SELECT f.path, e.chunk, e.chunk_start, e.chunk_end, e.owner_id FROM memory_embeddings e
                               JOIN memory_files f ON f.id = e.file_id ORDER BY f.path, e.chunk""").fetchall()
    mine = [r for r in rows if r["path"] == "sessions/late.md"]
    assert len(mine) > 2 and mine[0]["chunk_start"] == 0 and mine[-1]["chunk_end"] == len(late)
    assert all(r["owner_id"] == other_owner for r in rows if r["path"] == "sessions/theirs.md")
    out = search_memory(rt, owner, "car paint job", embedder=emb, limit=1)  # "car": only the vector side knows
    assert [(h.path, h.method) for h in out.hits] == [("sessions/late.md", "both")]
    assert [h.path for h in search_memory(rt, other_owner, "car", embedder=emb).hits] == ["sessions/theirs.md"]


def test_positions_rarity_and_bm25_read_only_the_owners_rows(rt, pool, owner, other_owner):
    mine = put(rt, pool, owner, "mine.md", "the backup server cube")
    theirs = put(rt, pool, other_owner, "theirs.md", "backup backup cube")
    with pool.connection() as conn:
        both = [mine.id, theirs.id]
        assert files.positions(conn, owner, both, ["backup", "cube"]) == {mine.id: {"backup": [2], "cube": [4]}}
        assert files.positions(conn, other_owner, both, ["backup"]) == {theirs.id: {"backup": [1, 2]}}
        assert terms.rarity(conn, owner, ["backup", "cube", "zebra"]) == (1, {"backup": 1, "cube": 1})
        assert [r["id"] for r in terms.bm25(conn, owner, ["backup"], limit=10)] == [mine.id]
        assert [r["id"] for r in terms.bm25(conn, owner, ["backup"], tags=["x"], limit=10)] == []
