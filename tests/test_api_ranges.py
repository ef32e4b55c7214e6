"""Range requests on a worker's files: a big tool output is read in pieces (Lambda path and `zerg serve`)."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

from tests.support.api import call
from tests.support.factories import make_finished_worker, make_run, unique_name
from zerg.api.ranges import RANGE_MAX_BYTES
from zerg.api.routes.workers import FILE_MAX_BYTES
from zerg.owners import create_owner

BIG = "".join(f"{i:07d}\n" for i in range(750_000))  # 6,000,000 bytes: over the whole-file limit
BIG_BYTES = BIG.encode()
TOOL = "tool_calls/001_container_exec.txt"


@pytest.fixture
def alice(runtime_env, pool):
    rt = runtime_env()
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("alice"))
    token = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})[1]["token"]
    run_id, _ = make_run(pool, owner.owner_id)
    job_id, _ = make_finished_worker(pool, rt.store, owner.owner_id, run_id, "print a big log", "done",
                                     tool_outputs=[("container_exec", BIG, True)])
    return owner, token, job_id


def get(token: str, job_id: int, path: str, byte_range: str | None = None):
    headers = {"range": byte_range} if byte_range is not None else {}
    status, body, raw = call("GET", f"/api/jarvis/workers/{job_id}/files/{path}", token=token, headers=headers)
    return status, body, raw


def data_of(raw) -> bytes:
    assert raw["isBase64Encoded"] is True  # a range is bytes: it may cut a character in two
    return base64.b64decode(raw["body"])


def test_a_file_over_5_mb_is_refused_whole_with_a_413_that_points_to_range(alice):
    _, token, job_id = alice
    assert len(BIG_BYTES) > FILE_MAX_BYTES
    status, body, _ = get(token, job_id, TOOL)
    assert status == 413 and body["error"] == "payload_too_large"
    assert "6000000 bytes" in body["message"] and f"Range: bytes=0-{RANGE_MAX_BYTES - 1}" in body["message"]


@pytest.mark.parametrize(("byte_range", "start", "end"), [
    ("bytes=0-99", 0, 99),
    ("bytes=5999990-", 5_999_990, 5_999_999),
    ("bytes=-16", 5_999_984, 5_999_999),
    ("bytes=100-5999999999", 100, 100 + RANGE_MAX_BYTES - 1),  # longer than one response: its first piece
    ("bytes=-6000000", 0, RANGE_MAX_BYTES - 1),
    ("BYTES = 8-15 ", 8, 15),
])
def test_a_range_gets_206_with_content_range_and_exactly_those_bytes(alice, byte_range, start, end):
    _, token, job_id = alice
    status, _, raw = get(token, job_id, TOOL, byte_range)
    assert status == 206, raw
    assert raw["headers"]["Content-Range"] == f"bytes {start}-{end}/{len(BIG_BYTES)}"
    assert raw["headers"]["Accept-Ranges"] == "bytes"
    assert raw["headers"]["Content-Type"] == "text/plain; charset=utf-8"
    assert data_of(raw) == BIG_BYTES[start:end + 1]


def test_several_ranges_are_served_as_the_first_one(alice):
    _, token, job_id = alice
    status, _, raw = get(token, job_id, "tool_calls%2F001_container_exec.txt", "bytes=0-7,16-23")
    assert status == 206 and raw["headers"]["Content-Range"] == f"bytes 0-7/{len(BIG_BYTES)}"
    assert data_of(raw) == b"0000000\n"


@pytest.mark.parametrize("byte_range", ["bytes=6000000-", "bytes=6000000-6000010", "bytes=-0"])
def test_a_range_outside_the_file_gets_416_with_its_size(alice, byte_range):
    _, token, job_id = alice
    status, body, raw = get(token, job_id, TOOL, byte_range)
    assert status == 416 and body["error"] == "range_not_satisfiable", body
    assert "it is 6000000 bytes" in body["message"]
    assert raw["headers"]["Content-Range"] == "bytes */6000000"


def test_any_range_of_an_empty_file_gets_416(runtime_env, alice, pool):
    owner, token, _ = alice
    rt = runtime_env()
    job_id, _ = make_finished_worker(pool, rt.store, owner.owner_id, None, "quiet", "done",
                                     tool_outputs=[("container_exec", "", True)])
    for byte_range in ("bytes=0-", "bytes=-5"):
        status, body, raw = get(token, job_id, TOOL, byte_range)
        assert (status, raw["headers"]["Content-Range"]) == (416, "bytes */0"), body
    assert get(token, job_id, TOOL)[0] == 200  # without a range: the (empty) file


@pytest.mark.parametrize(("byte_range", "why"), [
    ("bytes=abc", "'abc' is not a byte range"),
    ("bytes=", "'' is not a byte range"),
    ("bytes=-", "'-' is not a byte range"),
    ("bytes=--5", "'--5' is not a byte range"),
    ("bytes=9-3", "the range ends (3) before it starts (9)"),
    ("bytes=" + "9" * 5000 + "-", "is not a byte range"),  # no 4,300-digit int conversion, no 500
    ("bytes", "no '=' after the unit"),
])
def test_a_malformed_range_gets_400_naming_the_problem(alice, byte_range, why):
    _, token, job_id = alice
    status, body, _ = get(token, job_id, TOOL, byte_range[:1000])
    assert status == 400 and body["error"] == "bad_range", body
    assert why in body["message"] and "expected bytes=START-END" in body["message"]


def test_a_range_header_over_1000_characters_gets_422(alice):
    _, token, job_id = alice
    status, body, _ = get(token, job_id, TOOL, "bytes=0-1," + "2-3," * 300)
    assert status == 422 and body["message"].startswith("range: String should have at most 1000 characters")


def test_another_range_unit_is_ignored_and_the_file_served_whole(alice):
    _, token, job_id = alice
    status, body, raw = get(token, job_id, "result.txt", "items=0-5")
    assert (status, body) == (200, "done") and raw["headers"]["Accept-Ranges"] == "bytes"


def test_a_piece_of_a_json_file_is_its_bytes_with_its_content_type(alice):
    _, token, job_id = alice
    status, _, raw = get(token, job_id, "metadata.json", "bytes=0-0")
    assert status == 206 and raw["headers"]["Content-Type"] == "application/json" and data_of(raw) == b"{"


def test_another_owners_file_is_not_found_with_or_without_a_range(alice, pool):
    _, _, job_id = alice
    with pool.connection() as conn:
        bob = create_owner(conn, unique_name("bob"))
    bob_token = call("POST", "/api/jarvis/auth", {"device_secret": bob.device_secret})[1]["token"]
    for byte_range in (None, "bytes=0-99", "bytes=-0", "bytes=abc"):
        status, body, raw = get(bob_token, job_id, TOOL, byte_range)
        assert status == 404 and body["error"] == "not_found", (byte_range, body)
        assert "0000000" not in raw["body"]


def test_a_big_output_is_read_whole_in_pieces_through_the_local_server(api_server, alice):
    base, _ = api_server
    _, token, job_id = alice
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    url = f"/api/jarvis/workers/{job_id}/files/{TOOL}"
    got, sizes = bytearray(), []
    while True:  # what any client does: ask from where the last piece ended, until the size is reached
        resp = client.get(url, headers={"Range": f"bytes={len(got)}-"})
        assert resp.status_code == 206, resp.text
        start, end, size = map(int, re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", resp.headers["content-range"]).groups())
        assert start == len(got) and int(resp.headers["content-length"]) == end - start + 1 == len(resp.content)
        got += resp.content
        sizes.append(len(resp.content))
        if end + 1 == size:
            break
    assert bytes(got) == BIG_BYTES and max(sizes) == RANGE_MAX_BYTES and len(sizes) == -(-len(BIG_BYTES) // RANGE_MAX_BYTES)
    beyond = client.get(url, headers={"Range": f"bytes={len(got)}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{len(got)}"
    assert beyond.json()["error"] == "range_not_satisfiable"
