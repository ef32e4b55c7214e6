"""The owner's supervisor thread, paged newest first."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.models import ThreadPage, responses
from zerg.runs import threads

router = Router()


@router.get("/api/jarvis/thread", summary="The owner's supervisor thread, newest page first",
            responses=responses(200, "One page of the thread", ThreadPage, 401))
def get_thread(
    owner_id: Owner,
    rt: Rt,
    limit: Annotated[int, Query(ge=1, le=200, description="Messages per page")] = 50,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only messages older than this id")] = None,
):
    with rt.pool.connection() as conn:
        thread = threads.get_thread(conn, owner_id)
        rows = [] if thread is None else threads.page_messages(
            conn, owner_id, thread["id"], before_id=before_id or 2**62, limit=limit)
    return json_response({
        "thread_id": thread["id"] if thread else None,
        "messages": list(reversed(rows)),
        "next_before_id": rows[-1]["id"] if len(rows) == limit else None,
    })
