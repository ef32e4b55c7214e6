"""Property-based requests from the served OpenAPI document against ``zerg serve`` (schemathesis):
every operation, valid and invalid inputs, with a valid session. No answer may be a server
error, and every answer must be one the document describes (status, content type, body schema).

The owner has a finished run with a worker, thread messages and an SSH host, so lists and
details answer with real rows, not only empty pages and 404s. Runs the fuzzer starts are answered
by the scripted model at once (no worker, no command). Generation is deterministic, so a failure
reproduces; the example count per operation is bounded to keep the suite fast.
"""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
import schemathesis
from httpx_sse import connect_sse
from hypothesis import HealthCheck, settings

from tests.support.factories import unique_name
from tests.support.scripts import run_script
from zerg.owners import create_owner

MAX_EXAMPLES = 15  # per operation and generation mode
# Operations that can end the caller's own session or device: each example is sent by an owner of its own.
SESSION_ENDING = {"POST /api/jarvis/logout", "DELETE /api/jarvis/devices/{device_id}",
                  "DELETE /api/jarvis/sessions/{session_id}"}
# Live streams that never end by themselves: each case reads for the read timeout's 2 s, then
# schemathesis cuts the stream short (what arrived is checked: status, headers, content type).
ENDLESS_STREAMS = {"/api/jarvis/events"}


def _ssh_keys() -> tuple[str, str]:
    """An unencrypted OpenSSH private key and another key's public line (the pinned host key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()
    host = Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, host


@pytest.fixture
def fuzzed(api_server, llm, pool):
    """(base url, a session token) of a server whose owner has data."""
    base, configure = api_server
    configure(OPENAI_API_KEY="sk-fuzz")  # voice sessions are minted by the scripted server (else 503: no key)
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("fuzzed"))
    client = httpx.Client(base_url=base, timeout=30)
    token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
    client.headers["Authorization"] = f"Bearer {token}"
    llm.respond_with(run_script(["check the disk"]))
    run = client.post("/api/jarvis/supervisor", json={"task": "check the disk"}).json()
    with connect_sse(client, "GET", run["stream_url"]) as source:
        assert [e.event for e in source.iter_sse() if e.id][-1] == "supervisor_complete"
    private_key, host_key = _ssh_keys()
    put = client.put("/api/jarvis/hosts/web", json={"hostname": "127.0.0.1", "user": "ops", "private_key": private_key,
                                                    "host_key": host_key})
    assert put.status_code == 200, put.text
    llm.respond_with(lambda request: {"content": "ok"})  # the fuzzer's runs: answered at once
    yield base, token
    client.close()


def _checks() -> list:
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    return [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
            response_schema_conformance]


def _fuzz(operation, mode, send) -> str | None:
    """Run ``MAX_EXAMPLES`` generated cases of one operation; the first failure, reported, or None."""
    from hypothesis import Phase, given
    from hypothesis.errors import Unsatisfiable

    checks = _checks()

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        case.validate_response(send(case), checks=checks)

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (no parameters, no body): the positive cases cover it
        return None
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - schemathesis raises a group; all reported at the end
        notes = "\n".join(getattr(exc, "__notes__", []))
        return f"{type(exc).__name__}: {exc}\n{notes}"
    return None


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")  # inside schemathesis
def test_no_operation_answers_a_server_error_or_outside_its_documented_schema(fuzzed, pool):
    from schemathesis.generation import GenerationMode

    from zerg.api.app import openapi_document

    base, token = fuzzed
    schema = schemathesis.openapi.from_url(f"{base}/api/openapi.json")

    spare: dict[str, str] = {}  # a session of another owner, for SESSION_ENDING; replaced once it is ended
    sent: Counter[tuple[str, str]] = Counter()

    def send(case):
        sent[case.path, case.method.lower()] += 1
        bearer = token
        ending = f"{case.method.upper()} {case.path}" in SESSION_ENDING
        if ending:
            if "token" not in spare:
                with pool.connection() as conn:
                    secret = create_owner(conn, unique_name("fuzz")).device_secret
                spare["token"] = httpx.post(f"{base}/api/jarvis/auth", json={"device_secret": secret}).json()["token"]
            bearer = spare["token"]
        # Public routes ignore the token; every other route gets a valid one.
        timeout = (30, 2) if case.path in ENDLESS_STREAMS else 30
        response = case.call(headers={"Authorization": f"Bearer {bearer}"}, timeout=timeout)
        if ending and response.status_code == 200:
            spare.clear()
        return response

    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failure = _fuzz(operation, mode, send)
            if failure:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {failure}")
    documented = {(path, method) for path, ops in openapi_document()["paths"].items() for method in ops}
    assert set(sent) == documented and min(sent.values()) >= 2, sent  # every operation, more than once
    assert not failures, "\n\n".join(failures)
