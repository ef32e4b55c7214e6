"""Jarvis: route an utterance (quick or supervisor), answer one in quick mode, mint a voice session."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import QuickReply, RealtimeSession, RouteDecision, responses
from zerg.validation import NOT_BLANK, json_int

router = Router()

UTTERANCE_CHARS = 4000
HISTORY_ITEMS = 20


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class HistoryMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(max_length=UTTERANCE_CHARS)


class RouteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    utterance: str = Field(min_length=1, max_length=UTTERANCE_CHARS, json_schema_extra={"pattern": NOT_BLANK},
                           description="What the user said or typed")
    history: list[HistoryMessage] | None = Field(
        default=None, max_length=HISTORY_ITEMS, description="The conversation's recent messages, oldest first (data)")

    _utterance = field_validator("utterance")(_not_blank)


class QuickBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    utterance: str = Field(min_length=1, max_length=UTTERANCE_CHARS, json_schema_extra={"pattern": NOT_BLANK},
                           description="What the user said or typed")
    failed_run_id: json_int(ge=1, le=MAX_ID) | None = Field(default=None, description=(
        "The owner's run that failed or timed out: the answer starts with an apology that the deeper check failed"))

    _utterance = field_validator("utterance")(_not_blank)


@router.post("/api/jarvis/route", summary="Quick answer or supervisor run? (rules first, a model only when unsure)",
             responses=responses(200, "Where the utterance goes", RouteDecision, 400, 401, 415, 503))
def route_utterance(body: RouteBody, owner_id: Owner, rt: Rt):
    from zerg.jarvis import intent

    history = [m.model_dump() for m in body.history or []]
    return json_response(intent.route(rt, owner_id, body.utterance, history).as_dict())


@router.post("/api/jarvis/quick", summary="Answer in quick mode, without a run (stored on the thread)",
             responses=responses(200, "The answer, and the thread messages it added", QuickReply,
                                 400, 401, 404, 409, 415, 429, 503))
def quick_answer(body: QuickBody, owner_id: Owner, rt: Rt):
    from zerg.jarvis import quick

    try:
        answered = quick.answer(rt, owner_id, body.utterance, body.failed_run_id)
    except quick.QuickRefused as exc:
        raise ApiError(exc.status, exc.error, exc.message) from None
    return json_response(answered.as_dict())


@router.post("/api/jarvis/realtime/session", summary="Mint a short-lived OpenAI Realtime voice session",
             responses=responses(200, "An ephemeral client secret for the browser", RealtimeSession, 401, 429, 503))
def realtime_session(owner_id: Owner, rt: Rt):
    """An owner past their daily spending cap gets no session (429): voice is paid on the server's key."""
    from zerg.alerts import budget
    from zerg.jarvis import realtime

    with rt.pool.connection() as conn:
        state = budget.today(conn, owner_id)
    try:
        state.check()
    except budget.SpendingCapReached as exc:
        raise ApiError(429, "spending_cap_reached", exc.state.message("no voice session was made")) from None
    try:
        return json_response(realtime.mint_session(rt.settings))
    except realtime.RealtimeUnavailable as exc:
        raise ApiError(503, "unavailable", str(exc)) from None
