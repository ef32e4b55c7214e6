"""``POST /mcp``: Zerg as an MCP server over streamable HTTP, stateless (docs/mcp.md). The bearer
token is a device session's, as for every other route; the exchange itself is the official SDK's
(:mod:`zerg.api.mcpserver.http`), so a malformed frame gets a JSON-RPC error, never a 5xx.

Invariants:
- Only ``Authorization: Bearer <token>`` authenticates here (401 otherwise): an MCP client is not a
  browser, and the session cookie is never taken for a protocol that changes things.
- No Accept header counts as accepting anything (RFC 9110), so a plain client is not refused 406.
- It is charged to its owner like any request (``zerg serve``'s per-owner slots, API Gateway's
  throttling on AWS), and the SDK server adds its own cap on an owner's calls in flight.
"""

from __future__ import annotations

import base64

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from zerg.api.deps import Rt, caller_of
from zerg.api.errors import ApiError
from zerg.api.mcpserver.http import FRAME, PATH, exchange, frame_refusal, media_type_refusal
from zerg.api.models import ERRORS, ErrorBody

router = Router()

JSONRPC_ERROR = {"type": "object", "required": ["jsonrpc", "error"], "properties": {
    "jsonrpc": {"type": "string", "enum": ["2.0"]},
    "id": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
    "error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}}}}
REQUEST_BODY = {"required": True, "content": {"application/json": {"schema": FRAME}}}
_JSONRPC = {"application/json": {"schema": JSONRPC_ERROR}}
_ERROR = {"application/json": {"model": ErrorBody}}
RESPONSES = {
    200: {"description": "The answer as Server-Sent Events: the progress notifications of the call, then its "
                         "JSON-RPC response (a result, or a JSON-RPC error such as an unknown method or tool)",
          "content": {"text/event-stream": {}, "application/json": {}}},
    202: {"description": "A notification or response was accepted (no body)", "content": {}},
    400: {"description": "Not JSON (parse error) or not a JSON-RPC message: a JSON-RPC error naming the problem",
          "content": _JSONRPC},
    401: {"description": ERRORS[401] + " (Authorization: Bearer <device session token>)", "content": _ERROR},
    404: {"description": "A session id was sent: this server is stateless and keeps none", "content": _JSONRPC},
    406: {"description": "Accept names neither both application/json and text/event-stream nor */*",
          "content": _JSONRPC},
    413: {"description": ERRORS[413], "content": {**_ERROR}},
    415: {"description": "The body is not application/json (a JSON-RPC error)", "content": _JSONRPC},
    422: {"description": ERRORS[422] + " (the API's validation; a bad frame is 400 or a JSON-RPC error)",
          "content": _ERROR},
    500: {"description": "Unexpected error; the request id is in the logs", "content": _ERROR},
}


@router.post(PATH, summary="Zerg as an MCP server (streamable HTTP, stateless)",
             description="One JSON-RPC message of the Model Context Protocol per request, authenticated with a device "
                         "session's bearer token; the tools (ask, run_status, list_runs, memory_search, memory_read, "
                         "memory_write, inbox_list, inbox_ack, list_schedules) act for that session's owner. "
                         "docs/mcp.md says how to connect an MCP client.",
             responses=RESPONSES, openapi_extensions={"requestBody": REQUEST_BODY})
def mcp_request(rt: Rt):
    event = router.current_event
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    if not headers.get("authorization", "").lower().startswith("bearer "):
        raise ApiError(401, "unauthorized", "POST /mcp needs 'Authorization: Bearer <token>' (a device session token "
                       "from POST /api/jarvis/auth, or zerg login)")
    owner_id = caller_of(event).owner_id
    if not headers.get("accept", "").strip():
        headers["accept"] = "*/*"
    raw = event.raw_event.get("body") or ""
    body = base64.b64decode(raw) if event.raw_event.get("isBase64Encoded") else raw.encode("utf-8", "surrogatepass")
    refused = media_type_refusal(headers) or frame_refusal(body)
    if refused is not None:
        return Response(status_code=refused.status, content_type="application/json", body=refused.body.decode())
    answer = exchange(rt, owner_id, headers, body)
    kind = answer.headers.pop("content-type", None) or answer.headers.pop("Content-Type", None)
    return Response(status_code=answer.status, content_type=kind, body=answer.body.decode("utf-8", "replace"),
                    headers=answer.headers)
