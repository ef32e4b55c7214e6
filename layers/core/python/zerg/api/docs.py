"""The OpenAPI document and its interactive docs (Powertools' Swagger UI), built on first use.

Powertools' OpenAPI models (security schemes, servers) take ~0.3 s to import and no request but a
documentation request needs them, so they are imported here, when the document is asked for, not
while the app is built on every cold start. The Swagger UI page inlines the JS and CSS bundled in
the Powertools package: no CDN, so the docs work offline and behind API Gateway alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

TITLE = "Zerg Jarvis API"
VERSION = "1.0.0"
DOCS_PATH = "/api/docs"
SECURITY = [{"bearerAuth": []}, {"cookieAuth": []}]
DESCRIPTION = (
    "Every error is {\"error\", \"message\"} JSON. A request body is UTF-8 JSON (application/json), nested at "
    "most 64 levels, and no string or key in it holds the NUL character (\\u0000; 422 naming the field). A blank "
    "query parameter counts as absent; a parameter given twice is refused. A POST, PUT, PATCH or DELETE with the "
    "session cookie (not a bearer token) needs the Origin of this server (or Sec-Fetch-Site: same-origin) and the "
    "header X-Zerg-Client, else 403. The rules a JSON Schema cannot state are named by a field's format and "
    "described under info.x-formats.")


def _configure(app: APIGatewayHttpResolver) -> None:
    if app.openapi_config.security_schemes:
        return
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    from zerg.auth import COOKIE

    schemes = {"bearerAuth": HTTPBearer(bearerFormat="JWT", description="The token POST /api/jarvis/auth returns"),
               "cookieAuth": APIKey(in_=APIKeyIn.cookie, name=COOKIE, description="The session cookie it sets")}
    app.configure_openapi(title=TITLE, version=VERSION, description=DESCRIPTION, security_schemes=schemes,
                          security=SECURITY)


def openapi_json(app: APIGatewayHttpResolver) -> str:
    _configure(app)
    return json.dumps(refine(json.loads(app.get_openapi_json_schema())))


# The rules a JSON Schema cannot state (a key that parses, a letter of any script, a time zone that
# exists), named by the "format" of the field that follows them; the document lists them under
# info.x-formats. tests/test_api_fuzz.py generates values of each.
FORMATS = {
    "openssh-private-key": "An unencrypted Ed25519, ECDSA or RSA (2048-4096 bit) private key in OpenSSH or "
                           "traditional PEM form, at most 4096 bytes",
    "openssh-public-key": "One OpenSSH public key line ('ssh-ed25519 AAAA...'; ssh-ed25519, ecdsa-sha2-nistp256, "
                          "-nistp384, -nistp521 or ssh-rsa), or a known_hosts line holding one",
    "device-name": "1-64 printable characters once NFC-normalised and trimmed",
    "model-id": "1-100 printable characters, none of them whitespace",
    "memory-path": "At most 512 characters in at most 16 '/'-separated segments of 1-100 characters: letters and "
                   "digits of any script, and space (not at either end of a segment) - _ . @ + , ( ); no segment "
                   "made only of dots, no leading '/'",
    "memory-prefix": "Empty, or a memory-path, optionally ending with '/'",
    "memory-content": "Text of at most 262144 bytes of UTF-8",
    "memory-title": "At most 255 characters once trimmed, none of them a control or invisible character (Unicode "
                    "categories Cc, Cf, Cs, Co, Cn)",
    "memory-tag": "1-50 characters once trimmed and lower-cased: letters and digits of any script, - _ . :",
    "memory-tag-list": "memory-tags separated by commas (blank items are ignored)",
    "artifact-path": "A path relative to the worker directory ('/' between folders, or %2F): no NUL, no "
                     "backslash, not absolute, no '..' segment (also after URL-decoding), each name at most 255 "
                     "bytes of UTF-8, the whole at most 800",
    "artifact-name": "One file or folder name of an artifact-path",
    "iana-time-zone": "An IANA time zone name, e.g. Europe/Berlin, America/New_York or UTC",
    "quiet-hours": "'HH:MM-HH:MM' on the 24-hour clock, two different minutes (it may wrap midnight), or 'off'",
    "schedule-name": "At most 100 characters once trimmed, printable, not only the digits 0-9 (a number names a "
                     "schedule by its id)",
    "cron-expression": "Five fields (minute hour day-of-month month day-of-week) of Unix cron that fire at least "
                       "once; restrict day-of-month or day-of-week, not both; at most 200 characters",
    "rate-expression": "A number and minutes, hours or days, from 1 minute to 365 days: '15 minutes', '1 day'",
    "schedule-time": "A local time YYYY-MM-DDTHH:MM[:SS] in the schedule's time zone, in the years 1970-2199, "
                     "not in the past",
    "ledger-day": "A calendar date YYYY-MM-DD from 1970-01-01 to 9998-12-31",
    "email-address": "A plain ASCII email address name@domain (no display name), at most 254 characters: the part "
                     "before @ dot-atoms of at most 64 characters, a domain of at least two DNS labels",
    "e164-phone": "A phone number in E.164 form: '+', the country code and the number, 8-16 characters "
                  "(spaces, dots, dashes and brackets are ignored)",
    "push-endpoint": "An https URL whose host resolves only to public addresses (a browser's push service)",
    "p256dh": "base64url of an uncompressed P-256 point (65 bytes starting 0x04) on the curve",
    "push-auth": "base64url of 16 bytes",
    "ssh-allow-host": "An SSH host alias of 1-100 characters with no space at either end, or '*' for every host",
    "ssh-command-pattern": "1-200 characters of letters, digits, spaces and ._/:=,@+%- (and *?[] in arguments): a "
                           "program name, then words each matching one word of a command ('**' last: any further "
                           "words); no shell operator, and no word naming a shell, an interpreter or a command "
                           "wrapper (sh, bash, python3, env, sudo, xargs...)",
}
UNSAFE_METHODS = ("post", "put", "patch", "delete")
ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
TOO_MANY = ("Too many requests: over a limit (the owner's requests in flight, a daily quota); Retry-After says "
            "when to try again, when known")


def refine(doc: dict[str, Any]) -> dict[str, Any]:
    """What Powertools cannot say from the annotations, said for every operation at once:

    - a parameter is absent or has a value, never null (``int | None`` gives ``anyOf [..., null]``);
    - a blank optional query parameter, or a blank ``Last-Event-ID``, counts as absent
      (``query.without_blanks``): ``allowEmptyValue``, and an empty string beside the header's type;
    - every POST, PUT, PATCH and DELETE can be refused with 403 (``security.refusal``), and every
      operation with 429;
    - the rules named by a ``format`` are described under ``info.x-formats`` (:data:`FORMATS`).
    """
    from zerg.api.models import ERRORS
    from zerg.api.query import BLANK_IS_ABSENT_HEADERS

    for operations in doc.get("paths", {}).values():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema") or {}
                _drop_null(schema)
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter["allowEmptyValue"] = True
                if parameter.get("in") == "header" and parameter.get("name", "").lower() in BLANK_IS_ABSENT_HEADERS:
                    kept = {k: schema.pop(k) for k in ("title", "description", "default") if k in schema}
                    parameter["schema"] = {"anyOf": [schema, {"type": "string", "maxLength": 0}], **kept}
            responses = operation.setdefault("responses", {})
            if method in UNSAFE_METHODS:
                responses.setdefault("403", {"description": ERRORS[403], "content": ERROR_BODY})
            responses.setdefault("429", {"description": TOO_MANY, "content": ERROR_BODY})
    doc.setdefault("info", {})["x-formats"] = FORMATS
    return doc


def _drop_null(schema: dict[str, Any]) -> None:
    """``anyOf [X, {"type": "null"}]`` becomes X (keeping the title, description and default)."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or {"type": "null"} not in options:
        return
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) == 1:
        del schema["anyOf"]
        schema.update(rest[0])
    else:
        schema["anyOf"] = rest


def swagger_ui(app: APIGatewayHttpResolver, query: dict[str, str]) -> Response:
    """The Swagger UI page with the document inline; ``?format=json`` gives the document alone."""
    spec = openapi_json(app)
    if query.get("format") == "json":
        return Response(200, "application/json", spec)
    from aws_lambda_powertools.event_handler.openapi import swagger_ui as bundle

    assets = Path(bundle.__file__).parent
    html = bundle.generate_swagger_html(
        spec.replace("</", "<\\/"),  # the spec sits inside a <script>: keep "</" from closing it
        (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        (assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        None,  # no swagger_base_url: inline the bundled assets
        None,
    )
    return Response(200, "text/html", html)
