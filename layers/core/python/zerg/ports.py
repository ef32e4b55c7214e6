"""The ports of the core: what the rest of the code asks of the world, as protocols, with the
message types they carry. The adapters implement them (Step Functions or the local engine for runs
and escalations, EventBridge Scheduler or the database rows for schedules, SES/SNS or the outbox for
email and SMS); :mod:`zerg.wiring` chooses one per port from the settings and hands it to the
runtime. Nothing here imports an adapter, so any layer may name a port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


# --- runs -----------------------------------------------------------------------------------------
class RunStarter(Protocol):
    """Starts and stops a run's execution (:mod:`zerg.runs.stepfunctions`, ``zerg.local.engine``).
    Starting is idempotent per run: the execution is named after it. ``traceparent``: the run's
    trace context (:func:`zerg.tracing.traceparent_for`, the same on every start), or None."""

    def start(self, run_id: int, owner_id: int, thread_id: int, traceparent: str | None = None) -> str: ...

    def stop(self, execution_arn: str, cause: str) -> None: ...

    def close(self) -> None: ...


# --- callback tasks: an execution waiting on a task token (issue 27: an approval's wait) -----------
class TaskTokenGone(RuntimeError):
    """Nothing waits on this task token any more: its task timed out, its execution ended or was
    stopped, or it was never issued (Step Functions' ``TaskTimedOut``, ``TaskDoesNotExist``, ``InvalidToken``)."""


class TaskTokens(Protocol):
    """Answers a ``.waitForTaskToken`` task (both run starters implement it: Step Functions and the
    local engine). Each raises :class:`TaskTokenGone` when nothing waits on ``token``."""

    def send_task_success(self, token: str, output: dict[str, Any]) -> None: ...

    def send_task_failure(self, token: str, error: str, cause: str) -> None: ...

    def send_task_heartbeat(self, token: str) -> None: ...


# --- escalations: the repeats of a critical alert ----------------------------------------------
class EscalationStarter(Protocol):
    """Starts and stops the execution that repeats a critical alert (:mod:`zerg.alerts.escalation_starter`);
    its input is ids and the interval only."""

    def start(self, escalation_id: int, owner_id: int, run_id: int, interval_s: int, *,
              resumed: bool = False) -> str: ...

    def stop(self, execution_arn: str, cause: str) -> None: ...

    def running(self) -> set[int]: ...


# --- schedules --------------------------------------------------------------------------------------
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # Scheduler's context attribute, replaced at each fire


class SchedulerUnavailable(RuntimeError):
    """The schedule could not be created, changed or deleted where it fires."""


def fire_input(schedule_id: int, scheduled_time: str = SCHEDULED_TIME) -> dict[str, Any]:
    """The event a fire delivers to the ingress (``{"trigger": "schedule", ...}``)."""
    return {"trigger": "schedule", "schedule_id": schedule_id, "scheduled_time": scheduled_time}


def schedule_name(schedule_id: int) -> str:
    """The Scheduler schedule of a row (unique in the group; owner-free on purpose: the row says whose)."""
    return f"zerg-s{schedule_id}"


class Scheduler(Protocol):
    """What makes a ``schedules`` row fire (:mod:`zerg.schedules.eventbridge`, :mod:`zerg.schedules.scheduler`);
    ``put`` and ``delete`` raise :class:`SchedulerUnavailable`, never a provider's exception."""

    def put(self, row: dict[str, Any]) -> None:
        """Create or replace what fires ``row`` (its expression, time zone, enabled state)."""

    def delete(self, schedule_id: int) -> None:
        """Remove what fires the schedule; nothing there is fine."""

    def describe(self, schedule_id: int) -> dict[str, Any] | None:
        """``{"name", "expression", "timezone", "state": ENABLED|DISABLED, "input", ...}`` or None."""


# --- email and SMS ----------------------------------------------------------------------------------
class NotifierError(RuntimeError):
    """The provider refused or could not be reached; the message says why (for the notifications row)."""


@dataclass(frozen=True)
class Email:
    """One email to one address. ``text`` is the body; ``html`` defaults to the text, escaped."""

    to: str
    subject: str
    text: str
    sender: str  # the From address (ZERG_SENDER_EMAIL)
    sender_name: str = "Zerg"
    html: str | None = None
    reply_to: str | None = None  # reply+{token}@ZERG_MAIL_DOMAIN
    message_id: str | None = None  # "<...@domain>"; SES replaces it with its own
    in_reply_to: str | None = None  # the Message-ID this answers
    references: tuple[str, ...] = ()  # the thread's Message-IDs, oldest first (default: in_reply_to)


@dataclass(frozen=True)
class Sms:
    to: str  # E.164
    text: str


@dataclass(frozen=True)
class SentEmail:
    provider_message_id: str  # SES's MessageId, or the outbox file's id
    message_id: str  # the RFC 5322 Message-ID the recipient sees


class Notifier(Protocol):
    """Sends one email or one SMS (possibly in parts); raises :class:`NotifierError` on failure."""

    def send_email(self, email: Email) -> SentEmail: ...

    def send_sms(self, sms: Sms) -> list[str]: ...
