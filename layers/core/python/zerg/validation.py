"""Pydantic's validation errors as one line for a person: each problem names what it is about
(``task: Field required``), never dumps the model. The one place the HTTP API, the Lambda
handlers' input, tool arguments and the command line word them.

And the JSON types a request body's numbers and booleans must have, exactly as its JSON Schema
says: pydantic's lax mode takes ``true`` and ``"5"`` for an integer, its strict mode refuses
``5.0``, which JSON Schema counts as an integer (:func:`json_int`, :func:`json_float`, ``JsonBool``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictBool
from pydantic_core import PydanticCustomError

PARAMETER_SOURCES = ("path", "query", "header")


def _kind(value: Any) -> str:
    """What a JSON value is, in the words a message uses."""
    return {bool: "a boolean", str: "text", list: "an array", dict: "an object", type(None): "null"}.get(
        type(value), type(value).__name__)


def _integer(value: Any) -> Any:
    """JSON Schema's integer: a number without a fraction (``5`` or ``5.0``); never a bool or a string."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", f"Input should be a valid integer, not {_kind(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise PydanticCustomError("int_from_float", "Input should be a valid integer, got a number with a "
                                                        "fractional part")
        return int(value)
    return value


def _number(value: Any) -> Any:
    """JSON Schema's number: an integer or a float; never a bool or a string."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", f"Input should be a valid number, not {_kind(value)}")
    return value


# The bounds go inside, before the validator: pydantic writes them as "ge"/"le" (not JSON Schema's
# minimum/maximum) when Field(ge=...) bounds an ``Annotated[..., BeforeValidator] | None``.
def json_int(*, ge: int | None = None, le: int | None = None) -> Any:
    """An integer as JSON Schema has it (5 and 5.0; never true or "5"), within the bounds."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_integer)]


def json_float(*, ge: float | None = None, le: float | None = None) -> Any:
    """A number as JSON Schema has it (never true or "0.5"), within the bounds."""
    return Annotated[float, Field(ge=ge, le=le), BeforeValidator(_number)]


JsonBool = StrictBool

# A JSON Schema pattern for "not blank": some character that Python's str.strip() keeps. (ECMA's \S,
# which a JSON Schema pattern means, takes U+001C-U+001F and U+0085 for text; Python strips them.)
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK = rf"[^{_SPACE}]"
# Not blank, and no NUL anywhere (text a query parameter carries to PostgreSQL).
NOT_BLANK_NOR_NUL = rf"^[^\x00]*[^\x00{_SPACE}][^\x00]*$"


def null_only_for(*nullable: str) -> Any:
    """A model's ``json_schema_extra``: the JSON Schema of a PATCH body whose fields may be left out
    but not null (``"x": null`` is refused), but the ``nullable`` ones."""

    def edit(schema: dict[str, Any]) -> None:
        for name, prop in schema.get("properties", {}).items():
            options = prop.get("anyOf")
            if name in nullable or not isinstance(options, list) or {"type": "null"} not in options:
                continue
            rest = [o for o in options if o != {"type": "null"}]
            del prop["anyOf"]
            prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})

    return edit


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
