"""Connector tools: ``send_email`` (supervisor and workers) and ``send_sms`` (workers). They reach
the owner only: there is no address argument, and :func:`zerg.notify.deliver.deliver` sends to
the owner's verified contacts of the channel, within the owner's daily limits, recording each send.

Invariants:
- Arguments are validated (subject <= 200, body <= 20,000, SMS text <= 1,600 characters); a
  refusal or a failure is a short text for the model, never an exception into the loop.
- Every message is a ``notifications`` row of purpose ``connector`` tied to the run.
- A worker's SMS is held in the owner's quiet hours (as a warning's is): a worker may be reading
  hostile output, and what it says must not wake the owner at 3 am. Only a critical alert of the
  system itself texts through quiet hours.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.loop.tool import Tool, ToolContext, ToolOutcome, error

SUBJECT_MAX, BODY_MAX, SMS_MAX = 200, 20_000, 1_600


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class EmailArgs(_Args):
    subject: str = Field(min_length=1, max_length=SUBJECT_MAX, description="One line")
    body: str = Field(min_length=1, max_length=BODY_MAX, description="Plain text")


class SmsArgs(_Args):
    text: str = Field(min_length=1, max_length=SMS_MAX, description="Plain text")


def _outcome(rows: list[dict[str, Any]], channel: str) -> ToolOutcome:
    """One line for the model: how many contacts it reached, or why it was not sent."""
    shown = "SMS" if channel == "sms" else "email"
    sent = [r for r in rows if r["status"] == "sent"]
    if sent and len(sent) == len(rows):
        return ToolOutcome(text=f"sent to {len(sent)} verified {shown} contact{'s' if len(sent) > 1 else ''} of the owner")
    reasons = sorted({("daily limit reached" if "limit" in (r["reason"] or "") else r["reason"] or r["status"])
                      for r in rows if r["status"] != "sent"})
    if channel == "sms" and all(r["status"] == "held" for r in rows):
        return ToolOutcome(text=f"held until the owner's quiet hours end ({rows[0]['release_at']:%Y-%m-%d %H:%M} UTC)")
    prefix = f"sent to {len(sent)} of {len(rows)} contacts; the rest " if sent else ""
    return ToolOutcome(text=f"{prefix}not sent: {'; '.join(reasons)}", ok=bool(sent))


def _deliver(ctx: ToolContext, channel: str, subject: str, body: str) -> ToolOutcome:
    if ctx.runtime is None or ctx.owner_id is None:
        return error(f"send_{channel} is not available here")
    from zerg.notify.deliver import deliver

    rows = deliver(ctx.runtime, ctx.owner_id, channel=channel, purpose="connector", subject=subject, body=body,
                   run_id=ctx.run_id, hold_in_quiet_hours=True)  # deliver holds SMS only; email is never held
    return _outcome(rows, channel)


def send_email(args: EmailArgs, ctx: ToolContext) -> ToolOutcome:
    return _deliver(ctx, "email", args.subject, args.body)


def send_sms(args: SmsArgs, ctx: ToolContext) -> ToolOutcome:
    return _deliver(ctx, "sms", "", args.text)


EMAIL_TOOL = Tool(
    name="send_email",
    description="Email the owner, and only the owner (their verified addresses; no one else can be addressed). "
                "Daily limits apply.",
    args=EmailArgs,
    run=send_email,
)
SMS_TOOL = Tool(
    name="send_sms",
    description="Text the owner, and only the owner (their verified numbers; no one else can be addressed). "
                "Short, urgent things only. Daily limits apply.",
    args=SmsArgs,
    run=send_sms,
)
SUPERVISOR_TOOLS = (EMAIL_TOOL,)
WORKER_TOOLS = (EMAIL_TOOL, SMS_TOOL)
