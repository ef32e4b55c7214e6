"""A Web Push service on loopback, as strict as a browser vendor's: each POST must carry a VAPID
``Authorization: vapid t=<JWT>, k=<key>`` whose ES256 signature verifies with ``k``, whose ``aud``
is this service's origin and whose ``exp`` is in the future and at most 24 h away; the body must
be ``Content-Encoding: aes128gcm``. Accepted pushes are decrypted with the subscriber's private key
(a :class:`Subscriber` made by the test, as a browser would hold it) and kept, in order.

``answer(path, status)`` makes the service answer ``status`` for that path (404/410: gone; 500;
301 to somewhere else); ``delay(path, seconds)`` makes it slow.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscriber:
    """A browser's side of one subscription: its P-256 key pair and auth secret."""

    path: str
    private_key: Any = None
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    def __post_init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.private_key = self.private_key or ec.generate_private_key(ec.SECP256R1())

    @property
    def p256dh(self) -> str:
        from cryptography.hazmat.primitives import serialization

        return b64url(self.private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                                 serialization.PublicFormat.UncompressedPoint))

    def keys(self) -> dict[str, str]:
        return {"p256dh": self.p256dh, "auth": b64url(self.auth)}


@dataclass
class Received:
    path: str
    payload: dict[str, Any]
    claims: dict[str, Any]
    vapid_key: str
    headers: dict[str, str]


class PushService:
    def __init__(self) -> None:
        self.subscribers: dict[str, Subscriber] = {}
        self.received: list[Received] = []
        self.refused: list[tuple[str, str]] = []  # (path, why) of requests that broke the protocol
        self.answers: dict[str, int] = {}
        self.delays: dict[str, float] = {}
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, why = service._handle(self.path, dict(self.headers.items()), body)
                if why:
                    with service._lock:
                        service.refused.append((self.path, why))
                try:
                    self.send_response(status)
                    if status in (301, 302, 307, 308):
                        self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                    self.send_header("content-length", str(len(why.encode())))
                    self.end_headers()
                    self.wfile.write(why.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a sender that timed out has gone: nothing to answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        # a short poll_interval: shutdown() waits for it (0.5 s by default, in every test's teardown)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def subscriber(self, name: str) -> Subscriber:
        sub = Subscriber(f"/push/{name}")
        self.subscribers[sub.path] = sub
        return sub

    def endpoint(self, sub: Subscriber) -> str:
        return self.origin + sub.path

    def answer(self, sub: Subscriber, status: int) -> None:
        self.answers[sub.path] = status

    def delay(self, sub: Subscriber, seconds: float) -> None:
        self.delays[sub.path] = seconds

    def received_by(self, sub: Subscriber) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == sub.path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the protocol -----------------------------------------------------------------------

    def _handle(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        import http_ece
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        if path in self.delays:
            time.sleep(self.delays[path])
        if path in self.answers:
            return self.answers[path], ""
        sub = self.subscribers.get(path)
        if sub is None:
            return 404, "no such subscription"
        headers = {k.lower(): v for k, v in headers.items()}
        scheme, _, params = headers.get("authorization", "").partition(" ")
        if scheme != "vapid":
            return 401, f"Authorization must be vapid t=..., k=..., not {scheme!r}"
        parts = dict(p.strip().partition("=")[::2] for p in params.split(","))
        try:
            key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(parts["k"]))
            claims = jwt.decode(parts["t"], key=key, algorithms=["ES256"], audience=self.origin,
                                options={"require": ["exp", "aud", "sub"]})
        except Exception as exc:
            return 403, f"VAPID JWT refused: {type(exc).__name__}: {exc}"
        if claims["exp"] > time.time() + 24 * 3600:
            return 403, "VAPID JWT exp more than 24 h ahead"
        if headers.get("content-encoding") != "aes128gcm":
            return 400, f"Content-Encoding must be aes128gcm, not {headers.get('content-encoding')!r}"
        if not headers.get("ttl"):
            return 400, "TTL header missing"
        try:
            plain = http_ece.decrypt(body, private_key=sub.private_key, auth_secret=sub.auth, version="aes128gcm")
            payload = json.loads(plain)
        except Exception as exc:
            return 400, f"cannot decrypt: {type(exc).__name__}: {exc}"
        with self._lock:
            self.received.append(Received(path, payload, claims, parts["k"], headers))
        return 201, ""
