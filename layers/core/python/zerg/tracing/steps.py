"""The spans of a run's steps, for the handlers (which stay thin): the attributes of an
``invoke_agent`` span per supervisor turn and per worker, what a step's outcome adds to it, and the
approval wait recorded when a held worker resumes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zerg import tracing

if TYPE_CHECKING:
    from zerg.runtime import Runtime

# Supervisor actions that are an agent's turn (the model may be called); the others are internal spans.
AGENT_ACTIONS = ("plan", "resume", "finalize")


def supervisor_span(action: str, thread_id: int | None) -> tuple[str, dict[str, Any]]:
    """(span name, attributes) of a supervisor step."""
    if action in AGENT_ACTIONS:
        return "invoke_agent supervisor", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "supervisor",
                                           "gen_ai.conversation.id": _text(thread_id), "zerg.action": action}
    return f"supervisor {action}", {"zerg.action": action, "gen_ai.conversation.id": _text(thread_id)}


def worker_span(action: str, job_id: int) -> tuple[str, dict[str, Any]]:
    """(span name, attributes) of a worker step: running or resuming the job is the worker agent's turn."""
    attrs: dict[str, Any] = {tracing.JOB_ID: job_id, "zerg.action": action}
    if action in ("run", "resume_approval"):
        return "invoke_agent worker", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "worker", **attrs}
    return f"worker {action}", attrs


def agent_provider(rt: "Runtime", traceparent: str | None, agent: str) -> dict[str, Any]:
    """The provider attribute an ``invoke_agent`` span requires, for the agent's configured default
    model (an owner's agent configuration may choose another model: its chat spans name the one
    called). Empty when the step is not traced: the model client is then not even built."""
    if not tracing.active() or tracing.trace_id_of(traceparent) is None:
        return {}
    from zerg.tracing.model import provider_name

    model = rt.settings.supervisor_model if agent == "supervisor" else rt.settings.worker_model
    return {tracing.options().provider_key: provider_name(rt.llm, model)}


def worker_done(span: Any, outcome: Any) -> None:
    """What a worker step's outcome adds to its span: the worker's id (the agent's), its status."""
    if span is None:
        return
    if outcome.worker_id:
        span.set_attribute("gen_ai.agent.id", outcome.worker_id)
    span.set_attribute("zerg.worker.status", outcome.status)
    if outcome.status in ("failed", "timeout"):
        tracing.mark_error(span, outcome.error or outcome.status, error_type=outcome.status)


def approval_wait(rt: "Runtime", traceparent: str | None, owner_id: int, run_id: int, approval_id: int) -> None:
    """The wait for the owner's answer, as an internal span from the request to the answer (or now),
    a child of the run's root span: it happened between two invocations, so it is recorded by the
    one that resumes the worker."""
    if not tracing.active() or tracing.trace_id_of(traceparent) is None:
        return
    from zerg.approvals import requests as approvals

    with rt.pool.connection() as conn:
        row = approvals.get(conn, owner_id, approval_id)
    if row is None:
        return
    ended = row.get("answered_at") or datetime.now(timezone.utc)
    status = row.get("status")
    tracing.record_past(traceparent, "approval_wait", row["created_at"], ended, run_id=run_id, owner_id=owner_id,
                        attributes={"gen_ai.tool.name": row.get("tool"), "gen_ai.tool.call.id": row.get("tool_call_id"),
                                    "zerg.approval.id": approval_id, "zerg.approval.status": status,
                                    tracing.JOB_ID: row.get("job_id")})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
