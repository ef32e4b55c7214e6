"""One ``POST /mcp`` exchange: the request handed to the official SDK's streamable-HTTP transport in
stateless mode, its answer collected whole (a Lambda answer, and ``zerg serve``'s, is one body).

Invariants:
- Stateless: every request gets a fresh SDK server and transport for the owner its bearer token
  named (``server.build_server``), and nothing of it outlives the request: no session id, no
  standalone stream, nothing kept between requests. The client's ``initialize`` is answered, but
  not needed before other requests.
- The SDK answers what is wrong with a frame, as JSON-RPC errors: 400 for a body that is not JSON
  (parse error) or not a JSON-RPC message (its validation, naming the field), 406 for an Accept
  header without both ``application/json`` and ``text/event-stream``; a notification is 202 with
  no body. Another Content-Type is refused before the SDK (415, :func:`media_type_refusal`), and
  so is JSON that is not one frame of :data:`FRAME`, the document's request body (400,
  :func:`frame_refusal`: a batch, a response, a key of its own, an id or method out of bounds); and
  any refusal the SDK words in plain text is turned into a JSON-RPC error of the same status. A
  request is answered 200 as ``text/event-stream``: the progress notifications of an ``ask``
  first, then the response, in one body.
- The whole exchange is bounded (``EXCHANGE_LIMIT_S``): past it the transport is ended and the
  answer is a JSON-RPC error (the last event of a stream already begun), never a hung handler.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerg.runtime import Runtime

PATH = "/mcp"
# What a client may send (the OpenAPI document's request body, and what :func:`frame_refusal`
# holds a frame to before the SDK sees it): one JSON-RPC request (with an id) or notification.
FRAME = {
    "type": "object", "required": ["jsonrpc", "method"], "additionalProperties": False, "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"anyOf": [{"type": "integer", "minimum": -(2**53 - 1), "maximum": 2**53 - 1},
                         {"type": "string", "maxLength": 200}],
               "description": "The request's id; without one the message is a notification (202, no body)"},
        "method": {"type": "string", "minLength": 1, "maxLength": 200,
                   "description": "initialize, tools/list, tools/call, resources/templates/list, resources/read, "
                                  "ping, notifications/initialized ... (an unknown one: a JSON-RPC error)"},
        "params": {"type": "object", "description": "The method's parameters"}}}
# Above the longest wait of ``ask`` over HTTP (tools.HTTP_WAIT_MAX_S), below API Gateway's 30 s.
EXCHANGE_LIMIT_S = 27.0


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def exchange(rt: "Runtime", owner_id: int, headers: dict[str, str], body: bytes) -> Answer:
    """Serve one POST through the SDK (in an event loop of its own: this thread's, or a thread's of its own
    when this one runs a loop already) and return its answer."""
    from functools import partial

    from zerg.mcp_servers.client import in_own_loop

    return in_own_loop(partial(_exchange, rt, owner_id, headers, body))


@lru_cache(maxsize=1)
def _frame_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(FRAME)


def frame_refusal(body: bytes) -> Answer | None:
    """400 ``invalid request`` naming the first problem when ``body`` is JSON but not a frame of
    :data:`FRAME` (a batch, a response, an id or method out of bounds, a key of its own); None
    otherwise. Text that is not JSON is left to the SDK, whose answer is the parse error."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    problem = next(iter(_frame_validator().iter_errors(message)), None)
    if problem is None:
        return None
    where = "/".join(str(p) for p in problem.absolute_path) or "the message"
    return jsonrpc_error(400, -32600, f"Invalid Request: {where}: {problem.message[:300]}")


def media_type_refusal(headers: dict[str, str]) -> Answer | None:
    """415 as a JSON-RPC error unless the body says it is JSON (the SDK's own answer is plain text)."""
    kind = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if kind.split(";", 1)[0].strip().lower() == "application/json":
        return None
    return jsonrpc_error(415, -32600, f"Content-Type must be application/json, got {kind[:100]!r}")


def jsonrpc_error(status: int, code: int, message: str) -> Answer:
    """A JSON-RPC error answer of our own (the exchange's time limit, an SDK that gave no answer)."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    return Answer(status, {"Content-Type": "application/json"}, body)


async def _exchange(rt: "Runtime", owner_id: int, headers: dict[str, str], body: bytes) -> Answer:
    import anyio
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from zerg.api.mcpserver.server import build_server

    manager = StreamableHTTPSessionManager(build_server(rt, owner_id, "http"), stateless=True, json_response=False)
    answer = Answer(0)
    chunks: list[bytes] = []
    delivered = anyio.Event()
    done = anyio.Event()

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client stays until the answer is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            for name, value in message.get("headers") or []:
                answer.headers[name.decode("latin-1")] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body") or b"")
            if not message.get("more_body"):
                done.set()

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "https",
        "path": PATH, "raw_path": PATH.encode(), "root_path": "", "query_string": b"",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in headers.items()],
        "client": ("127.0.0.1", 0), "server": ("zerg", 443),
    }
    with anyio.move_on_after(EXCHANGE_LIMIT_S) as limit:
        async with manager.run():
            await manager.handle_request(scope, receive, send)
            await done.wait()
    done.set()
    late = f"the request did not complete within {EXCHANGE_LIMIT_S:g} s"
    if limit.cancelled_caught and not answer.status:
        return jsonrpc_error(200, -32001, late)
    if not answer.status:
        return jsonrpc_error(500, -32603, "the MCP transport gave no answer")
    if limit.cancelled_caught:  # the event stream had begun: it ends with the request's error, not mid-air
        error = {"jsonrpc": "2.0", "id": _request_id(body), "error": {"code": -32001, "message": late}}
        chunks.append(f"event: message\r\ndata: {json.dumps(error)}\r\n\r\n".encode())
    answer.body = b"".join(chunks)
    kind = next((v for k, v in answer.headers.items() if k.lower() == "content-type"), "")
    if answer.status >= 400 and not kind.startswith("application/json"):  # the SDK's few plain-text refusals
        text = answer.body.decode("utf-8", "replace").strip()[:300] or f"HTTP {answer.status}"
        return jsonrpc_error(answer.status, -32600, text)
    # Keep-alive and chunking are the HTTP server's business, not the handler's.
    answer.headers = {k: v for k, v in answer.headers.items()
                      if k.lower() not in ("connection", "content-length", "transfer-encoding")}
    return answer


def _request_id(body: bytes) -> int | str | None:
    """The JSON-RPC id of the request in ``body`` (None when it has none or is not one)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None
