"""The owner's approval policy (docs/approvals.md): read it, replace it, reset it to the defaults,
through :mod:`zerg.approvals` (the same validation as ``zerg approvals policy set``); and the owner's
approvals themselves: list them, approve or deny one (:mod:`zerg.approvals.wait`, owner-scoped, once)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg import approvals
from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import ApprovalAnswer, ApprovalList, ApprovalPolicyView, responses
from zerg.approvals.policy import Policy

router = Router()
ApprovalId = Annotated[int, Path(ge=1, le=MAX_ID, description="An approval's id, as GET /api/jarvis/approvals lists it")]


@router.get("/api/jarvis/approvals/policy", summary="The owner's approval policy in effect (the defaults until set)",
            responses=responses(200, "The policy", ApprovalPolicyView, 401))
def get_approval_policy(owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        return json_response(approvals.view(conn, owner_id))


@router.put("/api/jarvis/approvals/policy",
            summary="Replace the owner's approval policy (fields left out are the defaults)",
            responses=responses(200, "The policy in effect after the change", ApprovalPolicyView, 400, 401, 415))
def put_approval_policy(body: Policy, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        approvals.set_policy(conn, owner_id, body)
        return json_response(approvals.view(conn, owner_id))


@router.delete("/api/jarvis/approvals/policy", summary="Forget the owner's approval policy: back to the defaults",
               responses=responses(200, "The default policy, now in effect", ApprovalPolicyView, 401))
def delete_approval_policy(owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        approvals.reset_policy(conn, owner_id)
        return json_response(approvals.view(conn, owner_id))


@router.get("/api/jarvis/approvals", summary="The owner's pending approvals and the recent answered ones",
            responses=responses(200, "Pending first (oldest first), then the recent answered ones", ApprovalList, 401))
def list_approvals(owner_id: Owner, rt: Rt):
    from zerg.approvals import wait

    return json_response({"approvals": wait.listing(rt, owner_id)})


def _answer(rt, owner_id: int, approval_id: int, decision: str):
    from zerg.approvals import wait

    try:
        answer = (wait.approve if decision == "approve" else wait.deny)(rt, owner_id, approval_id)
    except wait.ApprovalNotFound:
        raise not_found(f"approval {approval_id}") from None
    if not answer.decided:  # answered already, expired or its run ended: nothing changed
        raise ApiError(409, "conflict", answer.message)
    return json_response({"id": approval_id, "status": answer.status, "message": answer.message})


@router.post("/api/jarvis/approvals/<approval_id>/approve",
             summary="Approve a pending approval: its call runs, or its directive is made, once",
             responses=responses(200, "Approved", ApprovalAnswer, 401, 404, 409))
def approve_approval(approval_id: ApprovalId, owner_id: Owner, rt: Rt):
    return _answer(rt, owner_id, approval_id, "approve")


@router.post("/api/jarvis/approvals/<approval_id>/deny",
             summary="Deny a pending approval: its call never runs (the model is told) or its directive is never made",
             responses=responses(200, "Denied", ApprovalAnswer, 401, 404, 409))
def deny_approval(approval_id: ApprovalId, owner_id: Owner, rt: Rt):
    return _answer(rt, owner_id, approval_id, "deny")
