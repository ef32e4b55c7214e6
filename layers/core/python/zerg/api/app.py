"""The API application: routers, error mapping, OpenAPI. Built once per process."""

from __future__ import annotations

import json
from functools import lru_cache

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from zerg.api.errors import ApiError, error_response

TITLE = "Zerg Jarvis API"


def _validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "bad_request", "request body is not valid JSON"
    parts = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", []) if p not in ("body",)]
        parts.append(f"{'.'.join(loc) or 'body'}: {e.get('msg', 'invalid')}")
    return 422, "validation_error", "; ".join(parts)


@lru_cache(maxsize=1)
def build_app() -> APIGatewayHttpResolver:
    from zerg.api.routes import auth, runs, thread, workers

    app = APIGatewayHttpResolver(enable_validation=True)
    for module in (auth, runs, workers, thread):
        app.include_router(module.router)

    @app.get("/api/openapi.json", include_in_schema=False)
    def openapi():
        return Response(200, "application/json", app.get_openapi_json_schema(title=TITLE, version="1.0.0"))

    @app.exception_handler(ApiError)
    def api_error(exc: ApiError) -> Response:
        return error_response(exc.status, exc.error, exc.message)

    @app.exception_handler(RequestValidationError)
    def validation_error(exc: RequestValidationError) -> Response:
        return error_response(*_validation_message(exc))

    @app.not_found
    def not_found(exc: Exception) -> Response:
        event = app.current_event
        method, path = event.http_method.upper(), event.path
        allowed = sorted({r.method for r in app._static_routes + app._dynamic_routes  # noqa: SLF001
                          if r.rule.match(path) and r.method != method} - {"OPTIONS"})
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


def openapi_document() -> dict:
    return json.loads(build_app().get_openapi_json_schema(title=TITLE, version="1.0.0"))
