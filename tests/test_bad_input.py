"""Every bad input a careless user or an attacker sends gets a 4xx ``{"error", "message"}`` that says
what is wrong, never a 500, and leaves no traceback in the log: on the Lambda path (what API
Gateway invokes) and over HTTP to ``zerg serve`` alike."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from tests.support.api import call
from tests.support.factories import make_finished_worker, make_run, unique_name
from zerg.owners import create_owner

NUL_MESSAGE = "must not contain the NUL character"


@pytest.fixture
def no_traceback(capfd, caplog):
    """Fails the test if anything logged an error or printed a traceback while it ran."""
    caplog.set_level(logging.WARNING)
    yield
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "internal_error" not in out + err, (out + err)[-3000:]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text


@pytest.fixture
def alice(runtime_env, pool):
    runtime_env()
    with pool.connection() as conn:
        return create_owner(conn, unique_name("alice"))


@pytest.fixture
def token(alice):
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": alice.device_secret})
    assert status == 200
    return body["token"]


@pytest.fixture
def served(alice):
    from zerg.local.server import make_server

    server = make_server("127.0.0.1", 0).start()
    yield server
    server.stop()


def over_http(server, method: str, path: str, *, token: str | None = None, raw: bytes | None = None,
              headers: dict | None = None) -> tuple[int, dict, httpx.Response]:
    hdrs = dict(headers or {})
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    resp = httpx.request(method, server.url + path, content=raw, headers=hdrs, timeout=30)
    return resp.status_code, (resp.json() if resp.content else {}), resp


def over_lambda(method: str, path: str, *, token: str | None = None, raw: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, dict]:
    """The API Gateway event as the function gets it (unlike ``call``, no content type is added)."""
    from functions.events.handler import handler
    from zerg.local.server import to_apigw_event

    hdrs = {k.lower(): v for k, v in (headers or {}).items()}
    if token:
        hdrs["authorization"] = f"Bearer {token}"
    result = handler(to_apigw_event(method, path, hdrs, raw or b""), None)
    return result["statusCode"], json.loads(result["body"]) if result.get("body") else {}, result


def assert_error(status: int, body: dict, expected: int, error: str, fragment: str) -> None:
    assert (status, body.get("error")) == (expected, error), body
    assert set(body) == {"error", "message"} and fragment in body["message"], body


JSON_CT = {"Content-Type": "application/json"}
DEEP = b'{"task": "t", "context": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
BIG_INT = b'{"task": "t", "context": {"n": ' + b"7" * 4301 + b"}}"

# (id, body bytes, headers, status, error, message fragment) for POST /api/jarvis/supervisor
BODY_CASES = [
    ("invalid-utf8", b'{"task": "caf\xe9"}', JSON_CT, 400, "bad_request", "not valid UTF-8: byte 0xe9 at offset 13"),
    ("text-plain", b'{"task": "t"}', {"Content-Type": "text/plain"}, 415, "unsupported_media_type",
     "Content-Type must be application/json, got 'text/plain'"),
    ("no-content-type", b'{"task": "t"}', {}, 415, "unsupported_media_type", "needs Content-Type: application/json"),
    ("multipart-without-boundary", b"--x\r\n", {"Content-Type": "multipart/form-data"}, 415, "unsupported_media_type",
     "got 'multipart/form-data'"),
    ("5000-deep", DEEP, JSON_CT, 400, "bad_request", "deeper than 64 levels"),
    ("4301-digit-integer", BIG_INT, JSON_CT, 400, "bad_request", "an integer of more than 4300 digits"),
    ("nan", b'{"task": "t", "context": {"x": NaN}}', JSON_CT, 400, "bad_request", "NaN is not a JSON value"),
    ("not-json", b'{"task": ', JSON_CT, 400, "bad_request", "not valid JSON: Expecting value at line 1 column 10"),
    ("nul-in-task", b'{"task": "rm -rf \\u0000"}', JSON_CT, 422, "validation_error", f"task: {NUL_MESSAGE}"),
    ("nul-deep-in-context", b'{"task": "t", "context": {"a": [1, {"b": "x\\u0000"}]}}', JSON_CT, 422,
     "validation_error", f"context.a.1.b: {NUL_MESSAGE}"),
    ("nul-in-a-key", b'{"task": "t", "preferences": {"k\\u0000": 1}}', JSON_CT, 422, "validation_error",
     f"preferences.'k\\x00' (a key): {NUL_MESSAGE}"),
]


@pytest.mark.parametrize("via", ["lambda", "http"])
@pytest.mark.parametrize(("case", "raw", "headers", "status", "error", "fragment"), BODY_CASES, ids=[c[0] for c in BODY_CASES])
def test_a_bad_body_gets_its_4xx_and_starts_nothing(via, case, raw, headers, status, error, fragment, token, alice, pool,
                                                    request, no_traceback):
    send = over_lambda if via == "lambda" else (lambda *a, **k: over_http(request.getfixturevalue("served"), *a, **k))
    got, body, _ = send("POST", "/api/jarvis/supervisor", token=token, raw=raw, headers=headers)
    assert_error(got, body, status, error, fragment)
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s", (alice.owner_id,)).fetchone()["n"] == 0


def test_a_bad_body_is_reported_before_credentials_as_before(alice, no_traceback):
    assert_error(*over_lambda("POST", "/api/jarvis/supervisor", raw=b'{"task": "x"}', headers={"Content-Type": "text/plain"})[:2],
                 415, "unsupported_media_type", "text/plain")
    assert_error(*over_lambda("POST", "/api/jarvis/supervisor", raw=DEEP, headers=JSON_CT)[:2], 400, "bad_request", "deeper")


@pytest.mark.parametrize("content_type", ["APPLICATION/JSON", "application/json; charset=UTF-8", "Application/Json ;charset=utf-8"])
def test_json_is_json_whatever_the_case_of_its_media_type(content_type, alice, served, no_traceback):
    raw = json.dumps({"device_secret": alice.device_secret}).encode()
    for send in (over_lambda, lambda *a, **k: over_http(served, *a, **k)):
        status, body, _ = send("POST", "/api/jarvis/auth", raw=raw, headers={"Content-Type": content_type})
        assert status == 200 and body["owner_id"] == alice.owner_id


def test_routes_without_a_body_ignore_one(token, alice, pool, no_traceback):
    run_id, _ = make_run(pool, alice.owner_id)
    status, body, _ = over_lambda("POST", f"/api/jarvis/runs/{run_id}/cancel", token=token, raw=b"\xff",
                                  headers={"Content-Type": "text/plain"})
    assert (status, body["status"]) == (200, "cancelled")


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/api/jarvis/auth", {"device_secret": "s\x00"}, "device_secret"),
    ("POST", "/api/jarvis/pair", {"code": "ABCDE-FGHJK", "device_name": "phone\x00"}, "device_name"),
    ("PUT", "/api/jarvis/hosts/web", {"hostname": "web.example", "user": "ops\x00", "private_key": "k"}, "user"),
    ("POST", "/api/jarvis/supervisor", {"task": "t", "context": {"note": "\x00"}}, "context.note"),
])
def test_a_nul_anywhere_in_any_body_is_a_422_naming_the_field(method, path, body, field, token, no_traceback):
    status, got, _ = call(method, path, body, token=token)
    assert_error(status, got, 422, "validation_error", f"{field}: {NUL_MESSAGE}")


def test_a_nul_in_a_header_or_parameter_never_reaches_the_database(token, alice, pool, served, no_traceback):
    from zerg.wiring import get_runtime

    # h11 refuses a NUL in a header before the app sees it; API Gateway may pass one on.
    status, body, _ = call("POST", "/api/jarvis/supervisor", {"task": "t"}, token=token, headers={"idempotency-key": "k\x00"})
    assert_error(status, body, 400, "bad_request", "Idempotency-Key must not contain control characters")
    job_id, _ = make_finished_worker(pool, get_runtime().store, alice.owner_id, make_run(pool, alice.owner_id)[0], "t")
    for method, path, expected, fragment in (
            ("GET", "/api/jarvis/workers?status=%00", 422, "status: Input should be"),
            ("GET", "/api/jarvis/hosts/a%00b", 422, "alias: String should match pattern"),
            ("DELETE", "/api/jarvis/sessions/%00", 422, "session_id: Input should be a valid UUID"),
            ("GET", f"/api/jarvis/workers/{job_id}/files/a%00b", 400, "contains a NUL byte")):
        for status, body, _ in (over_lambda(method, path, token=token), over_http(served, method, path, token=token)):
            assert status == expected and set(body) == {"error", "message"} and fragment in body["message"], (path, body)
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s", (alice.owner_id,)).fetchone()["n"] == 1


def test_a_5000_character_file_name_is_a_400_naming_the_limit(token, alice, pool, served, no_traceback):
    from zerg.wiring import get_runtime

    run_id, _ = make_run(pool, alice.owner_id)
    job_id, _ = make_finished_worker(pool, get_runtime().store, alice.owner_id, run_id, "look")
    name = "a" * 5000
    for path in (f"/api/jarvis/workers/{job_id}/files/{name}", f"/api/jarvis/workers/{job_id}/files/tool_calls/{name}",
                 f"/api/jarvis/workers/{job_id}/files/{'dddd%2F' * 200}x"):
        for status, body, _ in (over_lambda("GET", path, token=token), over_http(served, "GET", path, token=token)):
            assert_error(status, body, 400, "bad_path", "at most")
    resp = httpx.get(f"{served.url}/api/jarvis/workers/{job_id}/files/result.txt", headers={"Authorization": f"Bearer {token}"})
    assert (resp.status_code, resp.text) == (200, "done")  # the worker is readable: only the name was refused


def _signed(claims: dict) -> str:
    import jwt

    from zerg.auth import jwt_secret
    from zerg.config import get_settings

    return jwt.encode(claims, jwt_secret(get_settings()), algorithm="HS256")


def test_a_validly_signed_token_of_a_deleted_owner_is_a_401(alice, token, pool, served, no_traceback):
    from zerg.privacy.delete import delete_owner
    from zerg.wiring import get_runtime

    assert over_lambda("GET", "/api/jarvis/thread", token=token)[0] == 200
    delete_owner(pool, get_runtime().store, alice.owner_id)
    now = datetime.now(timezone.utc)
    forged_sid = str(uuid.uuid4())  # signed with the real key, but no session was ever issued for it
    never_issued = _signed({"sub": str(alice.owner_id), "sid": forged_sid, "jti": forged_sid, "iat": now,
                            "exp": now + timedelta(hours=1)})
    for bearer in (token, never_issued):
        for path in ("/api/jarvis/thread", "/api/jarvis/workers", "/api/jarvis/sessions", "/api/jarvis/hosts"):
            for status, body, _ in (over_lambda("GET", path, token=bearer), over_http(served, "GET", path, token=bearer)):
                assert_error(status, body, 401, "unauthorized", "unknown session")
        status, body, _ = over_lambda("POST", "/api/jarvis/supervisor", token=bearer, raw=b'{"task": "t"}', headers=JSON_CT)
        assert_error(status, body, 401, "unauthorized", "unknown session")


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE"])
def test_head_options_and_trace_get_405_json_with_allow(method, token, served, no_traceback):
    # zerg serve configures no CORS, so nothing needs OPTIONS (on AWS, API Gateway answers CORS
    # preflights itself and routes none of these methods to the function).
    for path, allow in (("/api/jarvis/thread", "GET"), ("/api/jarvis/hosts/web", "DELETE, GET, PUT"),
                        ("/api/jarvis/supervisor", "POST")):
        for status, body, result in (over_lambda(method, path, token=token), over_http(served, method, path, token=token)):
            headers = {k.lower(): v for k, v in (result.get("headers") if isinstance(result, dict) else result.headers).items()}
            assert status == 405 and headers["allow"] == allow and headers["content-type"] == "application/json", (path, headers)
            if method != "HEAD":  # a HEAD answer has no body, by definition
                assert_error(status, body, 405, "method_not_allowed", f"{method} is not allowed on {path}")


@pytest.mark.parametrize(("text", "nul"), [
    (r'{"task": "a\u0000"}', True),
    (r'{"task": "a\\\u0000"}', True),  # an escaped backslash, then a NUL
    (r'{"task": "grep \\u0000 dump.bin"}', False),  # the six characters \u0000, as text
    (r'{"task": "\\\\u0000"}', False),
    (r'{"task": "[[[{{{", "n": "]]]}}}"}', False),  # brackets in strings are no nesting
])
def test_a_nul_is_told_from_the_text_that_names_one(text, nul):
    from zerg.api.body import parse_body
    from zerg.api.errors import ApiError

    event = {"body": text, "headers": {"content-type": "application/json"}}
    if nul:
        with pytest.raises(ApiError, match=f"task: {NUL_MESSAGE}"):
            parse_body(event)
    else:
        assert parse_body(event) == json.loads(text)


def test_nesting_is_counted_outside_strings_and_up_to_the_limit():
    from zerg.api.body import MAX_DEPTH, parse_body
    from zerg.api.errors import ApiError

    def event(depth: int, inside: str = "1") -> dict:
        return {"body": "[" * depth + inside + "]" * depth, "headers": {"content-type": "application/json"}}

    assert parse_body(event(MAX_DEPTH)) is not None
    assert parse_body(event(MAX_DEPTH - 1, '"' + "[" * 500 + '"')) is not None
    with pytest.raises(ApiError, match=f"deeper than {MAX_DEPTH} levels"):
        parse_body(event(MAX_DEPTH + 1))
