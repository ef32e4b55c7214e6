"""Pydantic's validation errors as one line for a person: each problem names what it is about
(``task: Field required``), never dumps the model. The one place the HTTP API, the Lambda
handlers' input, tool arguments and the command line word them."""

from __future__ import annotations

from typing import Any

PARAMETER_SOURCES = ("path", "query", "header")


def problems(errors: list[Any], whole: str) -> str:
    """``loc: message; ...`` for each error; an error about the whole input is named ``whole``."""
    return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or whole}: {e.get('msg', 'invalid')}"
                     for e in errors)


def validation_message(errors: list[Any]) -> tuple[int, str, str]:
    """(status, error, message) of an HTTP request's validation errors; each names what it is about.

    A parameter's message quotes the value it got (``limit: Input should be less than or equal to
    200, got '500'``); body messages name the field (``task: Field required``)."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "bad_request", "request body is not valid JSON"
    parts = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", ())]
        source = loc.pop(0) if loc and loc[0] in ("body", *PARAMETER_SOURCES) else "body"
        part = f"{'.'.join(loc) or 'body'}: {e.get('msg', 'invalid')}"
        if source in PARAMETER_SOURCES and isinstance(e.get("input"), str):
            part += f", got {e['input']!r}"
        parts.append(part)
    return 422, "validation_error", "; ".join(parts)
