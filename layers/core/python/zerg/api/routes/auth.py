"""POST /api/jarvis/auth: a device secret for a 7-day session token (body and HttpOnly cookie)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.shared.cookies import Cookie, SameSite
from pydantic import BaseModel, ConfigDict, Field

from zerg.api.deps import PUBLIC, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import AuthToken, responses
from zerg.auth import COOKIE, TOKEN_TTL, issue_token
from zerg.owners import owner_by_secret

router = Router()


class AuthBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    device_secret: str = Field(min_length=1, max_length=200)


@router.post("/api/jarvis/auth", summary="Exchange a device secret for a session token", security=PUBLIC,
             responses=responses(200, "A session token (also set as the HttpOnly session cookie)", AuthToken, 400, 401))
def authenticate(body: AuthBody, rt: Rt):
    with rt.pool.connection() as conn:
        owner_id = owner_by_secret(conn, body.device_secret)
    if owner_id is None:
        raise ApiError(401, "unauthorized", "unknown device secret")
    token, expires = issue_token(rt.settings, owner_id)
    cookie = Cookie(name=COOKIE, value=token, path="/api", secure=True, http_only=True,
                    same_site=SameSite.LAX_MODE, max_age=int(TOKEN_TTL.total_seconds()))
    return json_response(
        {"token": token, "token_type": "bearer", "expires_at": expires, "owner_id": owner_id}, cookies=[cookie]
    )
