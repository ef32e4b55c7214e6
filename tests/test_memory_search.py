"""Memory search: full-text with tags, the fallback for queries PostgreSQL reduces to nothing, the
fusion with a vector side (a tiny deterministic embedder defined here), the full-text fallback when
the embedder fails, and the owner boundary before the top-k."""

from __future__ import annotations

import hashlib
import math
import re

import pytest

from zerg.memory import filesystem as fs
from zerg.memory.paths import MemoryInputError
from zerg.memory.search import fuse, rrf, search_memory, snippet

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
