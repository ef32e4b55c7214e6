"""What a request's query string and headers mean before any route validates them, on the Lambda
path and under ``zerg serve`` alike: a blank value is no value, a value given twice is a list."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

# Headers whose blank value means "not given" (as a blank query parameter does); the OpenAPI
# document says so (``docs.refine``).
BLANK_IS_ABSENT_HEADERS = ("last-event-id",)


def repeated(event: dict[str, Any]) -> dict[str, list[str]]:
    """The query parameters given more than once, with all their values (from ``rawQueryString``:
    API Gateway joins them with commas in ``queryStringParameters``, ``zerg serve`` keeps the last)."""
    raw = event.get("rawQueryString") or ""
    if "&" not in raw:
        return {}
    return {k: v for k, v in parse_qs(raw, keep_blank_values=True).items() if len(v) > 1}


def without_blanks(event: dict[str, Any]) -> dict[str, Any]:
    """The event with blank query parameters (``?limit=``) and a blank ``Last-Event-ID`` dropped:
    blank means "not given", as it did when the handlers read the query themselves. (Done here,
    not by a pydantic validator on each parameter: a validator hides the bounds from OpenAPI.)

    A parameter given more than once is never blank: its values are joined with commas, as API
    Gateway joins them, so validation refuses it under ``zerg serve`` (which keeps the last value
    in ``queryStringParameters``) exactly as under Lambda, whether or not the last one is blank."""
    query = event.get("queryStringParameters") or {}
    headers = event.get("headers") or {}
    joined = {k: ",".join(v) for k, v in repeated(event).items()}
    blank_header = any(headers.get(h) == "" for h in BLANK_IS_ABSENT_HEADERS)
    if not joined and "" not in query.values() and not blank_header:
        return event
    query = {**{k: v for k, v in query.items() if v != ""}, **joined}
    return {**event, "queryStringParameters": query or None,
            "headers": {k: v for k, v in headers.items() if not (k in BLANK_IS_ABSENT_HEADERS and v == "")}}
