"""Ingress Lambda: the Jarvis HTTP API (API Gateway HTTP API v2 events)."""

from __future__ import annotations

from typing import Any

from zerg.api.app import build_app


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return build_app().resolve(event, context)
