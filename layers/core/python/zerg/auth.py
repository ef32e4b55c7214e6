"""Device authentication: a device secret buys a 7-day HS256 session token.

Invariants:
- The owner comes from a verified token only; every API read is scoped by that owner.
- Device secrets are stored hashed (:mod:`zerg.owners`); tokens carry only the owner id.
- The signing secret comes from ``ZERG_JWT_SECRET``, or Secrets Manager (``ZERG_JWT_SECRET_ARN``)
  on AWS, or — locally, when neither is set — a random secret created once under
  ``ZERG_DATA_DIR`` (mode 0600). It never reaches logs or responses.
"""

from __future__ import annotations

import os
import secrets
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

from zerg.config import Settings

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


def issue_token(settings: Settings, owner_id: int, now: datetime | None = None) -> tuple[str, datetime]:
    import jwt

    now = now or datetime.now(timezone.utc)
    expires = now + TOKEN_TTL
    token = jwt.encode({"sub": str(owner_id), "iat": now, "exp": expires}, jwt_secret(settings), algorithm=_ALG)
    return token, expires


def verify_token(settings: Settings, token: str | None) -> int:
    """The owner id in a valid token, or :class:`AuthError` saying what is wrong."""
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
    return owner_id
