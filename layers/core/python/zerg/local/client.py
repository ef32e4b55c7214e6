"""``zerg ask``, ``zerg login``, ``zerg logout``: a client of the Jarvis API (local ``zerg serve``
or a deployed API).

``ask`` uses a session token (``zerg login``'s) or authenticates with the device secret for a
session of its own, which it revokes when done; starts the run (with an Idempotency-Key so a
retried POST cannot start two runs), follows the SSE stream — reconnecting with ``Last-Event-ID``
after a dropped connection or a Lambda long-poll ends — and prints the answer (or the run document).
Where the secret or token comes from is :mod:`zerg.local.credentials`' business, never argv's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from zerg.runs.events import TERMINAL_EVENTS
from zerg.runs.progress import describe_event


class ClientError(RuntimeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _check(resp: Any) -> dict[str, Any]:
    if resp.status_code >= 400:
        try:
            body = resp.json()
            message = f"{body.get('error')}: {body.get('message')}"
        except ValueError:
            message = resp.text[:200]
        raise ClientError(f"HTTP {resp.status_code} from {resp.request.method} {resp.request.url.path}: {message}",
                          resp.status_code)
    return resp.json() if resp.content else {}


def follow(client: Any, path: str, on_event: Callable[[str, dict[str, Any]], None], *, max_reconnects: int = 1000) -> None:
    """Read the run's SSE stream to its final event, reconnecting with the last event id."""
    from httpx_sse import connect_sse

    last_id: str | None = None
    retry_s = 1.0
    for _ in range(max_reconnects):
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            with connect_sse(client, "GET", path, headers=headers, timeout=None) as source:
                if source.response.status_code == 204:
                    return
                if source.response.status_code >= 400:  # 401/404 are final: say so, do not retry
                    source.response.read()
                    _check(source.response)
                for sse in source.iter_sse():
                    if sse.retry:
                        retry_s = sse.retry / 1000
                    if not sse.event or sse.event == "message":
                        continue
                    if sse.id:
                        last_id = sse.id
                    if sse.event == "heartbeat":
                        continue
                    on_event(sse.event, json.loads(sse.data))
                    if sse.event in TERMINAL_EVENTS:
                        return
        except ClientError:
            raise
        except Exception:  # dropped connection: reconnect from the last id
            pass
        time.sleep(retry_s)
    raise ClientError("gave up following the event stream")


def _client(url: str) -> Any:
    import httpx

    return httpx.Client(base_url=url.rstrip("/"), timeout=60)


def authenticate(url: str, device_secret: str) -> dict[str, Any]:
    """POST /api/jarvis/auth: ``{token, expires_at, owner_id, session_id, ...}`` for a new session."""
    with _client(url) as client:
        return _check(client.post("/api/jarvis/auth", json={"device_secret": device_secret}))


def revoke(url: str, token: str) -> dict[str, Any]:
    """POST /api/jarvis/logout: the token's session is revoked server-side."""
    with _client(url) as client:
        return _check(client.post("/api/jarvis/logout", headers={"Authorization": f"Bearer {token}"}))


def ask(url: str, device_secret: str | None, task: str, *, token: str | None = None,
        out: Callable[[str], None] = print, as_json: bool = False) -> dict[str, Any]:
    """Run ``task`` and return its run document. With ``token`` (a stored session) the secret is
    not used; otherwise the secret buys a session for this call only, revoked at the end."""
    with _client(url) as client:
        own_session = token is None
        if own_session:
            token = _check(client.post("/api/jarvis/auth", json={"device_secret": device_secret}))["token"]
        client.headers["Authorization"] = f"Bearer {token}"
        try:
            started = _check(client.post("/api/jarvis/supervisor", json={"task": task},
                                         headers={"Idempotency-Key": uuid.uuid4().hex}))
            on_event = (lambda kind, payload: None) if as_json else (lambda kind, payload: _print(out, kind, payload))
            follow(client, started["stream_url"], on_event)
            return _check(client.get(f"/api/jarvis/runs/{started['run_id']}"))
        finally:
            if own_session:  # a session nobody will use again should not stay valid for 7 days
                try:
                    client.post("/api/jarvis/logout", timeout=5)
                except Exception:  # best effort: the answer matters more; the session expires anyway
                    pass


def _print(out: Callable[[str], None], kind: str, payload: dict[str, Any]) -> None:
    line = describe_event(kind, payload)
    if line:
        out(line)
