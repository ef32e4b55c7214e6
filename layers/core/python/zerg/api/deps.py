"""What every route needs: the runtime, the authenticated owner, typed parameters, JSON responses.

Routes take ``Owner`` and ``Rt`` as Powertools dependencies, and their path, query and header
parameters as typed ``Path``/``Query``/``Header`` annotations, so the OpenAPI document describes the
API that runs.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler import Depends, Response
from aws_lambda_powertools.event_handler.request import Request

from zerg.api.errors import ApiError
from zerg.auth import COOKIE, AuthError, Caller, verify_token
from zerg.runtime import Runtime
from zerg.wiring import get_runtime

# Every route needs the session (bearer token or cookie) except these: a route in PUBLIC_PATHS
# declares ``security=PUBLIC`` so the OpenAPI document says so too.
PUBLIC: list[dict[str, list[str]]] = [{}]
PUBLIC_PATHS = frozenset({"/api/jarvis/auth", "/api/jarvis/pair"})
# Ids are bigint: a larger number is the client's mistake (422), not the database's (500). The bound
# is JSON's largest exact integer (2**53 - 1, JavaScript's Number.MAX_SAFE_INTEGER): the document
# gives bounds as JSON numbers, and a client that reads 2**62 as a double gets 4611686018427388000,
# which is above it.
MAX_ID = 2**53 - 1


def runtime() -> Runtime:
    return get_runtime()


def bearer(headers: dict[str, str], cookies: list[str] | None) -> str | None:
    """The session token from ``Authorization: Bearer`` or the session cookie."""
    auth = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return session_cookie(cookies)


def session_cookie(cookies: list[str] | None) -> str | None:
    """The session cookie's value among the request's cookies (API Gateway v2 ``cookies``)."""
    for cookie in cookies or []:
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return value
    return None


def caller_of(event: Any) -> Caller:
    """The owner and live session of the request's token (401 otherwise). ``event`` is the raw
    API Gateway v2 event or Powertools' wrapper of it."""
    rt = runtime()
    try:
        return verify_token(rt.settings, bearer(event.get("headers") or {}, event.get("cookies")), rt.pool)
    except AuthError as exc:
        raise ApiError(401, "unauthorized", str(exc)) from None


def owner_of(event: Any) -> int:
    """The owner the request's verified token names (401 otherwise)."""
    return caller_of(event).owner_id


def owner(request: Request) -> int:
    """Dependency: the authenticated owner of this request (401 otherwise)."""
    return owner_of(request.resolved_event)


def session(request: Request) -> Caller:
    """Dependency: the owner and session of this request (401 otherwise)."""
    return caller_of(request.resolved_event)


Owner = Annotated[int, Depends(owner)]
Session = Annotated[Caller, Depends(session)]
Rt = Annotated[Runtime, Depends(runtime)]


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None, cookies: list | None = None) -> Response:
    return Response(
        status_code=status, content_type="application/json",
        body=json.dumps(body, default=_default), headers=headers or {}, cookies=cookies or [],
    )
