"""The owner's devices and sessions: list them, revoke one session, revoke one device (its secret
and every session issued under it). Every read and revocation is owner-scoped: another owner's id
gets the same 404 as one that does not exist."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.api.deps import MAX_ID, Owner, Rt, Session, json_response
from zerg.api.errors import not_found
from zerg.api.models import DeviceRevoked, OwnerInfo, SessionList, SessionRevoked, responses
from zerg.identity import devices, sessions

router = Router()

SessionId = Annotated[UUID, Path(description="A session id (the token's sid), as GET /api/jarvis/sessions lists it")]
DeviceId = Annotated[int, Path(ge=1, le=MAX_ID, description="A device id, as GET /api/jarvis/sessions lists it")]


@router.get("/api/jarvis/me", summary="Who is signed in: the caller's owner id and name",
            responses=responses(200, "The signed-in owner", OwnerInfo, 401, 404))
def who_am_i(owner_id: Owner, rt: Rt):
    from zerg.owners import owner_name

    with rt.pool.connection() as conn:
        name = owner_name(conn, owner_id)
    if name is None:  # the owner was deleted under a live session
        raise not_found(f"owner {owner_id}")
    return json_response({"owner_id": owner_id, "name": name})


@router.get("/api/jarvis/sessions", summary="The owner's devices and sessions (never a secret, hash or token)",
            responses=responses(200, "Devices oldest first, sessions newest first", SessionList, 401))
def list_sessions(caller: Session, rt: Rt):
    with rt.pool.connection() as conn:
        device_rows = devices.list_devices(conn, caller.owner_id)
        session_rows = sessions.list_sessions(conn, caller.owner_id)
    current = str(caller.session_id)
    return json_response({"devices": device_rows,
                          "sessions": [{**s, "current": s["session_id"] == current} for s in session_rows]})


@router.delete("/api/jarvis/sessions/<session_id>", summary="Revoke one of the owner's sessions",
               responses=responses(200, "The session is revoked (again: unchanged)", SessionRevoked, 401, 404))
def revoke_session(session_id: SessionId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        revoked = sessions.revoke_session(conn, owner_id, session_id)
    if revoked is None:
        raise not_found(f"session {session_id}")
    return json_response(revoked)


@router.delete("/api/jarvis/devices/<device_id>",
               summary="Revoke one of the owner's devices: its secret and every session issued under it",
               responses=responses(200, "The device is revoked (again: unchanged)", DeviceRevoked, 401, 404))
def revoke_device(device_id: DeviceId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        revoked = devices.revoke_device(conn, owner_id, device_id)
    if revoked is None:
        raise not_found(f"device {device_id}")
    return json_response(revoked)
