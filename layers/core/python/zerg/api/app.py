"""The API application: routers, error mapping, the OpenAPI routes (``docs``). Built once per process.

Invariants:
- Every answer that is not a success is ``{"error", "message"}`` JSON (``errors.error_body``).
- A state-changing request that another page in the owner's browser may have forged (the session
  cookie without the same-origin proof) is refused with 403 before routing, and every answer
  carries ``nosniff`` and no-framing headers (:mod:`zerg.api.security`).
- Credentials are checked before parameters: a request without a valid session gets 401 even when
  its path, query or headers are also wrong (Powertools validates before the ``Owner`` dependency
  runs, so the validation handler asks for the owner first). A malformed body is reported first.
- A route's body is UTF-8 JSON of bounded depth without NUL characters before its model sees it
  (``body.BodyValidation``): 415, 400 or 422 otherwise, never a 500.
- An unreachable database is 503 ``unavailable`` with ``Retry-After`` on every route, whether a
  dependency (the session check) or the route itself hit it (``errors.unavailable``), never 500.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from zerg.api.errors import ApiError, error_body, error_response, unavailable
from zerg.api.query import without_blanks
from zerg.api.resolver import ConcurrentResolver
from zerg.validation import PARAMETER_SOURCES, validation_message


@lru_cache(maxsize=1)
def build_app() -> APIGatewayHttpResolver:
    # Imported here, not at the top: the handler module's import is the cold start (bench/api.py).
    from psycopg import OperationalError

    from zerg.api import docs
    from zerg.api.body import BodyValidation
    from zerg.api.deps import PUBLIC_PATHS, owner_of
    from zerg.api.routes import (agents, approvals, auth, contacts, facts, hosts, inbound, inbox, jarvis, mcp,
                                 mcp_servers, memory, notifications, push, runs, schedules, sessions, thread, usage,
                                 workers)

    app = ConcurrentResolver(enable_validation=True)  # one per process; prepare() it to resolve in threads
    # Powertools builds each route's middleware stack on its first call, from this attribute.
    app._request_validation_middleware = BodyValidation()  # noqa: SLF001
    for module in (auth, runs, workers, thread, sessions, hosts, memory, facts, schedules, contacts, notifications,
                   inbox, inbound, agents, usage, jarvis, push, approvals, mcp, mcp_servers):
        app.include_router(module.router)

    @app.get("/api/openapi.json", include_in_schema=False)
    def openapi():
        return Response(200, "application/json", docs.openapi_json(app))

    @app.get(docs.DOCS_PATH, include_in_schema=False)
    def swagger_ui():
        return docs.swagger_ui(app, app.current_event.query_string_parameters or {})

    @app.exception_handler(ApiError)
    def api_error(exc: ApiError) -> Response:
        return error_response(exc.status, exc.error, exc.message, headers=exc.headers)

    @app.exception_handler(OperationalError)
    def database_unavailable(exc: OperationalError) -> Response:
        return api_error(unavailable(exc))

    @app.exception_handler(RequestValidationError)
    def validation_error(exc: RequestValidationError) -> Response:
        errors = exc.errors()
        event = app.current_event
        if event.path not in PUBLIC_PATHS and any(e.get("loc", ("",))[0] in PARAMETER_SOURCES for e in errors):
            try:
                owner_of(event)
            except ApiError as denied:
                return api_error(denied)
            except OperationalError as exc:
                return database_unavailable(exc)
        return error_response(*validation_message(errors))

    @app.not_found
    def not_found(exc: Exception) -> Response:
        event = app.current_event
        method, path = event.http_method.upper(), event.path
        allowed = [m for m in allowed_methods(app, path) if m != method]
        if allowed:
            return error_response(405, "method_not_allowed", f"{method} is not allowed on {path}",
                                  headers={"Allow": ", ".join(allowed)})
        return error_response(404, "not_found", f"no route {method} {path}")

    @app.exception_handler(Exception)
    def unexpected(exc: Exception) -> Response:
        from aws_lambda_powertools import Logger

        Logger(service="zerg-api").exception("unhandled error")
        return error_response(500, "internal_error", "internal error; the request id is in the logs")

    return app


def allowed_methods(app: APIGatewayHttpResolver, path: str) -> list[str]:
    """The methods of ``path``: those of the routes it names exactly when there are any (a concrete
    path comes before a templated one, as in OpenAPI: /contacts/verify is not the contact "verify"),
    else those of every route whose template it matches."""
    static = {r.method for r in app._static_routes if r.rule.match(path)}  # noqa: SLF001
    found = static or {r.method for r in app._dynamic_routes if r.rule.match(path)}  # noqa: SLF001
    return sorted(found - {"OPTIONS"})


def _answer(exc: ApiError) -> dict[str, Any]:
    """An error in the resolver's answer shape, for what is refused before routing."""
    return {"statusCode": exc.status, "body": error_body(exc.error, exc.message), "isBase64Encoded": False,
            "headers": {"Content-Type": "application/json", **exc.headers}, "cookies": []}


def resolve(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Answer one API Gateway HTTP API (v2) event: a request another origin may have forged is
    refused before routing (``security.refusal``), and so is a method a concrete path does not have
    (Powertools would hand it to a templated route: DELETE /contacts/verify to DELETE /contacts/{id});
    every answer carries the security headers."""
    from zerg.api.security import refusal, with_security_headers
    from zerg.wiring import get_runtime

    denied = refusal(event, get_runtime().settings.public_url)
    if denied is not None:
        return with_security_headers(_answer(denied))
    app = build_app()
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "")).upper()
    path = event.get("rawPath") or ""
    static = {r.method for r in app._static_routes if r.rule.match(path)}  # noqa: SLF001
    if static and method not in static:
        allowed = ", ".join(m for m in allowed_methods(app, path) if m != method)
        return with_security_headers(_answer(ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}",
                                                      headers={"Allow": allowed})))
    return with_security_headers(app.resolve(without_blanks(event), context))


def openapi_document() -> dict:
    from zerg.api.docs import openapi_json

    return json.loads(openapi_json(build_app()))
