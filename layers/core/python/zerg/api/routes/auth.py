"""Sessions in and out: POST /api/jarvis/auth (a device secret for a 7-day session token, body and
HttpOnly cookie), POST /api/jarvis/logout (revoke the calling session), POST /api/jarvis/pair (a
one-time pairing code for a new device's own secret)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.shared.cookies import Cookie, SameSite
from pydantic import BaseModel, ConfigDict, Field

from zerg.api.deps import PUBLIC, Rt, Session, json_response
from zerg.api.errors import ApiError
from zerg.api.models import AuthToken, PairedDevice, SessionRevoked, responses
from zerg.auth import COOKIE, TOKEN_TTL, login

router = Router()


class AuthBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    device_secret: str = Field(min_length=1, max_length=200)


# The shape pairing.normalise accepts, as spaces and dashes around it (it also drops other
# whitespace): the document states it, the route answers 400 with pairing.SHAPE otherwise.
CODE_PATTERN = r"^[ -]*(?:[A-HJKMNP-Za-hjkmnp-z2-9][ -]*){10}$"


class PairBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(min_length=1, max_length=40, json_schema_extra={"pattern": CODE_PATTERN},
                      description="As `zerg owners pair` printed it: 10 of A-Z and 2-9 without I, L and O; case, "
                                  "dashes and spaces are ignored")
    device_name: str = Field(min_length=1, max_length=200, json_schema_extra={"format": "device-name"},
                             description="What to call this device: 1-64 printable characters once trimmed")


def _cookie(token: str, max_age: int) -> Cookie:
    return Cookie(name=COOKIE, value=token, path="/api", secure=True, http_only=True,
                  same_site=SameSite.STRICT_MODE, max_age=max_age)


@router.post("/api/jarvis/auth", summary="Exchange a device secret for a session token", security=PUBLIC,
             responses=responses(200, "A session token (also set as the HttpOnly session cookie)", AuthToken, 400, 401, 415))
def authenticate(body: AuthBody, rt: Rt):
    with rt.pool.connection() as conn:
        issued = login(conn, rt.settings, body.device_secret)
    if issued is None:
        raise ApiError(401, "unauthorized", "unknown device secret")
    return json_response(
        {"token": issued.token, "token_type": "bearer", "expires_at": issued.expires_at, "owner_id": issued.owner_id,
         "session_id": issued.session_id, "device_id": issued.device_id},
        cookies=[_cookie(issued.token, int(TOKEN_TTL.total_seconds()))],
    )


@router.post("/api/jarvis/logout", summary="Revoke the calling session (its token stops working at once)",
             responses=responses(200, "The session is revoked and the session cookie cleared", SessionRevoked, 401))
def logout(caller: Session, rt: Rt):
    from zerg.identity import sessions

    with rt.pool.connection() as conn:
        revoked = sessions.revoke_session(conn, caller.owner_id, caller.session_id)
    return json_response(revoked, cookies=[_cookie("", 0)])


@router.post("/api/jarvis/pair", summary="Exchange a one-time pairing code for a new device's secret",
             security=PUBLIC,
             responses=responses(201, "The new device and its secret (shown once)", PairedDevice, 400, 401, 409, 415))
def pair(body: PairBody, rt: Rt):
    from zerg.identity import names, pairing

    code = pairing.normalise(body.code)
    if code is None:
        raise ApiError(400, "bad_request", pairing.SHAPE)
    try:
        with rt.pool.connection() as conn:
            device = pairing.redeem(conn, code, body.device_name)
    except names.NameTaken as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    except names.InvalidName as exc:
        raise ApiError(422, "validation_error", f"device_name: {exc}") from None
    if device is None:
        raise ApiError(401, "unauthorized", "unknown, expired or already used pairing code")
    return json_response({"owner_id": device.owner_id, "device_id": device.device_id, "device_name": device.name,
                          "device_secret": device.secret}, status=201)
