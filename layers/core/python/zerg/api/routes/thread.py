"""The owner's supervisor thread, paged newest first."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from zerg.api.deps import int_param, json_response, owner_of, runtime
from zerg.runs import threads

router = Router()


@router.get("/api/jarvis/thread", summary="The owner's supervisor thread, newest page first")
def get_thread():
    rt = runtime()
    owner_id = owner_of(router.current_event)
    q = router.current_event.query_string_parameters or {}
    limit = int_param(q.get("limit"), "limit", default=50, hi=200)
    before = int_param(q.get("before_id"), "before_id", default=2**62)
    with rt.pool.connection() as conn:
        thread = threads.get_thread(conn, owner_id)
        rows = [] if thread is None else threads.page_messages(conn, owner_id, thread["id"], before_id=before, limit=limit)
    return json_response({
        "thread_id": thread["id"] if thread else None,
        "messages": list(reversed(rows)),
        "next_before_id": rows[-1]["id"] if len(rows) == limit else None,
    })
