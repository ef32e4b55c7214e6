"""Ingress Lambda: the entry for every external event: the Jarvis HTTP API (API Gateway HTTP API
v2 events) and the run state machine's execution status changes (EventBridge)."""

from __future__ import annotations

from typing import Any

from zerg import observability
from zerg.api.app import resolve


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    if isinstance(event, dict) and event.get("source") == "aws.states":
        return _execution_status(event)
    request_id = ((event or {}).get("requestContext") or {}).get("requestId")
    with observability.invocation("events", request_id):
        return resolve(event, context)


def _execution_status(event: dict[str, Any]) -> dict[str, Any]:
    from zerg.runs.execution_status import on_execution_status
    from zerg.runtime import get_runtime

    with observability.invocation("events", event.get("id")) as log:
        out = on_execution_status(get_runtime(), event)
        log.info("execution status handled", extra=out)
    return out
