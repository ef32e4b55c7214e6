"""Worker Lambda: run one worker job (or mark a crashed one failed). Returns ids and status only."""

from __future__ import annotations

from typing import Any

from zerg import observability


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    # Imported here, not at the top: pydantic and the event models stay out of the cold start's
    # import (tests/test_supervisor_imports.py).
    from zerg.handler_input import InvalidEvent, WorkerEvent, describe_step_error, parse_event

    ev = parse_event(WorkerEvent, event, "worker")
    from zerg.sandbox import invocation
    from zerg.wiring import get_runtime
    from zerg.workers.runner import mark_job_failed, resume_worker_job, run_worker_job

    rt = get_runtime()
    if ev.action == "await_approval":  # the callback task: keep the token; the run waits, nothing runs
        from zerg.approvals.wait import await_answer

        if ev.approval_id is None or ev.task_token is None or ev.timeout_s is None:
            raise InvalidEvent("invalid worker event: await_approval needs approval_id, task_token and "
                               "timeout_s")
        return await_answer(rt, ev.owner_id, ev.approval_id, ev.task_token, ev.timeout_s)
    from zerg import tracing
    from zerg.tracing import steps

    # Ends by killing whatever the job's commands left and deleting their files (on Lambda:
    # every process but ours), so nothing of this invocation reaches the next one.
    name, attributes = steps.worker_span(ev.action, ev.job_id)
    if name.startswith("invoke_agent"):
        attributes.update(steps.agent_provider(rt, ev.traceparent, "worker"))
    with observability.invocation("worker", ev.run_id, tracing.trace_id_of(ev.traceparent)) as log, \
            invocation(rt.settings):
        if ev.action == "resume_approval" and ev.approval_id is not None:  # the wait, before the worker goes on
            steps.approval_wait(rt, ev.traceparent, ev.owner_id, ev.run_id, ev.approval_id)
        with tracing.invocation(ev.traceparent, name, run_id=ev.run_id, owner_id=ev.owner_id,
                                attributes=attributes) as span:
            if ev.action == "mark_failed":
                outcome = mark_job_failed(rt, ev.job_id, ev.owner_id, ev.run_id,
                                          describe_step_error(ev.error, "worker crashed"))
            elif ev.action == "resume_approval":
                if ev.approval_id is None:
                    raise InvalidEvent("invalid worker event: resume_approval needs approval_id")
                outcome = resume_worker_job(rt, ev.job_id, ev.owner_id, ev.run_id, ev.approval_id,
                                            ev.approval_timeout_s)
            else:
                outcome = run_worker_job(rt, ev.job_id, ev.owner_id, ev.run_id, ev.approval_timeout_s)
            steps.worker_done(span, outcome)
        log.info("worker finished", extra={"job_id": ev.job_id, "owner_id": ev.owner_id,
                                           "status": outcome.status, "worker_id": outcome.worker_id})
    return outcome.as_payload()
