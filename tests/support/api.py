"""Calling the API handler directly with API Gateway v2 events (the Lambda path)."""

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
