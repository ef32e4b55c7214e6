"""The owner's contacts: add one (a 6-digit code is sent to it), verify it with that code, list
them, remove one. Notifications go only to verified contacts (:mod:`zerg.notify.verification`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import Contact, ContactAdded, ContactList, responses

if TYPE_CHECKING:
    from zerg.notify.verification import ContactError

router = Router()

ContactId = Annotated[int, Path(ge=1, le=MAX_ID, description="A contact's id, as GET /api/jarvis/contacts lists it")]
_ERRORS = {404: "not_found", 409: "conflict", 422: "validation_error", 429: "too_many_requests", 503: "unavailable"}


def _address_by_kind(schema: dict) -> None:
    """The document's form of the address rule (zerg.notify.verification.normalise): per kind."""
    schema["oneOf"] = [{"properties": {"kind": {"const": kind}, "address": {"format": form}}}
                       for kind, form in (("email", "email-address"), ("sms", "e164-phone"))]


class AddContactBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_address_by_kind)
    kind: Literal["email", "sms"]
    address: str = Field(min_length=1, max_length=320,
                         description="An email address (owner@example.com) or a phone number in E.164 form (+15551234567)")


class VerifyContactBody(AddContactBody):
    code: str = Field(pattern=r"^\s*\d{6}\s*$", description="The 6 digits the verification message gave")


def _refusal(exc: "ContactError") -> ApiError:
    """The service's refusal as the HTTP answer (its status; Retry-After when it knows one)."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
    return ApiError(exc.status, _ERRORS.get(exc.status, "bad_request"), str(exc), headers=headers)


@router.post("/api/jarvis/contacts", summary="Add a contact and send it a 6-digit verification code",
             status_code=202, responses=responses(202, "The code was sent (or the contact was verified already)",
                                                  ContactAdded, 400, 401, 409, 415, 429, 503))
def add_contact(body: AddContactBody, owner_id: Owner, rt: Rt):
    from zerg.notify import verification as service

    try:
        added = service.add(rt, owner_id, body.kind, body.address)
    except service.ContactError as exc:
        raise _refusal(exc) from None
    return json_response({"contact": added.contact, "code_sent": added.code_sent,
                          "notification_id": added.notification_id}, status=202)


@router.post("/api/jarvis/contacts/verify", summary="Verify a contact with the code sent to it",
             description="The code must be the one last sent to that contact, within 10 minutes: a wrong code is 422 "
                         "with the attempts left, no pending or an expired code 422 saying to add the contact again.",
             responses=responses(200, "The contact, verified", Contact, 400, 401, 404, 415, 429))
def verify_contact(body: VerifyContactBody, owner_id: Owner, rt: Rt):
    from zerg.notify import verification as service

    try:
        contact = service.verify(rt, owner_id, body.kind, body.address, body.code)
    except service.ContactError as exc:
        raise _refusal(exc) from None
    return json_response(contact)


@router.get("/api/jarvis/contacts", summary="The owner's contacts, verified or not",
            responses=responses(200, "By kind, then address", ContactList, 401))
def list_contacts(owner_id: Owner, rt: Rt):
    from zerg.notify import verification as service

    return json_response({"contacts": service.list_contacts(rt, owner_id)})


@router.delete("/api/jarvis/contacts/<contact_id>", summary="Remove a contact (nothing is sent to it any more)",
               responses=responses(204, "Removed", None, 401, 404))
def remove_contact(contact_id: ContactId, owner_id: Owner, rt: Rt):
    from zerg.notify import verification as service

    try:
        service.remove(rt, owner_id, contact_id)
    except service.ContactError as exc:
        raise _refusal(exc) from None
    return Response(status_code=204)
