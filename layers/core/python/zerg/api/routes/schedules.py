"""The owner's schedules: create, list, read, change (PATCH any subset), delete.

Every route goes through :mod:`zerg.schedules.service`, like ``zerg schedules`` and the
supervisor's directives: another owner's schedule is 404 exactly like a missing one; an
expression, time zone or field the service refuses is 422 with its message; a taken name or the
per-owner limit is 409; EventBridge Scheduler failing is 503 and the row is left as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import RETRY_AFTER_S, ApiError
from zerg.api.models import Schedule, ScheduleList, SchedulePreview, responses
from zerg.schedules import service
from zerg.schedules.spec import SchedulePatch, SchedulePreviewSpec, ScheduleSpec

router = Router()

ScheduleId = Annotated[int, Path(ge=1, le=MAX_ID, description="A schedule's id, as GET /api/jarvis/schedules lists it")]


@contextmanager
def _answers() -> Iterator[None]:
    """The service's refusals as HTTP answers."""
    try:
        yield
    except service.ScheduleError as exc:
        raise ApiError(422, "validation_error", str(exc)) from None
    except service.ScheduleNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except service.ScheduleConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    except service.ScheduleUnavailable as exc:
        raise ApiError(503, "unavailable", str(exc), headers={"Retry-After": str(RETRY_AFTER_S)}) from None


@router.post("/api/jarvis/schedules", summary="Create a schedule (a background check, the digest or a reminder)",
             description="Exactly one of cron, rate and at; task is required unless kind is digest (422 otherwise).",
             responses=responses(201, "The schedule, with its Scheduler expression and next fire", Schedule,
                                 400, 401, 409, 415, 503))
def create_schedule(body: ScheduleSpec, owner_id: Owner, rt: Rt):
    with _answers():
        return json_response(service.create(rt, owner_id, body), status=201)


@router.post("/api/jarvis/schedules/preview", summary="The next fires of an expression, as a schedule would read it",
             description="Exactly one of cron, rate and at (422 otherwise, with the message creating it would give); "
                         "nothing is written. The schedule form calls it as the owner types.",
             responses=responses(200, "The expression, its time zone and its next fires", SchedulePreview, 400, 401, 415))
def preview_schedule(body: SchedulePreviewSpec, owner_id: Owner, rt: Rt):
    with _answers():
        return json_response(service.preview(rt, owner_id, body))


@router.get("/api/jarvis/schedules", summary="The owner's schedules",
            responses=responses(200, "Oldest first", ScheduleList, 401))
def list_schedules(owner_id: Owner, rt: Rt):
    return json_response({"schedules": service.list_schedules(rt, owner_id)})


@router.get("/api/jarvis/schedules/<schedule_id>", summary="One schedule",
            responses=responses(200, "The schedule", Schedule, 401, 404))
def get_schedule(schedule_id: ScheduleId, owner_id: Owner, rt: Rt):
    with _answers():
        return json_response(service.get(rt, owner_id, schedule_id))


@router.patch("/api/jarvis/schedules/<schedule_id>",
              summary="Change a schedule: any subset of the fields; cron, rate or at replaces the expression",
              description="At most one of cron, rate and at; a check or reminder keeps a task (422 otherwise).",
              responses=responses(200, "The schedule as changed", Schedule, 400, 401, 404, 409, 415, 503))
def patch_schedule(schedule_id: ScheduleId, body: SchedulePatch, owner_id: Owner, rt: Rt):
    with _answers():
        return json_response(service.update(rt, owner_id, schedule_id, body))


@router.delete("/api/jarvis/schedules/<schedule_id>", summary="Delete a schedule (and its Scheduler schedule)",
               responses=responses(204, "Deleted", None, 401, 404, 503))
def delete_schedule(schedule_id: ScheduleId, owner_id: Owner, rt: Rt):
    with _answers():
        service.delete(rt, owner_id, schedule_id)
    return Response(status_code=204)
