"""The owner's notification policy (read, change) and the notifications log (every email and SMS
sent, held or suppressed, and why; never a reply token)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import NotificationPage, NotificationPolicy, responses
from zerg.notify import policy
from zerg.notify.policy import PolicyChange

router = Router()


@router.get("/api/jarvis/policy", summary="The owner's notification policy (the defaults until changed)",
            responses=responses(200, "The policy", NotificationPolicy, 401))
def get_policy(owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        return json_response(policy.get_policy(conn, owner_id).as_dict())


@router.patch("/api/jarvis/policy", summary="Change the owner's notification policy (only the fields given)",
              responses=responses(200, "The whole policy after the change", NotificationPolicy, 400, 401, 415))
def patch_policy(body: PolicyChange, owner_id: Owner, rt: Rt):
    try:
        with rt.pool.connection() as conn:
            changed = policy.set_policy(conn, owner_id, body)
    except policy.PolicyError as exc:
        raise ApiError(422, "validation_error", str(exc)) from None
    return json_response(changed.as_dict())


@router.get("/api/jarvis/notifications", summary="The owner's notifications, newest first",
            responses=responses(200, "Newest first", NotificationPage, 401))
def list_notifications(
    owner_id: Owner,
    rt: Rt,
    limit: Annotated[int, Query(ge=1, le=200, description="How many")] = 50,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only ids below this (the next page)")] = None,
):
    from zerg.notify import notifications

    with rt.pool.connection() as conn:
        rows = notifications.list_for_owner(conn, owner_id, limit=limit, before_id=before_id)
    shown = [{k: v for k, v in r.items() if k != "owner_id"} for r in rows]
    return json_response({"notifications": shown,
                          "next_before_id": rows[-1]["id"] if len(rows) == limit else None})
