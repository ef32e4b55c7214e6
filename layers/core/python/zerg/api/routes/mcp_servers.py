"""The owner's MCP servers (issue 30): list, read, register or replace (PUT, which lists the server's
tools at once), list the tools again, remove. Never a secret out."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.api.deps import Owner, Rt, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import McpServer, McpServerList, responses
from zerg.mcp_servers import NAME_PATTERN, ServerSpec

router = Router()

Name = Annotated[str, Path(pattern=NAME_PATTERN, min_length=1, max_length=24,
                           description="The server's name, as its tools are named: mcp__<name>__<tool>")]


@router.get("/api/jarvis/mcp/servers", summary="The owner's MCP servers and their cached tools (never secrets)",
            responses=responses(200, "The servers by name", McpServerList, 401))
def list_servers(owner_id: Owner, rt: Rt):
    from zerg import mcp_servers

    with rt.pool.connection() as conn:
        servers = mcp_servers.list_servers(conn, owner_id)
    return json_response({"servers": [s.as_dict() for s in servers]})


@router.get("/api/jarvis/mcp/servers/<name>", summary="One MCP server and its cached tools",
            responses=responses(200, "The server", McpServer, 401, 404))
def get_server(name: Name, owner_id: Owner, rt: Rt):
    from zerg import mcp_servers

    with rt.pool.connection() as conn:
        try:
            server = mcp_servers.get_server(conn, owner_id, name)
        except mcp_servers.ServerNotFound:
            raise not_found(f"MCP server {name!r}") from None
    return json_response(server.as_dict())


@router.put("/api/jarvis/mcp/servers/<name>",
            summary="Register or replace an MCP server (a secret is sealed for the owner, never returned); its tools "
                    "are listed at once (listing_note says why when they could not be, or that the next worker "
                    "lists them where the API may not open the secret)",
            responses=responses(200, "The server as stored, with its listing", McpServer, 400, 401, 409, 415, 503))
def put_server(name: Name, body: ServerSpec, owner_id: Owner, rt: Rt):
    from zerg import mcp_servers
    from zerg.sealing import SealError

    try:
        with rt.pool.connection() as conn:
            mcp_servers.put_server(conn, rt.sealer, owner_id, name, body)
        server = mcp_servers.refresh(rt.pool.connection, rt.settings, rt.sealer, owner_id, name,
                                     timeout_s=mcp_servers.API_LISTING_S)
    except SealError as exc:  # sealing failed: a deployment problem (key unavailable), not the caller's
        raise ApiError(503, "unavailable", f"cannot seal the server's secret: {exc}") from None
    except mcp_servers.ServerNotFound:  # removed meanwhile
        raise not_found(f"MCP server {name!r}") from None
    except mcp_servers.SecretWouldBeLost as exc:  # a new url, no secret: the stored one is not dropped unasked
        raise ApiError(409, "conflict", str(exc)) from None
    return json_response(server.as_dict())


@router.post("/api/jarvis/mcp/servers/<name>/tools", summary="List the server's tools again (and cache them)",
             responses=responses(200, "The server with its new listing (listing_note: why it failed, or that the "
                                 "next worker lists it)", McpServer, 401, 404))
def refresh_server(name: Name, owner_id: Owner, rt: Rt):
    from zerg import mcp_servers

    try:
        server = mcp_servers.refresh(rt.pool.connection, rt.settings, rt.sealer, owner_id, name,
                                     timeout_s=mcp_servers.API_LISTING_S)
    except mcp_servers.ServerNotFound:
        raise not_found(f"MCP server {name!r}") from None
    return json_response(server.as_dict())


@router.delete("/api/jarvis/mcp/servers/<name>", summary="Remove an MCP server, its sealed secret and its listing",
               responses=responses(204, "Removed", None, 401, 404))
def delete_server(name: Name, owner_id: Owner, rt: Rt):
    from zerg import mcp_servers

    with rt.pool.connection() as conn:
        try:
            mcp_servers.remove_server(conn, owner_id, name)
        except mcp_servers.ServerNotFound:
            raise not_found(f"MCP server {name!r}") from None
    return Response(status_code=204)
