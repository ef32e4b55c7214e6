"""Web Push (seed 4.4 "Push notification"): the deployment's VAPID key, what a subscription may be,
and :func:`notify`, the one way Zerg pushes to the owner's browsers.

Invariants:
- The VAPID key pair is made once per deployment (:mod:`zerg.notify.push_keys`: insert if absent,
  read back) and its private key is kept only sealed (:meth:`zerg.sealing.Sealer.seal_deployment`).
  The public key needs no unsealing (``GET /api/jarvis/push/key``).
- An endpoint is a URL the server POSTs to, so it is checked as one (:func:`endpoint_refusal`) when
  it is stored and again right before each send: ``https://`` only, no credentials in it, and every
  address its host resolves to must pass the egress policy (:func:`zerg.egress.refusal`).
  ``ZERG_PUSH_ALLOW_LOOPBACK`` (tests; refused on Lambda) also lets ``http://`` loopback through.
  Redirects are never followed and the environment's proxies are not used.
- The browser's keys are checked before they are stored: ``p256dh`` a base64url uncompressed P-256
  point on the curve (65 bytes), ``auth`` 16 bytes.
- Each subscription gets one ``notifications`` row per push (channel ``push``; the address is the
  endpoint's origin only, never its path or the keys): reserved against the owner's daily push limit
  first (``suppressed`` past it), written in flight, then ``sent`` or ``failed`` with the reason. A
  404 or 410 from the push service means the subscription is gone: it is deleted. Any other failure
  is counted on the subscription. Nothing raises to the caller for a push service's failure.
- The payload is JSON ``{title, body, url, severity, run_id, tag}`` of at most :data:`PAYLOAD_MAX`
  bytes (the body, then the title, is cut to fit). Headline and body come from a model's work: they
  are data, shown by the service worker as text. A pending approval's push also carries
  ``approval_id`` and ``actions`` (Approve / Deny): the service worker answers with the session
  cookie through ``POST /api/jarvis/approvals/{id}/approve|deny``, the same answer as every channel.
- No subscription: no row and no send (push is on "when the owner has a subscription").
- Bounded: each POST has ZERG_PUSH_TIMEOUT_S; an owner's subscriptions are pushed a few at a time
  in parallel (:data:`PARALLEL_SENDS`), rows returned in subscription order.
- Residual risk, said plainly: the host is resolved and checked right before the POST, but the HTTP
  client resolves it again to connect (a DNS answer that changes in between is not caught).
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.notify import limits, notifications, push_keys, push_subscriptions
from zerg.notify.deliver import log_row
from zerg.notify.policy import get_policy
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from zerg.config import Settings
    from zerg.runtime import Runtime

PAYLOAD_MAX = 3072  # bytes of the JSON payload (push services accept ~4 KB after encryption)
MAX_SUBSCRIPTIONS = 20  # per owner
ENDPOINT_MAX = 2000
TTL_S = 24 * 3600  # how long the push service may keep an undelivered message
GONE = (404, 410)
# The buttons of a pending approval's notification; the service worker maps each action to its answer route.
APPROVAL_ACTIONS = ({"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"})
PARALLEL_SENDS = 4  # subscriptions pushed at once (each takes a database connection only before and after its POST)


class PushError(ValueError):
    """A subscription that cannot be stored; the message says which part and why."""


# --- the browser's subscription -------------------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=" for c in text):
        raise ValueError("is not base64url (A-Z a-z 0-9 - _)")
    try:
        return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("is not base64url") from None


class SubscriptionKeys(BaseModel):
    model_config = ConfigDict(extra="forbid")

    p256dh: str = Field(min_length=80, max_length=100, json_schema_extra={"format": "p256dh"},
                        description="The browser's P-256 public key: the uncompressed point (65 bytes), base64url")
    auth: str = Field(min_length=20, max_length=30, json_schema_extra={"format": "push-auth"},
                      description="The browser's auth secret (16 bytes), base64url")

    @field_validator("p256dh")
    @classmethod
    def _p256dh(cls, value: str) -> str:
        from cryptography.hazmat.primitives.asymmetric import ec

        raw = _unb64url(value)
        if len(raw) != 65 or raw[0] != 4:
            raise ValueError(f"must be an uncompressed P-256 point (65 bytes starting 0x04), not {len(raw)} bytes")
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
        except ValueError:
            raise ValueError("is not a point on the P-256 curve") from None
        return _b64url(raw)

    @field_validator("auth")
    @classmethod
    def _auth(cls, value: str) -> str:
        raw = _unb64url(value)
        if len(raw) != 16:
            raise ValueError(f"must be 16 bytes, not {len(raw)}")
        return _b64url(raw)


class SubscriptionIn(BaseModel):
    """A browser's PushSubscription, as ``subscription.toJSON()`` gives it (expirationTime ignored)."""

    model_config = ConfigDict(extra="ignore")

    endpoint: str = Field(min_length=9, max_length=ENDPOINT_MAX, json_schema_extra={"format": "push-endpoint"},
                          description="The push service URL (https; its host resolves only to public addresses)")
    keys: SubscriptionKeys


