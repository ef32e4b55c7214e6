"""The memory files API: list, read, PUT (201/200), delete, versions, restore, search; bad input is
422 with the validator's message, another owner's file is 404 on every route, never a 500."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.support.api import call, login
from zerg.memory import filesystem as fs

FILE = "/api/jarvis/memory/file"


@pytest.fixture
def alice_token(runtime_env, alice):
    runtime_env(ZERG_EMBEDDINGS="off")
    return login(alice)


@pytest.fixture
def bob_token(runtime_env, bob):
    return login(bob)


def q(path: str) -> str:
    return quote(path, safe="")


def test_put_creates_then_replaces_and_every_read_shows_it(alice_token):
    status, body, _ = call("PUT", f"{FILE}?path={q('notes/backup.md')}",
                           {"content": "# Backup\nThe backup server is cube.", "tags": ["Infra", "infra"]}, token=alice_token)
    assert status == 201
    assert {k: body[k] for k in ("path", "title", "tags", "writer", "writer_run_id", "metadata")} == {
        "path": "notes/backup.md", "title": "Backup", "tags": ["infra"], "writer": "user", "writer_run_id": None,
        "metadata": {}}
    status, body, _ = call("PUT", f"{FILE}?path={q('notes/backup.md')}", {"content": "cube2", "title": "Backup v2"},
                           token=alice_token)
    assert (status, body["content"], body["title"], body["tags"]) == (200, "cube2", "Backup v2", ["infra"])

    status, body, _ = call("GET", f"{FILE}?path={q('notes/backup.md')}", token=alice_token)
    assert status == 200 and body["content"] == "cube2" and body["updated_at"].endswith("Z")
    status, body, _ = call("GET", "/api/jarvis/memory/files?prefix=notes/", token=alice_token)
    assert status == 200 and body["total"] == 1
    assert body["files"] == [{"path": "notes/backup.md", "title": "Backup v2", "tags": ["infra"], "writer": "user",
                              "updated_at": body["files"][0]["updated_at"], "size": 5}]
    status, body, _ = call("GET", "/api/jarvis/memory/search?q=cube2&tags=infra", token=alice_token)
    assert status == 200 and [h["path"] for h in body["hits"]] == ["notes/backup.md"]
    assert body["hits"][0]["method"] == "fulltext" and body["methods"] == ["fulltext"] and "full-text" in body["note"]


def test_delete_then_versions_then_restore(alice_token):
    path = f"{FILE}?path={q('plans/q3 (draft).md')}"
    call("PUT", path, {"content": "v1"}, token=alice_token)
    call("PUT", path, {"content": "v2"}, token=alice_token)
    status, body, raw = call("DELETE", path, token=alice_token)
    assert status == 204 and not raw.get("body")
    assert call("GET", path, token=alice_token)[0] == 404
    assert call("DELETE", path, token=alice_token)[:2] == (404, {"error": "not_found", "message": "memory file 'plans/q3 (draft).md' not found"})
    status, body, _ = call("GET", f"{FILE}/versions?path={q('plans/q3 (draft).md')}", token=alice_token)
    assert status == 200 and [v["reason"] for v in body["versions"]] == ["delete", "overwrite"]
    assert set(body["versions"][0]) == {"id", "reason", "writer", "writer_run_id", "written_at", "replaced_at", "title", "tags", "size"}
    first = body["versions"][1]["id"]
    status, body, _ = call("POST", f"{FILE}/restore?path={q('plans/q3 (draft).md')}&version_id={first}", token=alice_token)
    assert status == 200 and body["content"] == "v1"
    assert call("GET", path, token=alice_token)[1]["content"] == "v1"
    status, body, _ = call("POST", f"{FILE}/restore?path={q('other.md')}&version_id={first}", token=alice_token)
    assert (status, body["message"]) == (404, f"version {first} of memory file 'other.md' not found")


@pytest.mark.parametrize(("method", "url", "body", "message"), [
    ("GET", f"{FILE}?path=..%2Fsecrets", None, "path segment '..' is not allowed (no '.' or '..' segments)"),
    ("GET", f"{FILE}?path=%2Fetc%2Fpasswd", None, "path must be relative: remove the leading '/'"),
    ("GET", f"{FILE}?path=a%2F%2Fb", None, "path has an empty segment at position 2 ('//' or a trailing '/')"),
    ("GET", f"{FILE}?path=a%00b", None, "path contains the NUL character at position 1"),
    ("GET", f"{FILE}?path=a%1Bb", None, "path contains the control or invisible character '\\x1b' (U+001B) at position 1"),
    ("PUT", f"{FILE}?path=a.md", {"content": "x" * 262_145}, "content is 262145 bytes; at most 262144 (256 KiB) per memory file"),
    ("PUT", f"{FILE}?path=a.md", {"content": "x", "tags": ["a b"]}, "tag 'a b' contains ' ' (U+0020); allowed: letters, digits and - _ . :"),
    ("PUT", f"{FILE}?path=a.md", {"content": "x", "owner_id": 1}, "owner_id: Extra inputs are not permitted"),
    ("PUT", f"{FILE}?path=a.md", {"title": "x"}, "content: Field required"),
    ("GET", "/api/jarvis/memory/files?prefix=%2Fx", None, "prefix: path must be relative: remove the leading '/'"),
    ("GET", "/api/jarvis/memory/files?limit=1001", None, "limit: Input should be less than or equal to 1000, got '1001'"),
    ("GET", "/api/jarvis/memory/search?q=x&limit=51", None, "limit: Input should be less than or equal to 50, got '51'"),
    ("GET", "/api/jarvis/memory/search?q=x&tags=a%20b", None, "tag 'a b' contains ' ' (U+0020); allowed: letters, digits and - _ . :"),
    ("GET", "/api/jarvis/memory/search", None, "q: Field required"),
    ("POST", f"{FILE}/restore?path=a.md&version_id=x", None, "version_id: Input should be a valid integer, unable to parse string as an integer, got 'x'"),
    ("POST", f"{FILE}/restore?path=a.md", None, "version_id: Field required"),
])
def test_bad_input_is_422_with_a_precise_message(alice_token, method, url, body, message):
    status, answer, _ = call(method, url, body, token=alice_token)
    assert (status, answer) == (422, {"error": "validation_error", "message": message})


def test_a_body_with_a_nul_or_not_json_is_refused_before_the_route(alice_token):
    status, body, _ = call("PUT", f"{FILE}?path=a.md", raw=b'{"content": "a\\u0000b"}', token=alice_token)
    assert status == 422 and body["message"].startswith("content: must not contain the NUL character")
    assert call("PUT", f"{FILE}?path=a.md", raw=b"{not json", token=alice_token)[0] == 400


def test_another_owners_memory_is_404_or_empty_on_every_route(runtime_env, alice, alice_token, bob_token):
    rt = runtime_env(ZERG_EMBEDDINGS="off")
    fs.write(rt, alice.owner_id, "private/vault.md", "vault code 1234", tags=["secret"], writer="user")
    fs.write(rt, alice.owner_id, "private/vault.md", "vault code 5678", tags=["secret"], writer="user")
    (version,) = fs.versions_of(rt, alice.owner_id, "private/vault.md")
    path = q("private/vault.md")
    missing = {"error": "not_found", "message": "memory file 'private/vault.md' not found"}
    assert call("GET", f"{FILE}?path={path}", token=bob_token)[:2] == (404, missing)
    assert call("DELETE", f"{FILE}?path={path}", token=bob_token)[:2] == (404, missing)
    assert call("GET", f"{FILE}/versions?path={path}", token=bob_token)[:2] == (404, missing)
    status, body, _ = call("POST", f"{FILE}/restore?path={path}&version_id={version.id}", token=bob_token)
    assert (status, body["message"]) == (404, f"version {version.id} of memory file 'private/vault.md' not found")
    assert call("GET", "/api/jarvis/memory/files", token=bob_token)[1] == {"files": [], "total": 0}
    assert call("GET", "/api/jarvis/memory/search?q=vault%20code&tags=secret", token=bob_token)[1]["hits"] == []
    assert call("PUT", f"{FILE}?path={path}", {"content": "bob's"}, token=bob_token)[0] == 201  # his own file
    assert fs.read(rt, alice.owner_id, "private/vault.md").content == "vault code 5678"
    assert len(fs.versions_of(rt, alice.owner_id, "private/vault.md")) == 1


def test_without_credentials_every_memory_route_is_401_before_its_parameters(runtime_env):
    runtime_env(ZERG_EMBEDDINGS="off")
    for method, url in (("GET", "/api/jarvis/memory/files?limit=0"), ("GET", f"{FILE}?path=..%2Fx"),
                        ("PUT", f"{FILE}?path=a.md"), ("DELETE", f"{FILE}"), ("GET", f"{FILE}/versions"),
                        ("POST", f"{FILE}/restore?path=a.md&version_id=x"), ("GET", "/api/jarvis/memory/search")):
        status, body, _ = call(method, url, {"content": "x"} if method == "PUT" else None)
        assert (status, body["error"]) == (401, "unauthorized"), (method, url)


def test_written_files_are_embedded_in_the_background_and_search_fuses_both_sides(runtime_env, alice, llm, pool):
    from tests.support.llm_server import _pseudo_vector
    from tests.support.waiting import wait_for

    runtime_env(ZERG_EMBEDDINGS="openai")  # text-embedding-3-small, served by the scripted model server
    token = login(alice)
    for path, content in (("notes/backup.md", "The backup server is called cube."), ("notes/garden.md", "Tomatoes need water.")):
        assert call("PUT", f"{FILE}?path={q(path)}", {"content": content}, token=token)[0] == 201

    def embedded() -> bool:
        with pool.connection() as conn:
            return conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE owner_id = %s AND model = "
                                "'text-embedding-3-small'", (alice.owner_id,)).fetchone()["n"] == 2
    wait_for(embedded, "both files embedded by the background indexer")

    # The query's vector is the garden note's own: only the vector side can find it for these words.
    llm.script_embeddings({"vectors": [_pseudo_vector("Tomatoes need water.", 1536)]})
    status, body, _ = call("GET", "/api/jarvis/memory/search?q=backup%20server", token=token)
    assert status == 200 and body["methods"] == ["fulltext", "vector"] and body["note"] is None
    assert [(h["path"], h["method"]) for h in body["hits"]] == [("notes/backup.md", "both"), ("notes/garden.md", "vector")]
    assert llm.embedding_requests[-1]["input"] == ["backup server"]

    llm.script_embeddings({"status": 500, "message": "down"})  # the embedder fails: full text, and it says so
    status, body, _ = call("GET", "/api/jarvis/memory/search?q=backup%20server", token=token)
    assert status == 200 and body["methods"] == ["fulltext"] and "full-text search only" in body["note"]
    assert [(h["path"], h["method"]) for h in body["hits"]] == [("notes/backup.md", "fulltext")]
