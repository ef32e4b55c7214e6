"""Device authentication: a device secret buys a 7-day HS256 token for a revocable session.

Invariants:
- The owner comes from a verified token only; every API read is scoped by that owner.
- Device secrets are stored hashed (:mod:`zerg.identity.devices`). A token carries the owner id
  (``sub``) and its session id (``sid``, also ``jti``); nothing else.
- A token is accepted only while its signature and ``exp`` hold *and* its session row says it is
  live (not revoked, not expired, its device not revoked): :func:`verify_token` reads that row on
  every request, by primary key, so a logout, a revoked session or a rotated device secret shuts
  the token out from the very next request.
- The signing secret comes from ``ZERG_JWT_SECRET``, or Secrets Manager (``ZERG_JWT_SECRET_ARN``)
  on AWS, or — locally, when neither is set — a random secret created once under
  ``ZERG_DATA_DIR`` (mode 0600). It never reaches logs or responses.
"""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from zerg.config import Settings

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

TOKEN_TTL = timedelta(days=7)
COOKIE = "zerg_session"
_ALG = "HS256"
_cache: dict[str, str] = {}
_lock = threading.Lock()


class AuthError(Exception):
    """Missing, invalid or expired credentials (HTTP 401)."""


def jwt_secret(settings: Settings) -> str:
    if settings.jwt_secret:
        return settings.jwt_secret.get_secret_value()
    key = settings.jwt_secret_arn or str(settings.data_dir / "jwt-secret")
    with _lock:
        if key not in _cache:
            _cache[key] = _secret_from_arn(key) if settings.jwt_secret_arn else _local_secret(Path(key))
    return _cache[key]


def _secret_from_arn(arn: str) -> str:
    import boto3

    return boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]


def _local_secret(path: Path) -> str:
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    try:
        with open(path, "x", opener=lambda p, f: os.open(p, f, 0o600)) as fh:
            fh.write(secrets.token_urlsafe(48))
    except FileExistsError:
        pass
    return path.read_text().strip()


@dataclass(frozen=True)
class Caller:
    """Who a verified token speaks for."""

    owner_id: int
    session_id: UUID
    device_id: int


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: datetime
    owner_id: int
    session_id: UUID
    device_id: int


def login(conn: "Connection", settings: Settings, device_secret: str) -> IssuedToken | None:
    """A new session and its token for a live device's secret; None for an unknown or revoked one."""
    import jwt

    from zerg.identity import devices, sessions

    device = devices.device_by_secret(conn, device_secret)
    if device is None:
        return None
    session = sessions.create_session(conn, device["owner_id"], device["id"], TOKEN_TTL)
    devices.touch(conn, device["id"])
    sid = str(session.session_id)
    claims = {"sub": str(device["owner_id"]), "sid": sid, "jti": sid, "iat": session.issued_at, "exp": session.expires_at}
    token = jwt.encode(claims, jwt_secret(settings), algorithm=_ALG)
    return IssuedToken(token, session.expires_at, device["owner_id"], session.session_id, device["id"])


def verify_token(settings: Settings, token: str | None, pool: "ConnectionPool") -> Caller:
    """Who a valid token speaks for, or :class:`AuthError` saying what is wrong."""
    owner_id, session_id = _claims(settings, token)
    return Caller(owner_id, session_id, _check_session(pool, owner_id, session_id))


def token_owner(settings: Settings, token: str | None) -> int | None:
    """The owner a token's signature and ``exp`` vouch for, without reading its session row (no
    database, ~0.1 ms): whom ``zerg serve`` charges a request to before handling it. None for a
    missing, forged, malformed or expired token. Not an authentication: :func:`verify_token` is."""
    try:
        return _claims(settings, token)[0]
    except AuthError:
        return None


def _claims(settings: Settings, token: str | None) -> tuple[int, UUID]:
    """(owner id, session id) of a token whose signature and ``exp`` hold; :class:`AuthError` otherwise."""
    import jwt

    if not token:
        raise AuthError("missing credentials: send 'Authorization: Bearer <token>' from POST /api/jarvis/auth")
    try:
        claims = jwt.decode(token, jwt_secret(settings), algorithms=[_ALG], options={"require": ["exp", "sub"]})
    except jwt.ExpiredSignatureError:
        raise AuthError("token expired: authenticate again") from None
    except jwt.InvalidTokenError:
        raise AuthError("invalid token") from None
    try:
        owner_id = int(claims["sub"])
    except (TypeError, ValueError):
        raise AuthError("invalid token") from None
    if owner_id <= 0:
        raise AuthError("invalid token")
    if "sid" not in claims:
        raise AuthError("invalid token: it names no session (issued before sessions existed); authenticate again")
    try:
        session_id = UUID(str(claims["sid"]))
    except ValueError:
        raise AuthError("invalid token") from None
    return owner_id, session_id


def still_valid(pool: "ConnectionPool", caller: Caller) -> bool:
    """Whether the caller's session is still live (a live stream asks again while it runs)."""
    try:
        _check_session(pool, caller.owner_id, caller.session_id)
    except AuthError:
        return False
    return True


def _check_session(pool: "ConnectionPool", owner_id: int, session_id: UUID) -> int:
    """The session's device id if the session is live; :class:`AuthError` otherwise."""
    from zerg.identity import sessions

    with pool.connection() as conn:
        state = sessions.session_state(conn, session_id)
        if state is None or state["owner_id"] != owner_id:
            raise AuthError("unknown session: authenticate again")
        if state["device_revoked"]:  # said first: a new session with the same secret would not help
            raise AuthError("this device's secret was rotated or revoked: authenticate with a current device secret")
        if state["revoked"]:
            raise AuthError("session revoked: authenticate again")
        if state["expired"]:
            raise AuthError("token expired: authenticate again")
        if state["stale"]:  # a hint for the owner's session list: at most one write a minute
            _touch(conn, session_id, state["device_id"])
    return state["device_id"]


def _touch(conn: "Connection", session_id: UUID, device_id: int) -> None:
    """Record the use; best effort, never the reason a request fails."""
    from psycopg import Error

    from zerg import observability
    from zerg.identity import devices, sessions

    try:
        with conn.transaction():
            sessions.touch(conn, session_id)
            devices.touch(conn, device_id)
    except Error as exc:
        observability.logger().warning("session last_used_at not recorded", extra={"reason": f"{type(exc).__name__}: {exc}"})
