"""The OpenAPI document describes the API that runs, and the typed parameters keep today's errors."""

from __future__ import annotations

import httpx
import pytest

from tests.support.api import call
from zerg.api.app import openapi_document
from tests.support.factories import unique_name
from zerg.owners import create_owner

OPERATIONS = {  # (path, method): (success status, error statuses it documents)
    ("/api/jarvis/auth", "post"): (200, {400, 401, 415, 422}),
    ("/api/jarvis/supervisor", "post"): (202, {400, 401, 413, 415, 422, 503}),
    ("/api/jarvis/supervisor/events", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/runs/{run_id}", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/runs/{run_id}/cancel", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/runs/{run_id}/trace", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/workers", "get"): (200, {401, 422}),
    ("/api/jarvis/workers/{job_id}", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/workers/{job_id}/files/{path}", "get"): (200, {400, 401, 404, 413, 416, 422}),
    ("/api/jarvis/workers/{job_id}/files/{folder}/{name}", "get"): (200, {400, 401, 404, 413, 416, 422}),
    ("/api/jarvis/workers/{job_id}/retry", "post"): (202, {400, 401, 404, 409, 413, 422, 503}),
    ("/api/jarvis/thread", "get"): (200, {401, 422}),
    ("/api/jarvis/logout", "post"): (200, {401, 422}),
    ("/api/jarvis/pair", "post"): (201, {400, 401, 409, 415, 422}),
    ("/api/jarvis/me", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/sessions", "get"): (200, {401, 422}),
    ("/api/jarvis/sessions/{session_id}", "delete"): (200, {401, 404, 422}),
    ("/api/jarvis/devices/{device_id}", "delete"): (200, {401, 404, 422}),
    ("/api/jarvis/hosts", "get"): (200, {401, 422}),
    ("/api/jarvis/hosts/{alias}", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/hosts/{alias}", "put"): (200, {400, 401, 415, 422, 503}),
    ("/api/jarvis/hosts/{alias}", "delete"): (204, {401, 404, 409, 422}),
    ("/api/jarvis/hosts/{alias}/test", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/mcp/servers", "get"): (200, {401, 422}),
    ("/api/jarvis/mcp/servers/{name}", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/mcp/servers/{name}", "put"): (200, {400, 401, 409, 415, 422, 503}),
    ("/api/jarvis/mcp/servers/{name}/tools", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/mcp/servers/{name}", "delete"): (204, {401, 404, 422}),
    ("/api/jarvis/memory/files", "get"): (200, {401, 422}),
    ("/api/jarvis/memory/file", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/memory/file", "put"): (200, {400, 401, 415, 422}),
    ("/api/jarvis/memory/file", "delete"): (204, {401, 404, 422}),
    ("/api/jarvis/memory/file/versions", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/memory/file/restore", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/memory/search", "get"): (200, {401, 422}),
    ("/api/jarvis/memory/facts", "get"): (200, {401, 422}),
    ("/api/jarvis/memory/facts/{fact_id}", "delete"): (204, {401, 404, 422}),
    ("/api/jarvis/memory/facts/{fact_id}/restore", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/inbox", "get"): (200, {401, 422}),
    ("/api/jarvis/inbox/{run_id}/ack", "post"): (200, {401, 404, 422}),
    ("/api/jarvis/schedules", "post"): (201, {400, 401, 409, 415, 422, 503}),
    ("/api/jarvis/schedules", "get"): (200, {401, 422}),
    ("/api/jarvis/schedules/preview", "post"): (200, {400, 401, 415, 422}),
    ("/api/jarvis/schedules/{schedule_id}", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/schedules/{schedule_id}", "patch"): (200, {400, 401, 404, 409, 415, 422, 503}),
    ("/api/jarvis/schedules/{schedule_id}", "delete"): (204, {401, 404, 422, 503}),
    ("/api/jarvis/contacts", "post"): (202, {400, 401, 409, 415, 422, 429, 503}),
    ("/api/jarvis/contacts", "get"): (200, {401, 422}),
    ("/api/jarvis/contacts/verify", "post"): (200, {400, 401, 404, 415, 422, 429}),
    ("/api/jarvis/contacts/{contact_id}", "delete"): (204, {401, 404, 422}),
    ("/api/jarvis/policy", "get"): (200, {401, 422}),
    ("/api/jarvis/policy", "patch"): (200, {400, 401, 415, 422}),
    ("/api/jarvis/notifications", "get"): (200, {401, 422}),
    ("/api/jarvis/inbound", "get"): (200, {401, 422}),
    ("/api/jarvis/agents", "get"): (200, {401, 422}),
    ("/api/jarvis/agents/{agent}", "put"): (200, {400, 401, 404, 415, 422}),
    ("/api/jarvis/approvals/policy", "get"): (200, {401, 422}),
    ("/api/jarvis/approvals/policy", "put"): (200, {400, 401, 415, 422}),
    ("/api/jarvis/approvals/policy", "delete"): (200, {401, 422}),
    ("/api/jarvis/approvals", "get"): (200, {401, 422}),
    ("/api/jarvis/approvals/{approval_id}/approve", "post"): (200, {401, 404, 409, 422}),
    ("/api/jarvis/approvals/{approval_id}/deny", "post"): (200, {401, 404, 409, 422}),
    ("/api/jarvis/usage", "get"): (200, {401, 422}),
    ("/api/jarvis/models", "get"): (200, {401, 422}),
    ("/api/jarvis/runs", "get"): (200, {401, 422}),
    ("/api/jarvis/runs/{run_id}/events", "get"): (200, {401, 404, 422}),
    ("/api/jarvis/events", "get"): (200, {401, 422}),
    ("/api/jarvis/route", "post"): (200, {400, 401, 415, 422, 503}),
    ("/api/jarvis/quick", "post"): (200, {400, 401, 404, 409, 415, 422, 429, 503}),
    ("/api/jarvis/realtime/session", "post"): (200, {401, 422, 429, 503}),
    ("/api/jarvis/push/key", "get"): (200, {401, 422, 503}),
    ("/api/jarvis/push/subscriptions", "post"): (201, {400, 401, 409, 413, 415, 422}),
    ("/api/jarvis/push/subscriptions", "get"): (200, {401, 422}),
    ("/api/jarvis/push/subscriptions/{subscription_id}", "delete"): (204, {401, 404, 422}),
    ("/api/jarvis/push/test", "post"): (200, {401, 409, 422}),
    # Zerg as an MCP server: its frame errors are JSON-RPC's (tests/test_mcp_server.py checks its document).
    ("/mcp", "post"): (200, {202, 400, 401, 404, 406, 413, 415, 422}),
}
JSONRPC_ERRORS = {("/mcp", 400), ("/mcp", 404), ("/mcp", 406), ("/mcp", 415)}


@pytest.fixture(scope="module")
def doc():
    return openapi_document()


def _params(doc, path, method="get"):
    return {(p["in"], p["name"]): p for p in doc["paths"][path][method].get("parameters", [])}


def _bounds(schema):
    inner = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"), schema)
    return inner.get("type"), inner.get("minimum"), inner.get("maximum")


def test_the_served_document_is_the_generated_one(doc):
    status, body, _ = call("GET", "/api/openapi.json")
    assert status == 200 and body == doc
    assert {(path, method) for path, ops in doc["paths"].items() for method in ops} == set(OPERATIONS)


def test_workers_list_documents_every_query_parameter_with_its_bounds(doc):
    params = _params(doc, "/api/jarvis/workers")
    assert set(params) == {("query", n) for n in ("limit", "status", "since_hours", "before_id", "run_id")}
    assert not any(p["required"] for p in params.values())
    assert _bounds(params["query", "limit"]["schema"]) == ("integer", 1, 200)
    assert params["query", "limit"]["schema"]["default"] == 50
    assert _bounds(params["query", "since_hours"]["schema"]) == ("integer", 1, 24 * 366)
    for name in ("before_id", "run_id"):
        assert _bounds(params["query", name]["schema"])[:2] == ("integer", 1)
    status = params["query", "status"]["schema"]  # absent or a value, never null (docs.refine)
    assert status["type"] == "string"
    assert status["enum"] == ["queued", "running", "success", "failed", "timeout", "cancelled"]
    thread = _params(doc, "/api/jarvis/thread")
    assert _bounds(thread["query", "limit"]["schema"]) == ("integer", 1, 200)
    events = _params(doc, "/api/jarvis/supervisor/events")
    assert events["query", "run_id"]["required"] and _bounds(events["query", "run_id"]["schema"])[:2] == ("integer", 1)
    assert ("header", "last-event-id") in events and ("query", "last_event_id") in events
    assert ("header", "idempotency-key") in _params(doc, "/api/jarvis/supervisor", "post")


def test_file_routes_document_the_range_header_and_the_partial_content(doc):
    for path in ("/api/jarvis/workers/{job_id}/files/{path}", "/api/jarvis/workers/{job_id}/files/{folder}/{name}"):
        header = _params(doc, path)["header", "range"]
        assert not header["required"] and "bytes=START-END" in header["description"], path
        responses = doc["paths"][path]["get"]["responses"]
        assert "Content-Range" in responses["206"]["description"] and "Range" in responses["416"]["description"]


def test_path_ids_are_integers(doc):
    for path, name in (("/api/jarvis/runs/{run_id}", "run_id"), ("/api/jarvis/workers/{job_id}", "job_id"),
                       ("/api/jarvis/workers/{job_id}/files/{path}", "job_id")):
        param = _params(doc, path)["path", name]
        assert param["required"] and _bounds(param["schema"])[:2] == ("integer", 1), path
    assert _bounds(_params(doc, "/api/jarvis/runs/{run_id}/cancel", "post")["path", "run_id"]["schema"])[0] == "integer"


def test_every_route_but_auth_and_pair_needs_the_bearer_token_or_the_session_cookie(doc):
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    assert schemes["cookieAuth"] == {**schemes["cookieAuth"], "type": "apiKey", "in": "cookie", "name": "zerg_session"}
    assert doc["security"] == [{"bearerAuth": []}, {"cookieAuth": []}]
    for (path, method) in OPERATIONS:
        override = doc["paths"][path][method].get("security")
        assert override == ([{}] if path in ("/api/jarvis/auth", "/api/jarvis/pair") else None), path


def test_each_operation_documents_its_real_statuses_and_the_error_body(doc):
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error", "message"]
    for (path, method), (success, errors) in OPERATIONS.items():
        responses = doc["paths"][path][method]["responses"]
        extra = {204} if path == "/api/jarvis/supervisor/events" else {206} if "/files/" in path else set()  # no body / a byte range
        extra |= {201} if (path, method) == ("/api/jarvis/memory/file", "put") else set()  # created, or replaced
        extra |= {429} | ({403} if method in ("post", "put", "patch", "delete") else set())  # docs.refine, every one
        assert {int(code) for code in responses} == {success, *errors, 500} | extra, path
        for code in (*errors, *(extra & {403, 429}), 500):
            if code == 202 or (path, code) in JSONRPC_ERRORS:
                continue
            schema = responses[str(code)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, code)
    accepted = doc["paths"]["/api/jarvis/supervisor"]["post"]["responses"]["202"]
    assert accepted["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RunAccepted"}
    assert set(doc["components"]["schemas"]["RunAccepted"]["properties"]) == {
        "run_id", "thread_id", "status", "stream_url", "estimated_duration_seconds"}


def test_swagger_ui_is_served_from_the_package_without_a_cdn():
    status, html, raw = call("GET", "/api/docs")
    assert status == 200 and raw["headers"]["Content-Type"].startswith("text/html")
    assert "SwaggerUIBundle" in html and "<script src=" not in html and "stylesheet' type='text/css' href=" not in html
    assert "cdn" not in html.lower().split("<script>")[0]
    status, spec, _ = call("GET", "/api/docs?format=json")
    assert status == 200 and spec["info"]["title"] == "Zerg Jarvis API" and "bearerAuth" in spec["components"]["securitySchemes"]


# --- the typed parameters at work (Lambda path, and the local server's live stream) ----------

@pytest.fixture
def token(runtime_env, pool):
    runtime_env()
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("alice"))
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200
    return body["token"]


@pytest.mark.parametrize(("path", "message"), [
    ("/api/jarvis/workers?limit=500", "limit: Input should be less than or equal to 200, got '500'"),
    ("/api/jarvis/workers?limit=0", "limit: Input should be greater than or equal to 1, got '0'"),
    ("/api/jarvis/workers?limit=ten", "limit: Input should be a valid integer, unable to parse string as an integer, got 'ten'"),
    ("/api/jarvis/workers?status=done", "status: Input should be 'queued', 'running', 'success', 'failed', 'timeout' or 'cancelled', got 'done'"),
    ("/api/jarvis/workers?since_hours=9000", "since_hours: Input should be less than or equal to 8784, got '9000'"),
    ("/api/jarvis/workers?before_id=x", "before_id: Input should be a valid integer, unable to parse string as an integer, got 'x'"),
    ("/api/jarvis/thread?limit=201", "limit: Input should be less than or equal to 200, got '201'"),
    ("/api/jarvis/runs/abc", "run_id: Input should be a valid integer, unable to parse string as an integer, got 'abc'"),
    ("/api/jarvis/runs/0", "run_id: Input should be greater than or equal to 1, got '0'"),
    ("/api/jarvis/runs/99999999999999999999", "run_id: Input should be less than or equal to 9007199254740991, got '99999999999999999999'"),
    ("/api/jarvis/workers/abc", "job_id: Input should be a valid integer, unable to parse string as an integer, got 'abc'"),
    ("/api/jarvis/workers/1.5/files/result.txt", "job_id: Input should be a valid integer, unable to parse string as an integer, got '1.5'"),
    ("/api/jarvis/supervisor/events", "run_id: Field required"),
    ("/api/jarvis/supervisor/events?run_id=1&last_event_id=-1", "last_event_id: Input should be greater than or equal to 0, got '-1'"),
])
def test_a_bad_parameter_gets_422_naming_it_and_the_value(token, path, message):
    status, body, _ = call("GET", path, token=token)
    assert (status, body) == (422, {"error": "validation_error", "message": message})


def test_blank_query_parameters_count_as_absent_as_before(token):
    status, body, _ = call("GET", "/api/jarvis/workers?limit=&status=&since_hours=&before_id=&run_id=", token=token)
    assert (status, body) == (200, {"workers": [], "next_before_id": None})
    assert call("GET", "/api/jarvis/thread?limit=&before_id=", token=token)[0] == 200


def test_credentials_are_checked_before_parameters_the_body_before_credentials(token):
    for method, path in (("GET", "/api/jarvis/runs/abc"), ("GET", "/api/jarvis/workers?limit=999"),
                         ("POST", "/api/jarvis/runs/x/cancel"), ("GET", "/api/jarvis/workers/x/files/a/b"),
                         ("GET", "/api/jarvis/supervisor/events?run_id=abc")):
        status, body, _ = call(method, path)
        assert (status, body) == (401, {"error": "unauthorized", "message": body["message"]}), path
        assert "missing credentials" in body["message"]
        assert call(method, path, headers={"authorization": "Bearer not.a.token"})[1]["message"] == "invalid token"
    # As before: a malformed body is reported whoever sends it.
    assert call("POST", "/api/jarvis/supervisor", {})[:2] == (422, {"error": "validation_error", "message": "task: Field required"})
    # The Idempotency-Key keeps its own 400.
    status, body, _ = call("POST", "/api/jarvis/supervisor", {"task": "t"}, token=token, headers={"idempotency-key": "k" * 201})
    assert (status, body["message"]) == (400, "Idempotency-Key must be 1-200 characters")


def test_the_local_live_stream_checks_its_parameters_as_the_lambda_route_does(api_server, pool):
    base, _ = api_server
    with pool.connection() as conn:
        owner = create_owner(conn, unique_name("carol"))
    token = httpx.post(f"{base}/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    for query, headers in (("run_id=abc", {}), ("", {}), ("run_id=0", {}), ("run_id=1&last_event_id=x", {}),
                           ("run_id=1", {"Last-Event-ID": "-3"}),
                           ("run_id=1&last_event_id=x", {"Last-Event-ID": "3"}),  # the header wins, both are checked
                           ("run_id=1&run_id=2", {})):
        url = f"/api/jarvis/supervisor/events?{query}"
        live = httpx.get(f"{base}{url}", headers={**auth, **headers})
        lambda_status, lambda_body, _ = call("GET", url, token=token, headers={k.lower(): v for k, v in headers.items()})
        assert (live.status_code, live.json()) == (lambda_status, lambda_body) and lambda_status == 422, (url, live.text)
    assert httpx.get(f"{base}/api/jarvis/supervisor/events?run_id=abc").status_code == 401
    assert httpx.get(f"{base}/api/jarvis/supervisor/events?run_id=12345", headers=auth).json()["message"] == "run 12345 not found"


def test_building_the_app_does_not_import_the_openapi_models():
    """Cold start: Powertools' OpenAPI models (~0.3 s) load only when a document is asked for."""
    import subprocess
    import sys

    code = ("import sys, functions.events.handler; from zerg.api.app import build_app; build_app(); "
            "print('aws_lambda_powertools.event_handler.openapi.models' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_bodiless_answers_document_no_body_and_the_event_stream_documents_each_event(doc):
    events = doc["paths"]["/api/jarvis/supervisor/events"]["get"]["responses"]
    assert events["204"]["content"] == {} and doc["paths"]["/api/jarvis/hosts/{alias}"]["delete"]["responses"]["204"]["content"] == {}
    assert events["200"]["content"]["text/event-stream"]["schema"] == {"$ref": "#/components/schemas/RunEventFrame"}
    assert set(doc["components"]["schemas"]["RunEventFrame"]["properties"]) == {"id", "event", "data"}
    files = doc["paths"]["/api/jarvis/workers/{job_id}/files/{path}"]["get"]["responses"]["200"]["content"]
    assert set(files) == {"text/plain", "application/json", "application/x-ndjson"}


# --- what the document says beyond the annotations (zerg.api.docs.refine), held to it -------------

def test_no_parameter_is_nullable_a_blank_query_is_allowed_and_every_change_can_be_refused_403(doc):
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                assert {"type": "null"} not in parameter["schema"].get("anyOf", []), (path, parameter["name"])
                if parameter["in"] == "query":
                    assert parameter.get("allowEmptyValue", False) == (not parameter["required"]), (path, parameter)
            assert "429" in operation["responses"], path
            assert ("403" in operation["responses"]) == (method in ("post", "put", "patch", "delete")), (path, method)
    events = {p["name"]: p for p in doc["paths"]["/api/jarvis/events"]["get"]["parameters"]}
    assert {"type": "string", "maxLength": 0} in events["last-event-id"]["schema"]["anyOf"]  # blank: absent


def test_a_wrong_method_gets_405_with_exactly_the_documented_methods(token, doc):
    """Including a concrete path beside a templated one: /contacts/verify has POST only, although
    DELETE /contacts/{contact_id} matches its shape (it answered Allow: DELETE, POST)."""
    for path, operations in doc["paths"].items():
        concrete = path
        for name in ("{job_id}", "{run_id}", "{device_id}", "{fact_id}", "{schedule_id}", "{contact_id}",
                     "{subscription_id}"):
            concrete = concrete.replace(name, "1")
        concrete = (concrete.replace("{session_id}", "00000000-0000-4000-8000-000000000000")
                    .replace("{alias}", "web").replace("{agent}", "worker").replace("{path}", "a.txt")
                    .replace("{folder}", "tool_calls").replace("{name}", "a.txt"))
        documented = sorted(m.upper() for m in operations)
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - set(documented):
            status, body, raw = call(method, concrete, token=token)
            assert (status, body["error"], raw["headers"].get("Allow")) == (
                405, "method_not_allowed", ", ".join(documented)), (method, concrete, body)


def test_a_query_parameter_given_twice_is_refused_as_under_api_gateway(token):
    """zerg serve keeps the last value of a repeated parameter; API Gateway joins them with commas.
    Both refuse it now, even when the last one is blank (which alone would mean absent)."""
    for query in ("limit=5&limit=6", "limit=5&limit=", "status=running&status=failed"):
        status, body, _ = call("GET", f"/api/jarvis/runs?{query}", token=token)
        assert (status, body["error"]) == (422, "validation_error"), (query, body)
        assert body["message"].startswith(query.split("=")[0] + ":"), body


def test_numbers_and_booleans_in_a_body_are_json_s_own(token):
    """JSON Schema's integer takes 5.0 and never true or "5"; a boolean is only true or false."""
    def patch(body):
        return call("PATCH", "/api/jarvis/policy", body, token=token)[:2]

    assert patch({"daily_sms_limit": 5.0})[0] == 200 and patch({"daily_sms_limit": 4})[1]["daily_sms_limit"] == 4
    for bad in ({"daily_sms_limit": True}, {"daily_sms_limit": "5"}, {"daily_sms_limit": 5.5},
                {"escalation_every_s": False}, {"daily_usd_cap": "5"}, {"daily_usd_cap": True}):
        status, body = patch(bad)
        assert (status, body["error"]) == (422, "validation_error"), (bad, body)
    assert patch({"daily_usd_cap": 2.5})[1]["daily_usd_cap"] == 2.5 and patch({"daily_usd_cap": None})[0] == 200
    status, body, _ = call("PUT", "/api/jarvis/agents/worker", {"max_tokens": 4741.0}, token=token)
    assert (status, body["max_tokens"]) == (200, 4741)
    assert call("PUT", "/api/jarvis/agents/worker", {"max_tokens": True}, token=token)[0] == 422
    status, body, _ = call("POST", "/api/jarvis/schedules",
                           {"name": "n", "task": "t", "rate": "1 hour", "enabled": "true"}, token=token)
    assert (status, body["message"]) == (422, "enabled: Input should be a valid boolean")
