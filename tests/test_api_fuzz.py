"""Property-based requests from the served OpenAPI document against ``zerg serve`` (schemathesis):
every operation, valid and invalid inputs, with a valid session, under every check schemathesis
has. No answer may be a server error, every answer must be one the document describes (status,
content type, headers, body schema), a request the document calls invalid must be refused and one
it calls valid accepted, and a wrong method gets 405 with an ``Allow`` the document agrees with.

What a JSON Schema cannot state is still in the document: a rule about one value is a named
``format`` (``zerg.api.docs.FORMATS``, listed under ``info.x-formats``), whose valid values this
run generates (``tests.support.api_formats``). A rule between values, or one that depends on what
exists, is in the operation's description, and its 422 is the one answer to a valid-looking
request the acceptance check lets through: :data:`STATED`, each with its message and why; so are a
NUL in a body's string and a limit in bytes (:data:`EVERYWHERE`, :data:`SIZE_IN_BYTES`). The one
negative case not held to refusal is a value outside a named format only: schemathesis cannot
check a format it does not know (:func:`_only_named_formats_broken`). 405 and its Allow for every
path and method are also checked directly (tests/test_openapi.py).

The owner has a finished run with a worker, thread messages and an SSH host, so lists and
details answer with real rows, not only empty pages and 404s. Runs the fuzzer starts are answered
by the scripted model at once (no worker, no command). Generation is deterministic, so a failure
reproduces; the example count per operation is bounded to keep the suite fast. The session is
the run's own (``Authorization: Bearer``): the generator leaves the security parameters alone.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import httpx
import pytest
import schemathesis
from httpx_sse import connect_sse
from hypothesis import HealthCheck, settings

from tests.support import api_formats
from tests.support.factories import unique_name
from tests.support.scripts import run_script
from zerg.owners import create_owner

# Per operation and generation mode. A deeper run: ZERG_FUZZ_EXAMPLES=60 ZERG_FUZZ_RANDOM=1 (new examples each time).
MAX_EXAMPLES = int(os.environ.get("ZERG_FUZZ_EXAMPLES", "15"))
DERANDOMIZE = "ZERG_FUZZ_RANDOM" not in os.environ
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
    # voice sessions are minted by the scripted server (else 503: no key); an MCP server the fuzzer registers
    # is listed at once: a generated command or URL fails in seconds, not in the default minute
    configure(OPENAI_API_KEY="sk-fuzz", ZERG_MCP_TIMEOUT_S="3")
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


# 422s that answer a request whose every value is valid on its own: rules between values or about
# what exists, stated in the operation's description. (operation, message pattern): why.
STATED: dict[tuple[str, str], str] = {
    ("GET /api/jarvis/usage", r"^from \(\S+\) is after to|^from \(\S+\) to \(\S+\) spans \d+ days"):
        "from is not after to and the span is at most 366 days: a rule between two parameters",
    ("POST /api/jarvis/contacts/verify", r"^wrong code for |^no code is pending for |^the code for .* expired"):
        "the code must be the one sent to that contact: what exists, not what the request says",
    ("POST /api/jarvis/schedules",
     r"^task: required for a (check|reminder) schedule|^give exactly one of cron, rate or at"):
        "task is required unless kind is digest, and exactly one of cron, rate and at: rules between fields",
    ("POST /api/jarvis/schedules/preview", r"^give exactly one of cron, rate or at"):
        "exactly one of cron, rate and at: a rule between fields",
    ("PUT /api/jarvis/mcp/servers/{name}", (r"give exactly one of url|are for a remote server \(url\) only|"
                                            r"give bearer_token or oauth, not both|not a URL \(Port out of range|"
                                            r"\"auth\": \"none\" means no secret")):
        "exactly one of url and command, the secrets with a url only, no secret with \"auth\": \"none\", and a port "
        "up to 65535: rules between fields (and a number range a URL pattern does not state)",
    ("PATCH /api/jarvis/schedules/{schedule_id}",
     r"^task: required for a (check|reminder) schedule|^give at most one of cron, rate or at"):
        "a check or reminder keeps a task, and at most one of cron, rate and at: rules between fields",
}
# Every string of a body: a NUL character is refused whatever the field (zerg.api.body: PostgreSQL
# text cannot hold it), as info.description says.
EVERYWHERE = r"must not contain the NUL character"
# A limit in bytes (of UTF-8, or of the context as compact JSON, or a deployment's
# ZERG_TASK_MAX_BYTES) is in the field's description: no JSON Schema keyword counts bytes. Its 413,
# or 422 where the field's service answers 422, says "N bytes; at most" or "the limit is".
SIZE_IN_BYTES = r"\b\d+ bytes(;| as JSON;) (at most|the limit is)\b"


def _stated(case, response) -> bool:
    if response.status_code not in (413, 422):
        return False
    operation, message = f"{case.method.upper()} {case.path}", response.json().get("message", "")
    if re.search(SIZE_IN_BYTES, message):
        return True
    if response.status_code != 422:
        return False
    return re.search(EVERYWHERE, message) is not None or any(
        op == operation and re.search(pattern, message) for op, pattern in STATED)


def _format_at(doc: dict, case, mutation) -> str | None:
    """The ``format`` of the schema a negative mutation changed (its pointer, from the operation's
    parameters or body, ``$ref`` followed), or None."""
    operation = doc["paths"][case.path][case.method.lower()]
    where = mutation.parameter_location.value
    if where == "body":
        node = operation["requestBody"]["content"]["application/json"]["schema"]
    else:
        node = {"properties": {p["name"]: p["schema"] for p in operation.get("parameters", []) if p["in"] == where}}

    def resolved(item):
        while isinstance(item, dict) and "$ref" in item:
            item = doc["components"]["schemas"][item["$ref"].rsplit("/", 1)[1]]
        return item

    for part in filter(None, mutation.schema_pointer.split("/")):
        node = resolved(node)
        node = node[int(part)] if isinstance(node, list) else node.get(part, {})
    node = resolved(node)
    return node.get("format") if isinstance(node, dict) else None


def _only_named_formats_broken(doc: dict, case) -> bool:
    """Whether a negative case differs from a valid one only by a named format: schemathesis has no
    checker for a format it does not know, so it drops the format and counts any value as outside
    it; "memory-title" then gets a perfectly good title and calls the API wrong to take it. The
    formats' valid side is what this run checks (their generators); their refusals are the
    validators' own tests (tests/test_memory_files.py, test_hosts.py, test_schedules.py, ...)."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    mutations = getattr(data, "mutations", ()) or ()
    named = doc["info"]["x-formats"]
    return bool(mutations) and all(m.keywords == ("format",) and _format_at(doc, case, m) in named for m in mutations)


