"""What every route needs: the runtime, the authenticated owner, JSON responses."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.event_handler import Response

from zerg.api.errors import ApiError
from zerg.auth import COOKIE, AuthError, verify_token
from zerg.runtime import Runtime, get_runtime


def runtime() -> Runtime:
    return get_runtime()


def bearer(headers: dict[str, str], cookies: list[str] | None) -> str | None:
    """The session token from ``Authorization: Bearer`` or the session cookie."""
    auth = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for cookie in cookies or []:
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return value
    return None


def owner_of(event: Any) -> int:
    """The owner the request's verified token names (401 otherwise). ``event`` is the raw
    API Gateway v2 event or Powertools' wrapper of it."""
    try:
        return verify_token(runtime().settings, bearer(event.get("headers") or {}, event.get("cookies")))
    except AuthError as exc:
        raise ApiError(401, "unauthorized", str(exc)) from None


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None, cookies: list | None = None) -> Response:
    return Response(
        status_code=status, content_type="application/json",
        body=json.dumps(body, default=_default), headers=headers or {}, cookies=cookies or [],
    )


def int_param(value: str | None, name: str, *, default: int | None = None, lo: int = 1, hi: int = 2**62) -> int:
    if value is None or value == "":
        if default is None:
            raise ApiError(422, "validation_error", f"{name}: required")
        return default
    try:
        number = int(value)
    except ValueError:
        raise ApiError(422, "validation_error", f"{name}: must be an integer, got {value!r}") from None
    if not lo <= number <= hi:
        raise ApiError(422, "validation_error", f"{name}: must be between {lo} and {hi}")
    return number
