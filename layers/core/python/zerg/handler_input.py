"""What the Lambda handlers receive from the state machine: every input is a pydantic model,
checked first; and Step Functions' error objects, made readable.

A bad event raises :class:`InvalidEvent` whose message names each offending field; Step
Functions shows it as the error cause, and nothing has been touched yet.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

M = TypeVar("M", bound=BaseModel)


class InvalidEvent(ValueError):
    pass


def parse_event(model: type[M], event: Any, what: str) -> M:
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'event'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidEvent(f"invalid {what} event: {problems}") from None


class JobEvent(BaseModel):
    """What the state machine passes per worker job: ids only."""

    model_config = ConfigDict(extra="ignore")
    job_id: int = Field(gt=0)
    run_id: int = Field(gt=0)
    owner_id: int = Field(gt=0)


class HousekeepingEvent(BaseModel):
    """What a scheduled EventBridge rule sends the ingress function: which housekeeping task to run."""

    model_config = ConfigDict(extra="forbid")
    trigger: Literal["housekeeping"]
    task: Literal["retention", "memory-versions", "memory-facts", "embed"]


def describe_step_error(error: Any, prefix: str) -> str:
    """A Step Functions Catch output ``{"Error", "Cause"}`` as one readable line."""
    if isinstance(error, dict):
        name, cause = error.get("Error") or "Error", error.get("Cause") or ""
        try:
            parsed = json.loads(cause)
            if isinstance(parsed, dict):
                cause = parsed.get("errorMessage") or cause
        except (TypeError, ValueError):
            pass
        return f"{prefix}: {name}: {str(cause)[:500]}".rstrip(": ")
    return f"{prefix}: {str(error)[:500]}" if error else prefix
