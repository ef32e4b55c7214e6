"""Errors at the HTTP edge: always ``{"error", "message"}`` JSON with a precise status, never a trace."""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler import Response


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message
        self.headers = headers or {}


def error_body(error: str, message: str) -> str:
    """The one shape of every error body."""
    return json.dumps({"error": error, "message": message})


def error_response(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type="application/json",
        body=error_body(error, message),
        headers=headers or {},
    )


# A client told to come back after this many seconds: about one pool wait plus a reconnect.
RETRY_AFTER_S = 5


def unavailable(exc: BaseException) -> ApiError:
    """The one mapping of "the database cannot be reached" (``psycopg.OperationalError``: a refused
    or dropped connection, ``PoolTimeout``, the embedded server not starting) to the HTTP answer:
    503 with ``Retry-After``. Logged as a warning without a trace: an outage, not a bug."""
    from zerg import observability

    observability.logger().warning("database unavailable", extra={"reason": f"{type(exc).__name__}: {exc}"[:500]})
    return ApiError(503, "unavailable", "the database is unreachable; try again shortly",
                    headers={"Retry-After": str(RETRY_AFTER_S)})


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")