def origin(endpoint: str) -> str:
    """``scheme://host[:port]`` of ``endpoint``: what a notifications row records, and the JWT's ``aud``."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def endpoint_refusal(endpoint: str, settings: "Settings") -> str | None:
    """Why the server must not POST to ``endpoint`` (None: it may). Resolves the host."""
    import socket

    from zerg import egress, hosting

    if len(endpoint) > ENDPOINT_MAX:
        return f"endpoint is longer than {ENDPOINT_MAX} characters"
    if any(ord(c) < 33 or ord(c) == 127 for c in endpoint):
        return "endpoint contains spaces or control characters"
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError as exc:
        return f"endpoint is not a URL: {exc}"
    host = (parts.hostname or "").rstrip(".")
    loopback_ok = settings.push_allow_loopback and not hosting.may_be_lambda(settings)
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback_ok):
        return "endpoint must be an https:// URL"
    if not host:
        return "endpoint has no host"
    if parts.username is not None or parts.password is not None:
        return "endpoint must not carry credentials (user:password@)"
    if parts.fragment:
        return "endpoint must not have a #fragment"
    try:
        infos = socket.getaddrinfo(host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"endpoint host {host!r} does not resolve ({exc.__class__.__name__})"
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    if not addresses:
        return f"endpoint host {host!r} does not resolve"
    for addr in sorted(addresses, key=str):
        why = egress.refusal(addr)
        if why is None:
            continue
        if loopback_ok and addr.is_loopback:
            continue
        return f"endpoint host {host!r} resolves to {addr}: {why}"
    if parts.scheme == "http" and not all(a.is_loopback for a in addresses):
        return "endpoint must be an https:// URL (http:// only on loopback, with ZERG_PUSH_ALLOW_LOOPBACK)"
    return None


# --- the VAPID key ----------------------------------------------------------------------------------

def public_key(rt: "Runtime") -> str:
    """The deployment's VAPID public key (base64url uncompressed P-256 point); made on first use."""
    return _key_row(rt)["public_key"]


def _key_row(rt: "Runtime") -> dict[str, Any]:
    with rt.pool.connection() as conn:
        row = push_keys.get(conn)
    if row is not None:
        return row
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    der = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    sealed = rt.sealer.seal_deployment(der)
    with rt.pool.connection() as conn:
        return push_keys.create_once(conn, _b64url(public), sealed)


def _vapid(rt: "Runtime") -> Any:
    """The signer (py_vapid) with the unsealed private key."""
    from cryptography.hazmat.primitives import serialization
    from py_vapid import Vapid02

    der = rt.sealer.open_deployment(_key_row(rt)["private_key_sealed"])
    return Vapid02(serialization.load_der_private_key(der, password=None))


def contact(settings: "Settings") -> str:
    """The VAPID ``sub`` claim: ZERG_PUSH_CONTACT, else mailto: the sender address."""
    value = settings.push_contact or settings.sender_email
    return value if value.startswith(("mailto:", "https://")) else f"mailto:{value}"


