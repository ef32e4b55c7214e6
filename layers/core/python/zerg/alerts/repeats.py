"""The repeats of a critical alert: start an escalation, send each repeat, stop it.

The first notice of a critical background result is sent when the run ends (the escalation
matrix, :mod:`zerg.alerts.matrix`), which then calls :func:`start_escalation`. The escalation
state machine waits the owner's ``escalation_every_s`` and invokes the supervisor's ``escalate``
action (:func:`repeat`) until it answers done; acknowledging the inbox item calls
:func:`stop_escalation`.

Invariants:
- At most one escalation per run; none when the owner's policy says ``escalation_repeats = 0``.
- The row is written (and committed) before its execution starts, so the first Repeat finds it;
  an execution that cannot be started leaves the row ``failed``, with a log line.
- Bounded by the database: :func:`repeat` answers done once the inbox item is acknowledged, the
  escalation is no longer running, or ``repeats_sent`` reached ``max_repeats`` (then ``exhausted``).
  Each repeat is claimed (and committed) by one conditional UPDATE before it is sent, so a retried
  or duplicate invocation never sends a repeat twice, and never more than ``max_repeats`` go out:
  at most once per repeat (a process that dies between the claim and the send loses that one).
- Repeats are the first alert again (:func:`zerg.alerts.messages.compose`, marked "repeat n") on
  the same channels (:func:`zerg.alerts.messages.channels_for`: the schedule's critical override,
  else the policy's), to the owner's verified contacts through ``deliver``, purpose
  ``escalation``, ``attempt`` = n, never held by quiet hours (critical never is); and pushed to
  the owner's browsers when the policy pushes critical (:func:`zerg.alerts.messages.push_alert`).
- Stopping is best effort: the status change is what counts; the next Repeat step ends an
  execution whose StopExecution was lost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from zerg.alerts import escalations

if TYPE_CHECKING:
    from zerg.runtime import Runtime

log = logging.getLogger("zerg.alerts.repeats")

SWEEP_EVERY_S = 60.0  # local: how often zerg serve looks for escalations nobody repeats
ORPHAN_GRACE_S = 60.0  # ... once their next repeat is this late (or one interval, if shorter)


def start_escalation(rt: "Runtime", owner_id: int, run_id: int) -> int | None:
    """Start repeating the owner's critical alert of ``run_id``: the escalation's id, or None when
    the policy asks for no repeats or the run has (had) one already (or is not the owner's).
    Raises when the execution cannot be started (the row is then ``failed``)."""
    from zerg.notify.policy import get_policy

    with rt.pool.connection() as conn:
        policy = get_policy(conn, owner_id)
        if policy.escalation_repeats <= 0:
            return None
        row = escalations.create(conn, owner_id, run_id, max_repeats=policy.escalation_repeats,
                                 interval_s=policy.escalation_every_s)
    if row is None:
        return None
    try:
        arn = rt.escalation_starter.start(row["id"], owner_id, run_id, row["interval_s"])
    except Exception as exc:
        log.warning("could not start escalation %s of run %s: %s: %s", row["id"], run_id, type(exc).__name__, exc)
        with rt.pool.connection() as conn:
            escalations.finish(conn, owner_id, row["id"], "failed")
        raise
    with rt.pool.connection() as conn:
        escalations.set_execution(conn, owner_id, row["id"], arn)
    log.info("escalation %s of run %s started: %s repeats every %s s", row["id"], run_id,
             row["max_repeats"], row["interval_s"])
    return row["id"]


def repeat(rt: "Runtime", owner_id: int, run_id: int, escalation_id: int) -> dict[str, bool]:
    """The Repeat step: send the next repeat if it is due; ``{"done": True}`` when nothing more will be sent."""
    from zerg.alerts import inbox
    from zerg.alerts.messages import channels_for, compose, push_alert
    from zerg.notify.policy import get_policy
    from zerg.schedules.fires import schedule_of_run

    with rt.pool.connection() as conn:
        esc = escalations.get(conn, owner_id, escalation_id)
        if esc is None or esc["run_id"] != run_id:  # deleted with its run or owner, or a forged event
            log.warning("escalation %s of run %s not found for owner %s: done", escalation_id, run_id, owner_id)
            return {"done": True}
        if esc["status"] != "running":
            return {"done": True}
        item = inbox.get(conn, owner_id, run_id)
        if item is None:  # the item is written before the escalation starts: nothing to repeat
            log.warning("escalation %s: run %s has no inbox item; ending it", escalation_id, run_id)
            escalations.finish(conn, owner_id, escalation_id, "failed")
            return {"done": True}
        if item["acknowledged_at"] is not None:
            escalations.finish(conn, owner_id, escalation_id, "acknowledged")
            return {"done": True}
        claimed = escalations.claim_repeat(conn, owner_id, escalation_id)
        if claimed is None:  # not due yet (a duplicate execution or a retried step), or just ended
            current = escalations.get(conn, owner_id, escalation_id)
            if current is not None and current["status"] == "running" and current["repeats_sent"] >= current["max_repeats"]:
                escalations.finish(conn, owner_id, escalation_id, "exhausted")  # the last sender stopped before saying so
                return {"done": True}
            return {"done": current is None or current["status"] != "running"}
        policy = get_policy(conn, owner_id)
        channels = channels_for(policy, schedule_of_run(conn, owner_id, run_id), "critical")
    attempt, last = claimed["repeats_sent"], claimed["max_repeats"]
    message = compose(rt.settings, item, attempt=attempt)  # the first alert's texts, marked "(repeat n)"
    for channel in channels:
        _deliver(rt, owner_id, channel, message.subject, message.text if channel == "email" else message.sms,
                 run_id, item.get("schedule_id"), attempt)
    try:
        push_alert(rt, owner_id, policy, {**item, "severity": "critical"}, message, purpose="escalation", attempt=attempt)
    except Exception:  # a push bug never stops the repeats; its rows say what happened
        log.warning("escalation %s of run %s: push failed", escalation_id, run_id, exc_info=True)
    if attempt >= last:
        with rt.pool.connection() as conn:
            escalations.finish(conn, owner_id, escalation_id, "exhausted")
        log.info("escalation %s of run %s exhausted after %s repeats", escalation_id, run_id, attempt)
        return {"done": True}
    return {"done": False}


def escalation_failed(rt: "Runtime", owner_id: int, run_id: int, escalation_id: int, error: Any) -> dict[str, bool]:
    """The MarkFailed step: the Repeat step kept failing; record the escalation ``failed``."""
    from zerg.handler_input import describe_step_error

    with rt.pool.connection() as conn:
        ended = escalations.finish(conn, owner_id, escalation_id, "failed")
    log.warning("escalation %s of run %s failed%s: %s", escalation_id, run_id, "" if ended else " (already ended)",
                describe_step_error(error, "repeat step"))
    return {"done": True}


def stop_escalation(rt: "Runtime", owner_id: int, run_id: int) -> bool:
    """The owner acknowledged the alert of ``run_id``: end its running escalation (True), and stop
    its execution, best effort. False when there was none running (or not the owner's)."""
    with rt.pool.connection() as conn:
        row = escalations.acknowledge_run(conn, owner_id, run_id)
    if row is None:
        return False
    stop_execution(rt, row)
    return True


def stop_execution(rt: "Runtime", escalation: dict[str, Any]) -> None:
    """Stop the execution of an escalation just acknowledged, best effort: its next Repeat step
    sees the status and ends it anyway."""
    if not escalation["execution_arn"]:
        return
    try:
        rt.escalation_starter.stop(escalation["execution_arn"], "acknowledged")
    except Exception:
        log.warning("run %s: acknowledged, but its escalation execution %s could not be stopped",
                    escalation["run_id"], escalation["execution_arn"], exc_info=True)


def resume_orphaned(rt: "Runtime") -> dict[str, int]:
    """Local only (a ``zerg serve`` housekeeping task, at start and every :data:`SWEEP_EVERY_S`):
    a new execution for each running escalation whose next repeat is overdue and that no execution
    of this process repeats, e.g. because the process that ran it stopped. A duplicate (the old
    process is alive after all) sends nothing twice: repeats are claimed in the database."""
    starter = rt.escalation_starter
    with rt.pool.connection() as conn:
        overdue = escalations.orphaned(conn, ORPHAN_GRACE_S)
    mine = starter.running() if overdue else set()
    resumed = 0
    for esc in overdue:
        if esc["id"] in mine:
            continue
        try:
            arn = starter.start(esc["id"], esc["owner_id"], esc["run_id"], esc["interval_s"], resumed=True)
        except Exception as exc:
            log.warning("could not resume escalation %s: %s: %s", esc["id"], type(exc).__name__, exc)
            continue
        with rt.pool.connection() as conn:
            escalations.set_execution(conn, esc["owner_id"], esc["id"], arn)
        resumed += 1
    return {"overdue": len(overdue), "resumed": resumed}


def _deliver(rt: "Runtime", owner_id: int, channel: str, subject: str, body: str, run_id: int,
             schedule_id: int | None, attempt: int) -> None:
    """One channel's repeat; a failure is logged, never stops the other channel or the escalation
    (deliver records failed sends as notifications rows itself)."""
    from zerg.notify.deliver import deliver

    try:
        deliver(rt, owner_id, channel=channel, purpose="escalation", subject=subject, body=body,
                severity="critical", run_id=run_id, schedule_id=schedule_id, attempt=attempt,
                hold_in_quiet_hours=False)
    except Exception as exc:
        log.warning("escalation repeat %s of run %s by %s failed: %s: %s", attempt, run_id, channel,
                    type(exc).__name__, exc)
