"""The owner's organisational memory: list it, forget one memory, restore a forgotten one (within
30 days; then it is pruned). Owner-scoped: another owner's id gets the same 404 as one that does
not exist. Memories are added by the post-run extraction (add-only with dedup), never through the API."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import not_found
from zerg.api.models import Fact, FactList, responses
from zerg.memory import facts
from zerg.memory.facts import Category

router = Router()

FactId = Annotated[int, Path(ge=1, le=MAX_ID, description="A memory's id, as GET /api/jarvis/memory/facts lists it")]


@router.get("/api/jarvis/memory/facts", summary="The owner's organisational memories, most important first",
            responses=responses(200, "By importance, then most recently updated", FactList, 401))
def list_facts(
    owner_id: Owner,
    rt: Rt,
    category: Annotated[Category | None, Query(description="Only this category")] = None,
    limit: Annotated[int, Query(ge=1, le=200, description="How many")] = 50,
    forgotten: Annotated[bool, Query(description="true: the memories forgotten in the last 30 days "
                                                 "(restorable), newest first, instead")] = False,
):
    with rt.pool.connection() as conn:
        if forgotten:
            rows = facts.list_forgotten(conn, owner_id, category=category, limit=limit)
        else:
            rows = facts.list_facts(conn, owner_id, category=category, limit=limit)
    return json_response({"facts": rows})


@router.delete("/api/jarvis/memory/facts/<fact_id>", summary="Forget one of the owner's organisational memories",
               responses=responses(204, "Forgotten (restorable for 30 days)", None, 401, 404))
def forget_fact(fact_id: FactId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        if facts.forget_fact(conn, owner_id, fact_id) is None:
            raise not_found(f"memory {fact_id}")
    return Response(status_code=204)


@router.post("/api/jarvis/memory/facts/<fact_id>/restore",
             summary="Bring back an organisational memory forgotten less than 30 days ago",
             responses=responses(200, "The memory, restored", Fact, 401, 404))
def restore_fact(fact_id: FactId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        row = facts.restore_fact(conn, owner_id, fact_id)
    if row is None:
        raise not_found(f"forgotten memory {fact_id} (forgotten within the last {facts.FORGET_KEEP_DAYS} days)")
    return json_response(row)
