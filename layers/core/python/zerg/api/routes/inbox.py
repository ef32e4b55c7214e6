"""The task inbox: background runs' results (severity, headline, details), unacknowledged first,
and acknowledging one (which stops a critical alert's escalation). Owner-scoped: another owner's
run gets the same 404 as a run without an item."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from zerg.alerts import background, inbox
from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import not_found
from zerg.api.models import InboxItem, InboxList, responses

router = Router()

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="The background run whose item to acknowledge")]


@router.get("/api/jarvis/inbox", summary="Background results, unacknowledged first, newest first",
            responses=responses(200, "The owner's inbox items", InboxList, 401))
def list_inbox(
    owner_id: Owner,
    rt: Rt,
    limit: Annotated[int, Query(ge=1, le=200, description="How many items")] = 50,
    unacknowledged: Annotated[bool, Query(description="true: only the items not acknowledged yet")] = False,
):
    from zerg.approvals.wait import pending_views

    with rt.pool.connection() as conn:
        rows = inbox.list_for_owner(conn, owner_id, limit=limit, unacknowledged_only=unacknowledged)
        waiting = pending_views(conn, owner_id)
    return json_response({"items": rows, "approvals": waiting})


@router.post("/api/jarvis/inbox/<run_id>/ack", summary="Acknowledge a background result (stops its escalation)",
             responses=responses(200, "The item, acknowledged (acknowledging again changes nothing)", InboxItem,
                                 401, 404))
def acknowledge(run_id: RunId, owner_id: Owner, rt: Rt):
    item = background.acknowledge(rt, owner_id, run_id)
    if item is None:
        raise not_found(f"inbox item of run {run_id}")
    return json_response(item)
