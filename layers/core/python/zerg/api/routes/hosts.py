"""The owner's SSH hosts: list, read, register or replace (PUT), remove. Never key material out."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.api.deps import Owner, Rt, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import SSHHost, SSHHostList, SSHHostTest, responses
from zerg.hosts.spec import ALIAS_PATTERN, HostSpec

router = Router()

Alias = Annotated[str, Path(pattern=ALIAS_PATTERN, min_length=1, max_length=64,
                            description="The host's alias, as ssh_exec names it")]


@router.get("/api/jarvis/hosts", summary="The owner's SSH hosts (fingerprints, never keys)",
            responses=responses(200, "The hosts by alias", SSHHostList, 401))
def list_hosts(owner_id: Owner, rt: Rt):
    from zerg.hosts import registry

    with rt.pool.connection() as conn:
        hosts = registry.list_hosts(conn, rt.settings, owner_id)
    return json_response({"hosts": [h.as_dict() for h in hosts]})


@router.get("/api/jarvis/hosts/<alias>", summary="One SSH host",
            responses=responses(200, "The host", SSHHost, 401, 404))
def get_host(alias: Alias, owner_id: Owner, rt: Rt):
    from zerg.hosts import registry

    with rt.pool.connection() as conn:
        try:
            host = registry.get_host(conn, rt.settings, owner_id, alias)
        except registry.HostNotFound:
            raise not_found(f"ssh host {alias!r}") from None
    return json_response(host.as_dict())


@router.put("/api/jarvis/hosts/<alias>",
            summary="Register or replace an SSH host (the private key is sealed for the owner, never returned)",
            responses=responses(200, "The host as stored", SSHHost, 400, 401, 415, 503))
def put_host(alias: Alias, body: HostSpec, owner_id: Owner, rt: Rt):
    from zerg.hosts import registry
    from zerg.sealing import SealError

    try:
        with rt.pool.connection() as conn:
            host, _ = registry.put_host(conn, rt.sealer, owner_id, alias, body)
    except SealError as exc:  # a deployment problem (key unavailable), not the caller's
        raise ApiError(503, "unavailable", f"cannot seal the private key: {exc}") from None
    return json_response(host.as_dict())


@router.post("/api/jarvis/hosts/<alias>/test",
             summary="Test connection: run a harmless `true` on the host through ssh_exec (its allowlist, key and "
                     "host-key rules)",
             description="200 whether or not it connected: ok and message say what happened, as a sentence.",
             responses=responses(200, "What happened, with the host key's fingerprint", SSHHostTest, 401, 404))
def test_host(alias: Alias, owner_id: Owner, rt: Rt):
    from zerg.hosts import registry
    from zerg.tools.ssh import check_connection

    with rt.pool.connection() as conn:
        try:
            host = registry.get_host(conn, rt.settings, owner_id, alias)
        except registry.HostNotFound:
            raise not_found(f"ssh host {alias!r}") from None
    return json_response(check_connection(rt, owner_id, host.as_dict()))


@router.delete("/api/jarvis/hosts/<alias>", summary="Remove an SSH host and its sealed key",
               responses=responses(204, "Removed", None, 401, 404, 409))
def delete_host(alias: Alias, owner_id: Owner, rt: Rt):
    from zerg.hosts import registry

    with rt.pool.connection() as conn:
        try:
            registry.remove_host(conn, rt.settings, owner_id, alias)
        except registry.HostNotFound:
            raise not_found(f"ssh host {alias!r}") from None
        except registry.BootstrapHost as exc:
            raise ApiError(409, "conflict", str(exc)) from None
    return Response(status_code=204)
