"""Request bodies: what a route that takes one accepts, checked before its model sees anything.

Invariants:
- A body reaches a route's pydantic model only as ``application/json`` (the media type in any
  case, parameters such as ``charset`` allowed), valid UTF-8, nested at most ``MAX_DEPTH``
  levels, with integers of at most ``sys.get_int_max_str_digits()`` digits, no ``NaN`` or
  ``Infinity``, and no NUL character in any string or key (PostgreSQL text cannot hold one, so
  it would fail at the database, as a 500).
- Every refusal is an ``ApiError`` that says what is wrong: 415 for the media type, 400 for bytes
  that are not UTF-8 JSON (with where), 422 naming the field that holds a NUL. Never a 500 and
  never a parser's stack trace in the log.
- The check runs where Powertools would parse the body (``BodyValidation`` replaces its request
  validation's body step), so only routes that take a body check one, after routing (an unknown
  route is still 404, a wrong method 405) and before credentials, as a malformed body always was.
  It runs on the Lambda path and under ``zerg serve`` alike.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from itertools import accumulate
from typing import Any

from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware

from zerg.api.errors import ApiError

MAX_DEPTH = 64  # far above any real body, far below the parser's recursion limit
JSON_MEDIA_TYPE = "application/json"

# A JSON string literal (escapes included); removed before counting brackets, so "[" in text is no level.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")  # deleted by bytes.translate, in C
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def content_type(headers: dict[str, str] | None) -> str | None:
    return next((v for k, v in (headers or {}).items() if k.lower() == "content-type"), None)


def check_media_type(header: str | None) -> None:
    """415 unless the body says it is JSON."""
    if header is None:
        raise ApiError(415, "unsupported_media_type", f"a request body needs Content-Type: {JSON_MEDIA_TYPE}")
    if header.split(";", 1)[0].strip().lower() != JSON_MEDIA_TYPE:
        raise ApiError(415, "unsupported_media_type",
                       f"Content-Type must be {JSON_MEDIA_TYPE}, got {header[:100]!r}")


def body_text(event: dict[str, Any]) -> str:
    """The body as text: base64 undone (the local server sends bytes that are not UTF-8 that way),
    and UTF-8 checked."""
    body = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return body
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise _bad("request body is not valid base64") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"request body is not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}") from None


def check_depth(text: str) -> None:
    """400 when arrays and objects nest deeper than ``MAX_DEPTH`` (counted without parsing)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    brackets = _STRING.sub('""', text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET)
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH:
        raise _bad(f"request body nests arrays and objects deeper than {MAX_DEPTH} levels")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse(text: str) -> Any:
    """The JSON value of ``text``, or a 400 saying what is wrong with it."""
    check_depth(text)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _bad(f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # check_depth should have said so; never a 500 either way
        raise _bad(f"request body nests arrays and objects deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise _bad(f"request body has an integer of more than {sys.get_int_max_str_digits()} digits") from None
        raise _bad(f"request body is not valid JSON: {exc}") from None


def has_nul_escape(text: str) -> bool:
    """Whether the JSON text spells a NUL (``\\u0000`` after an even number of backslashes: after an
    odd one, ``\\\\u0000`` is the text ``\\u0000``). Linear: each backslash run is looked at once."""
    at = text.find("\\u0000")
    while at != -1:
        start = at
        while start > 0 and text[start - 1] == "\\":
            start -= 1
        if (at - start) % 2 == 0:
            return True
        at = text.find("\\u0000", at + 1)
    return False


def nul_location(value: Any) -> str | None:
    """Where the first string or key holding a NUL is (``context.notes.2``), or None."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return ".".join(loc) or "body"
        elif isinstance(item, dict):
            for key in item:
                if "\x00" in key:
                    return ".".join((*loc, f"{key!r} (a key)"))
            stack.extend((v, (*loc, k)) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, (*loc, str(i))) for i, v in reversed(list(enumerate(item))))
    return None


def parse_body(event: dict[str, Any]) -> Any:
    """The request's JSON body (None when there is none), checked as the module docstring says."""
    if not event.get("body"):
        return None
    check_media_type(content_type(event.get("headers")))
    text = body_text(event)
    value = parse(text)
    if has_nul_escape(text):
        where = nul_location(value)
        if where is not None:
            raise ApiError(422, "validation_error",
                           f"{where}: must not contain the NUL character (\\u0000); text is stored in PostgreSQL, "
                           "which cannot hold it")
    return value


class BodyValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation with this module's body step in place of its own (which
    answers 500 for every problem above but invalid JSON)."""

    def _get_body(self, app) -> Any:  # noqa: ANN001 - Powertools' resolver
        return parse_body(app.current_event.raw_event)
