"""Ingress Lambda: the entry for every external event. Today: the Jarvis HTTP API (API Gateway
HTTP API v2 events)."""

from __future__ import annotations

from typing import Any

from zerg import observability
from zerg.api.app import resolve


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    request_id = ((event or {}).get("requestContext") or {}).get("requestId")
    with observability.invocation("events", request_id):
        return resolve(event, context)
