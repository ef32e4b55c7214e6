"""Web Push: the deployment's VAPID public key, the owner's browser subscriptions (add, list,
remove; keys never returned) and a test push to them."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.api.deps import MAX_ID, Owner, Rt, Session, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import PushKey, PushSubscription, PushSubscriptionList, PushTestResult, responses
from zerg.notify import push, push_subscriptions
from zerg.notify.push import SubscriptionIn

router = Router()

SubscriptionId = Annotated[int, Path(ge=1, le=MAX_ID, description="A subscription id, as the list gives it")]


def _public(row: dict) -> dict:
    return {k: row[k] for k in ("id", "endpoint", "device_id", "created_at", "last_sent_at", "failures")}


@router.get("/api/jarvis/push/key", summary="The VAPID public key browsers subscribe with",
            responses=responses(200, "The key", PushKey, 401, 503))
def push_key(owner_id: Owner, rt: Rt):
    from zerg.sealing import SealError

    try:
        return json_response({"public_key": push.public_key(rt)})
    except SealError as exc:  # a deployment problem (no key to seal with), not the caller's
        raise ApiError(503, "unavailable", f"cannot make the VAPID key: {exc}") from None


@router.post("/api/jarvis/push/subscriptions",
             summary="Subscribe a browser (idempotent per endpoint; at most 20 per owner)",
             responses=responses(201, "The subscription (the same one again for a known endpoint)", PushSubscription,
                                 400, 401, 409, 413, 415))
def subscribe(body: SubscriptionIn, caller: Session, rt: Rt):
    refusal = push.endpoint_refusal(body.endpoint, rt.settings)
    if refusal is not None:
        raise ApiError(422, "validation_error", f"endpoint: {refusal}")
    try:
        with rt.pool.connection() as conn:
            row, _ = push_subscriptions.subscribe(conn, caller.owner_id, body.endpoint, body.keys.p256dh,
                                                  body.keys.auth, limit=push.MAX_SUBSCRIPTIONS,
                                                  device_id=caller.device_id)
    except push_subscriptions.TooMany as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    return json_response(_public(row), status=201)


@router.get("/api/jarvis/push/subscriptions", summary="The owner's push subscriptions (never their keys)",
            responses=responses(200, "Oldest first", PushSubscriptionList, 401))
def list_subscriptions(owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        rows = push_subscriptions.list_for_owner(conn, owner_id)
    return json_response({"subscriptions": [_public(r) for r in rows]})


@router.delete("/api/jarvis/push/subscriptions/<subscription_id>", summary="Remove a push subscription",
               responses=responses(204, "Removed", None, 401, 404))
def delete_subscription(subscription_id: SubscriptionId, owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        if not push_subscriptions.delete(conn, owner_id, subscription_id):
            raise not_found(f"push subscription {subscription_id}")
    return Response(status_code=204)


@router.post("/api/jarvis/push/test", summary="Send a test push to each of the owner's subscriptions (recorded)",
             responses=responses(200, "One notification per subscription", PushTestResult, 401, 409))
def test_push(owner_id: Owner, rt: Rt):
    from zerg.alerts.messages import base_url

    with rt.pool.connection() as conn:
        if not push_subscriptions.has_any(conn, owner_id):
            raise ApiError(409, "conflict", "no push subscription: subscribe a browser first "
                                            "(POST /api/jarvis/push/subscriptions)")
    message = push.PushMessage(title="Zerg test notification", body="Push notifications reach this browser.",
                               url=f"{base_url(rt.settings)}/#/", severity="info", tag="zerg-test")
    rows = push.notify(rt, owner_id, message, purpose="test")
    return json_response({"notifications": [{k: v for k, v in r.items() if k != "owner_id"} for r in rows]})
