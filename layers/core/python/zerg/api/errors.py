"""Errors at the HTTP edge: always ``{"error", "message"}`` JSON with a precise status, never a trace."""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler import Response


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


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


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")
