"""What the Lambda handlers receive from the state machine: every input is a pydantic model,
checked first; and Step Functions' error objects, made readable.

A bad event raises :class:`InvalidEvent` whose message names each offending field; Step
Functions shows it as the error cause, and nothing has been touched yet.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from zerg.validation import problems

M = TypeVar("M", bound=BaseModel)
SNS_MESSAGE_MAX = 256 * 1024  # SNS refuses to publish a longer message


class InvalidEvent(ValueError):
    pass


def parse_event(model: type[M], event: Any, what: str) -> M:
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        raise InvalidEvent(f"invalid {what} event: {problems(exc.errors(), 'event')}") from None


class JobEvent(BaseModel):
    """What the state machine passes per worker job: ids only."""

    model_config = ConfigDict(extra="ignore")
    job_id: int = Field(gt=0)
    run_id: int = Field(gt=0)
    owner_id: int = Field(gt=0)
    # The run's W3C trace context (zerg.tracing); "" or absent: not traced. A malformed one is ignored.
    traceparent: str | None = Field(default=None, max_length=200)


class WorkerEvent(JobEvent):
    """The worker function's input: a job to run, or one to mark failed after its Lambda crashed."""

    action: Literal["run", "mark_failed", "await_approval", "resume_approval"] = "run"
    error: Any = Field(default=None, description="the Catch's error object, for mark_failed")
    # issue 27: the approval a held worker waits on, the callback task's token and how long it waits
    approval_id: int | None = Field(default=None, gt=0)
    task_token: str | None = Field(default=None, min_length=1, max_length=4096)
    timeout_s: int | None = Field(default=None, gt=0, le=86400)
    # run/resume: the execution's longest approval wait (the ceiling of the owner's policy expiry)
    approval_timeout_s: int | None = Field(default=None, gt=0, le=86400)


class SupervisorEvent(BaseModel):
    """The supervisor function's input: one step of a run, its memory writes, or an escalation step."""

    model_config = ConfigDict(extra="ignore")
    action: Literal["plan", "resume", "finalize", "fail", "remember", "escalate", "escalation_failed"]
    run_id: int = Field(gt=0)
    owner_id: int = Field(gt=0)
    thread_id: int | None = Field(default=None, gt=0)
    escalation_id: int | None = Field(default=None, gt=0)  # the escalation actions'
    traceparent: str | None = Field(default=None, max_length=200)  # the run's trace context (zerg.tracing)
    error: Any = None  # the run-level Catch's {"Error", "Cause"}, for fail (and escalation_failed)


class HousekeepingEvent(BaseModel):
    """What a scheduled EventBridge rule sends the ingress function: which housekeeping task to run."""

    model_config = ConfigDict(extra="forbid")
    trigger: Literal["housekeeping"]
    task: Literal["retention", "memory-versions", "memory-facts", "embed", "notifications", "schedules", "inbound"]


class ScheduleFireEvent(BaseModel):
    """What an EventBridge Scheduler schedule sends the ingress function: which schedule, and the
    time it was due (``<aws.scheduler.scheduled-time>``, ISO 8601 with Z or an offset)."""

    model_config = ConfigDict(extra="forbid")
    trigger: Literal["schedule"]
    schedule_id: int = Field(gt=0, le=2**63 - 1)
    scheduled_time: str = Field(max_length=64)

    @field_validator("scheduled_time")
    @classmethod
    def _iso_with_offset(cls, value: str) -> str:
        parse_scheduled_time(value)
        return value

    @property
    def when(self) -> datetime:
        return parse_scheduled_time(self.scheduled_time)


class SnsNotification(BaseModel):
    """The ``Sns`` object of an SNS record: who delivered it (``MessageId``, unique per publish and
    the same on every retry of it) and the ``Message`` text, whose content is the publisher's and is
    checked by whoever reads it (two-way SMS: :func:`zerg.inbound.sms.from_sns_record`)."""

    model_config = ConfigDict(extra="ignore")
    Type: Literal["Notification"] = "Notification"
    MessageId: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9-]+$")
    TopicArn: str | None = Field(default=None, max_length=256)
    Message: str = Field(max_length=SNS_MESSAGE_MAX)
    Timestamp: str | None = Field(default=None, max_length=64)


class SnsRecord(BaseModel):
    """One record of an SNS event (``{"Records": [...]}``) as Lambda delivers it."""

    model_config = ConfigDict(extra="ignore")
    EventSource: Literal["aws:sns"]
    Sns: SnsNotification


class SesVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")
    status: str = Field(min_length=1, max_length=40)  # PASS | FAIL | GRAY | PROCESSING_FAILED


class SesReceipt(BaseModel):
    """What SES decided on receipt: the envelope recipients and its verdicts."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    recipients: Annotated[list[Annotated[str, _cut(400)]], _cut(100)] = Field(min_length=1)
    spf: SesVerdict = Field(alias="spfVerdict")
    dkim: SesVerdict = Field(alias="dkimVerdict")
    spam: SesVerdict = Field(alias="spamVerdict")
    virus: SesVerdict = Field(alias="virusVerdict")
    dmarc: SesVerdict | None = Field(default=None, alias="dmarcVerdict")

    def verdicts(self) -> dict[str, str]:
        found = {"spf": self.spf.status, "dkim": self.dkim.status, "spam": self.spam.status, "virus": self.virus.status}
        return found | ({"dmarc": self.dmarc.status} if self.dmarc else {})


def _cut(limit: int) -> Any:
    """A validator cutting a string (or a list) to ``limit``: what a sender wrote is recorded, not refused."""
    return BeforeValidator(lambda value: value[:limit] if isinstance(value, (str, list)) else value)


class SesCommonHeaders(BaseModel):
    """The headers SES read from the message: the sender's text, cut to size, never a reason to refuse
    the record (a refused record would leave no row)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    from_: Annotated[list[Annotated[str, _cut(1000)]], _cut(50)] = Field(default_factory=list, alias="from")
    subject: Annotated[str | None, _cut(2000)] = None


class SesMail(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    # The S3 key's last part: letters, digits, dot, dash, underscore (no "/", never "..").
    message_id: str = Field(alias="messageId", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
    source: Annotated[str, _cut(400)] = ""  # the envelope sender (MAIL FROM), SPF-checked
    common_headers: SesCommonHeaders = Field(default_factory=SesCommonHeaders, alias="commonHeaders")

    @field_validator("message_id")
    @classmethod
    def _no_dot_dot(cls, value: str) -> str:
        if ".." in value:
            raise ValueError("must not contain '..'")
        return value


class SesMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    mail: SesMail
    receipt: SesReceipt


class SesRecord(BaseModel):
    """One record of SES's Lambda event (a receipt rule's Lambda action, Event invocation type). It
    carries no body: the rule's S3 action stored the raw message first (``inbound/email/{messageId}``)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    event_source: Literal["aws:ses"] = Field(alias="eventSource")
    ses: SesMessage


def parse_scheduled_time(text: str) -> datetime:
    """An ISO 8601 time with ``Z`` or an offset (``2026-11-22T06:00:00Z``) as an aware datetime;
    ValueError saying what is wrong otherwise (a time without an offset is ambiguous)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text[:64]!r} is not an ISO 8601 time such as 2026-11-22T06:00:00Z") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{text[:64]!r} has no time zone: end it with Z or an offset such as +01:00")
    return when


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
