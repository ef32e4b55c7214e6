"""The OpenAPI document and its interactive docs (Powertools' Swagger UI), built on first use.

Powertools' OpenAPI models (security schemes, servers) take ~0.3 s to import and no request but a
documentation request needs them, so they are imported here, when the document is asked for, not
while the app is built on every cold start. The Swagger UI page inlines the JS and CSS bundled in
the Powertools package: no CDN, so the docs work offline and behind API Gateway alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

TITLE = "Zerg Jarvis API"
VERSION = "1.0.0"
DOCS_PATH = "/api/docs"
SECURITY = [{"bearerAuth": []}, {"cookieAuth": []}]


def _configure(app: APIGatewayHttpResolver) -> None:
    if app.openapi_config.security_schemes:
        return
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    from zerg.auth import COOKIE

    schemes = {"bearerAuth": HTTPBearer(bearerFormat="JWT", description="The token POST /api/jarvis/auth returns"),
               "cookieAuth": APIKey(in_=APIKeyIn.cookie, name=COOKIE, description="The session cookie it sets")}
    app.configure_openapi(title=TITLE, version=VERSION, security_schemes=schemes, security=SECURITY)


def openapi_json(app: APIGatewayHttpResolver) -> str:
    _configure(app)
    return app.get_openapi_json_schema()


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
