"""The owner's inbound messages: replies by email and SMS, and what became of each (a run, an
acknowledgement, a keyword, or why it was refused). Owner-scoped: messages from unknown senders
have no owner and are never listed."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.models import InboundPage, responses

router = Router()


@router.get("/api/jarvis/inbound", summary="The owner's inbound email and SMS, newest first",
            responses=responses(200, "Newest first", InboundPage, 401))
def list_inbound(
    owner_id: Owner,
    rt: Rt,
    limit: Annotated[int, Query(ge=1, le=200, description="How many")] = 50,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only ids below this (the next page)")] = None,
):
    from zerg.inbound import messages

    with rt.pool.connection() as conn:
        rows = messages.list_for_owner(conn, owner_id, limit=limit, before_id=before_id)
    return json_response({"messages": rows, "next_before_id": rows[-1]["id"] if len(rows) == limit else None})