def _checks(doc: dict) -> list:
    """Every check schemathesis has; positive_data_acceptance lets through only a :data:`STATED`
    422, negative_data_rejection a case that only :func:`_only_named_formats_broken`."""
    from schemathesis.checks import CHECKS, load_all_checks
    from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

    load_all_checks()

    def positive_data_acceptance_but_stated_rules(ctx, response, case):
        if _stated(case, response):
            return None
        return positive_data_acceptance(ctx, response, case)

    def negative_data_rejection_but_named_formats(ctx, response, case):
        if _only_named_formats_broken(doc, case):
            return None
        return negative_data_rejection(ctx, response, case)

    wrapped = {positive_data_acceptance: positive_data_acceptance_but_stated_rules,
               negative_data_rejection: negative_data_rejection_but_named_formats}
    return [wrapped.get(c, c) for c in CHECKS.get_all()]


def _fuzz(operation, mode, send, checks: list) -> str | None:
    """Run ``MAX_EXAMPLES`` generated cases of one operation; the first failure, reported, or None."""
    from hypothesis import Phase, given
    from hypothesis.errors import Unsatisfiable

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=DERANDOMIZE,
              phases=[Phase.explicit, Phase.generate],
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
    api_formats.register()
    schema = schemathesis.openapi.from_url(f"{base}/api/openapi.json")
    schema.config.generation.update(with_security_parameters=False)  # the run's own session, below
    checks = _checks(openapi_document())

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
            failure = _fuzz(operation, mode, send, checks)
            if failure:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {failure}")
    documented = {(path, method) for path, ops in openapi_document()["paths"].items() for method in ops}
    assert set(sent) == documented, sent  # every operation
    assert not failures, "\n\n".join(failures)


def test_every_named_format_is_described_and_generated():
    """A format the document names is in info.x-formats and has a generator here (else the fuzz run
    would send arbitrary text for it and call the refusal a failure)."""
    from zerg.api.app import openapi_document

    doc = openapi_document()
    used = set(re.findall(r'"format": "([a-z0-9-]+)"', json.dumps(doc)))
    standard = {"uuid", "date-time", "date", "password", "uri", "binary", "email", "ipv4", "ipv6", "int32", "int64"}
    assert used - standard == set(doc["info"]["x-formats"]) == set(api_formats.STRATEGIES)