# --- sending ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PushMessage:
    title: str
    body: str
    url: str | None = None
    severity: str | None = None
    run_id: int | None = None
    tag: str | None = None
    approval_id: int | None = None  # a pending approval: the notification offers APPROVAL_ACTIONS

    def payload(self) -> bytes:
        """The JSON the service worker reads, within :data:`PAYLOAD_MAX` bytes (body, then title, cut)."""
        fields: dict[str, Any] = {"title": self.title, "body": self.body, "url": self.url, "severity": self.severity,
                                  "run_id": self.run_id, "tag": self.tag}
        if self.approval_id is not None:
            fields |= {"approval_id": self.approval_id, "actions": [dict(a) for a in APPROVAL_ACTIONS]}
        data = json.dumps(fields, ensure_ascii=False).encode()
        for name in ("body", "title"):
            while len(data) > PAYLOAD_MAX and fields[name]:
                over = len(data) - PAYLOAD_MAX
                text = fields[name]
                keep = max(0, len(text) - max(over, len(text) // 8) - 1)
                fields[name] = text[:keep].rstrip() + "…" if keep else ""
                data = json.dumps(fields, ensure_ascii=False).encode()
        return data


def notify(rt: "Runtime", owner_id: int, message: PushMessage, *, purpose: str, schedule_id: int | None = None,
           attempt: int = 0, now: datetime | None = None) -> list[dict[str, Any]]:
    """Push ``message`` to each of the owner's subscriptions: one notifications row each, in order
    (none when the owner has no subscription). Never raises for a push service's failure."""

    now = now or utcnow()
    with rt.pool.connection() as conn:
        subscriptions = push_subscriptions.for_sending(conn, owner_id)
        if not subscriptions:
            return []
        policy = get_policy(conn, owner_id)
    fields = {"channel": "push", "purpose": purpose, "subject": message.title or None, "body": message.body,
              "severity": message.severity, "run_id": message.run_id, "schedule_id": schedule_id, "attempt": attempt}
    signer: Any = None
    try:
        signer = _vapid(rt)
    except Exception as exc:  # the key cannot be unsealed (KMS down, key file gone): every row says so
        key_error = f"the VAPID key is unavailable: {type(exc).__name__}: {exc}"[:300]
    error = None if signer is not None else key_error

    def one(sub: dict[str, Any]) -> dict[str, Any]:
        return _send(rt, owner_id, sub, message, fields, policy.daily_push_limit, now, signer, error)

    if len(subscriptions) == 1:
        return [one(subscriptions[0])]
    from concurrent.futures import ThreadPoolExecutor

    # In parallel (a few at a time): a slow push service costs the caller one timeout, not one per browser.
    with ThreadPoolExecutor(max_workers=min(PARALLEL_SENDS, len(subscriptions)), thread_name_prefix="push") as pool:
        return list(pool.map(one, subscriptions))


def _send(rt: "Runtime", owner_id: int, sub: dict[str, Any], message: PushMessage, fields: dict[str, Any],
          limit: int, now: datetime, signer: Any, key_error: str | None) -> dict[str, Any]:
    day = now.astimezone(timezone.utc).date()
    address = origin(sub["endpoint"])
    with rt.pool.connection() as conn:
        if not limits.reserve(conn, owner_id, "push", limit, day):
            row = notifications.record(conn, owner_id, **fields, status="suppressed", address=address,
                                       reason=f"daily push limit of {limit} reached")
            log_row(row)
            return row
        row = notifications.record(conn, owner_id, **fields, status="failed", reason=notifications.IN_FLIGHT,
                                   address=address)
    reason, gone = key_error, False
    if reason is None:
        reason = endpoint_refusal(sub["endpoint"], rt.settings)
    if reason is None:
        reason, gone = _post(rt.settings, sub, message.payload(), signer)
    with rt.pool.connection() as conn:
        if reason is None:
            push_subscriptions.sent(conn, owner_id, sub["id"])
            row = notifications.finish(conn, row["id"], status="sent")
        else:
            limits.release(conn, owner_id, "push", day)
            if gone:
                push_subscriptions.delete(conn, owner_id, sub["id"])
            else:
                push_subscriptions.failed(conn, owner_id, sub["id"])
            row = notifications.finish(conn, row["id"], status="failed", reason=reason)
    log_row(row)
    return row


def _post(settings: "Settings", sub: dict[str, Any], payload: bytes, signer: Any) -> tuple[str | None, bool]:
    """One encrypted, signed POST to the push service: (None, False) when accepted, else (why, gone?)."""
    import requests
    from pywebpush import WebPushException, webpush

    session = _session()
    session.trust_env = False  # no proxies or .netrc from the environment: the endpoint is checked, not a proxy
    info = {"endpoint": sub["endpoint"], "keys": {"p256dh": sub["p256dh_secret"], "auth": sub["auth_secret"]}}
    try:
        webpush(info, data=payload.decode(), vapid_private_key=signer,
                vapid_claims={"sub": contact(settings), "aud": origin(sub["endpoint"])},
                content_encoding="aes128gcm", ttl=TTL_S, timeout=settings.push_timeout_s,
                headers={"Urgency": "high"}, requests_session=session)
    except WebPushException as exc:
        response = exc.response
        if response is None:
            return f"push failed: {str(exc)[:200]}", False
        status = response.status_code
        if status in GONE:
            return f"the push service answered {status}: the subscription is gone (removed)", True
        if 300 <= status < 400:
            return f"the push service answered a redirect ({status}); redirects are not followed", False
        return f"the push service answered {status} {response.reason or ''}: {response.text[:200]}".strip(), False
    except requests.Timeout:
        return f"the push service did not answer within {settings.push_timeout_s:g} s", False
    except requests.RequestException as exc:
        return f"the push service could not be reached: {type(exc).__name__}", False
    except Exception as exc:  # an encryption or signing bug must not fail the alert's caller: recorded
        return f"{type(exc).__name__}: {exc}"[:300], False
    finally:
        session.close()
    return None, False


@functools.cache
def _session_class() -> type:
    import requests

    class NoRedirects(requests.Session):
        """A session that never follows a redirect (a 3xx is the push service's answer, not a hop)."""

        def request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["allow_redirects"] = False
            return super().request(*args, **kwargs)

    return NoRedirects


def _session() -> Any:
    """A fresh :class:`NoRedirects` session (the class is made on first use: requests is imported where used)."""
    return _session_class()()
