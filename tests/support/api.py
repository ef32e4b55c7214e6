"""Calling the API: the handler directly with API Gateway v2 events (the Lambda path), or a
``zerg serve`` over HTTP; signing in either way with an owner's device secret."""

from __future__ import annotations

import json

from zerg.local.server import to_apigw_event


def call(method: str, path: str, body=None, token: str | None = None, headers: dict | None = None, raw: bytes | None = None):
    from functions.events.handler import handler

    hdrs = dict(headers or {})
    if token:
        hdrs["authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
    if data:
        hdrs.setdefault("content-type", "application/json")
    result = handler(to_apigw_event(method, path, hdrs, data), None)
    text = result.get("body") or ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return result["statusCode"], parsed, result


def login(owner) -> str:
    """A session token for ``owner`` (anything with a ``device_secret``), through the handler."""
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


def http_login(base: str, owner, **kwargs):
    """An ``httpx.Client`` on ``base`` (a ``zerg serve``) signed in as ``owner`` (bearer token);
    ``kwargs`` go to the client."""
    import httpx

    client = httpx.Client(base_url=base, timeout=30, **kwargs)
    resp = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret})
    assert resp.status_code == 200, resp.text
    client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
    return client
