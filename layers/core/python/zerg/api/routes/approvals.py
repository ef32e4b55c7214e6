"""The owner's approval policy (docs/approvals.md): read it, replace it, reset it to the defaults,
through :mod:`zerg.approvals` (the same validation as ``zerg approvals policy set``)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from zerg import approvals
from zerg.api.deps import Owner, Rt, json_response
from zerg.api.models import ApprovalPolicyView, responses
from zerg.approvals.policy import Policy

router = Router()


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
