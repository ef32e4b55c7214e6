"""Firing a schedule: the one path from "this schedule is due at T" to a started run (kind
``check``) or a sent digest or reminder, whoever delivers it - EventBridge Scheduler through the
ingress function (source ``scheduler``), the local ticker (``ticker``) or ``zerg schedules
run-now`` (``run-now``).

Invariants:
- A fire is idempotent by (schedule, scheduled time): :func:`zerg.schedules.fires.claim` is the
  first write, and a delivery that finds the fire claimed starts nothing new (a duplicate).
- Phase 1 is one transaction, under the schedule's row lock (so two fires of one schedule never
  both see "no run in progress"): the claim, the decision (paused or previous run unfinished:
  ``skipped``, with the reason; a ``check`` also while the owner's daily spending cap is spent,
  :mod:`zerg.alerts.budget`, and the owner is told once a day; and once the schedule's own daily
  budget is spent, :func:`zerg.alerts.budget.fire_budget`), for a ``check`` the run row (its
  budget: the schedule's per-fire budget, lowered to what its day has left)
  (``runs.start_run``: ``running``, ``supervisor_started``) and the fire's ``run_id``, and the
  schedule's advance (last fire, last run, next fire; a one-off ``at`` gets no next fire). All of
  it happened or none of it did: a crash before the commit leaves the fire unclaimed, so the next
  delivery fires it afresh.
- Phase 2 completes a ``pending`` fire under the fire's row lock: for a ``check``, start the
  execution named after the run (:func:`zerg.runs.launch.start_execution`) unless someone already
  did (the run has an executor or an execution, or is closed); for a digest or a reminder, send it.
  The outcome is then written once. The execution starts only after phase 1 committed: it reads
  the run row.
- A crash between the phases leaves a ``pending`` fire whose run is ``running`` with neither
  executor nor execution (or an unsent digest/reminder). Whoever next meets that fire completes
  it, exactly once (the row lock): a duplicate delivery (Scheduler's and Lambda's retries), or
  the ticker's sweep of fires pending longer than :data:`PENDING_GRACE_S`. The run is then the
  same run, never a second one; a digest or reminder may go out twice if the crash came after
  its send (at least once, never lost). Locally a run left unstarted longer than the orphan sweep's
  grace is closed ``interrupted`` instead, and its fire is recorded ``failed`` with that reason.
- Nothing but a fire starts a schedule's run, so a fire whose process stopped between the phases
  blocks its schedule (its run stays ``running``, never started) until someone completes it: on
  AWS the ``schedules`` housekeeping task runs :func:`recover_pending` every few minutes, and a
  fire that finds its previous run unstarted past :data:`PENDING_GRACE_S` completes that run's
  pending fire first (:func:`_unblock`), then decides.
- A check nobody attends to pauses itself (:mod:`zerg.schedules.idle`): decided in phase 1 (the
  fire is skipped with the reason, ``idle_paused_at`` set once), paused and told after the commit.
- A schedule that no longer exists fires nothing; one log line. When Scheduler delivered it (the
  owner was deleted, or a delete's port call succeeded and its commit failed) its Scheduler
  schedule is deleted too, best effort, so it stops firing into nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from zerg import observability
from zerg.alerts import budget
from zerg.runs import store as runs
from zerg.schedules import fires, idle, store
from zerg.statuses import RUN_UNFINISHED

if TYPE_CHECKING:
    from zerg.config import Settings
    from zerg.runtime import Runtime

Source = Literal["scheduler", "ticker", "run-now"]
# Recorded outcomes, plus "pending" (another delivery is completing it) and "gone" (no such schedule).
Outcome = Literal["started", "sent", "nothing", "skipped", "failed", "pending", "gone"]
PENDING_GRACE_S = 120.0  # a fire pending this long lost its process (phase 2 takes well under a second)


@dataclass(frozen=True)
class FireResult:
    outcome: Outcome
    run_id: int | None = None
    detail: str | None = None
    duplicate: bool = False  # this (schedule, scheduled time) had been claimed by an earlier delivery
    fire_id: int | None = None
    capped: budget.Budget | None = None  # skipped for the owner's spending cap: what it stood at
    idle: bool = False  # skipped because nobody looks at its results: pause it (after the commit)
    tell_idle: bool = False  # this fire is the one that found it idle first: it sends the notice


def fire(rt: "Runtime", schedule_id: int, scheduled_time: datetime, *, source: Source, missed: int = 0) -> FireResult:
    """Fire ``schedule_id`` for ``scheduled_time`` (aware). ``missed``: earlier fire times the ticker
    passed over to fire this latest one (said in the fire's detail)."""
    if scheduled_time.tzinfo is None:
        raise ValueError("scheduled_time must be timezone-aware")
    scheduled_time = scheduled_time.astimezone(UTC)
    log = observability.logger()
    _unblock(rt, schedule_id)
    fire_id: int | None = None
    early: FireResult | None = None
    with rt.pool.connection() as conn, conn.transaction():
        schedule = store.get_for_fire(conn, schedule_id, for_update=True)
        if schedule is not None:
            fire_id = fires.claim(conn, schedule_id, schedule["owner_id"], scheduled_time, source)
            if fire_id is not None:
                early = _decide(conn, schedule, fire_id, scheduled_time, _missed_note(missed), rt.settings)
    if schedule is None:
        log.info("schedule fire ignored: no such schedule (deleted?)",
                 extra={"schedule_id": schedule_id, "scheduled_time": scheduled_time.isoformat(), "source": source})
        if source == "scheduler":  # after the transaction: a slow Scheduler call holds no connection
            _forget(rt, schedule_id)
        return FireResult("gone")
    if fire_id is None:
        return _duplicate(rt, schedule, scheduled_time, source)
    if early is not None:
        if early.capped is not None:  # after the commit: the notice is best effort and sends once a day
            budget.tell_owner(rt, schedule["owner_id"], early.capped, schedule_id=schedule_id)
        if early.idle:  # after the commit: pausing updates Scheduler, the notice goes out once
            idle.pause(rt, schedule, early.detail or "", tell=early.tell_idle)
        _logged(schedule, scheduled_time, source, early)
        return early
    return _logged(schedule, scheduled_time, source, complete(rt, fire_id, schedule))


def _unblock(rt: "Runtime", schedule_id: int) -> None:
    """Before phase 1: if the schedule's previous run never started (``running``, neither execution
    nor executor, older than :data:`PENDING_GRACE_S`), complete its pending fire as the recovery
    sweep would, so the decision below sees the run started (still running: skipped) or failed
    (a new run starts) instead of skipping behind it forever."""
    with rt.pool.connection() as conn:
        schedule = store.get_for_fire(conn, schedule_id)
        if schedule is None or schedule["kind"] != "check" or not schedule["last_run_id"]:
            return
        run = runs.get_run(conn, schedule["owner_id"], schedule["last_run_id"])
        if run is None or not _never_started(run):
            return
        # Later fires of a blocked schedule were skips: the run's own fire is among the latest few.
        pending = [f["id"] for f in fires.list_for_schedule(conn, schedule["owner_id"], schedule_id, limit=200)
                   if f["run_id"] == run["id"] and f["outcome"] == "pending"]
    for fire_id in pending:
        result = complete(rt, fire_id, schedule, wait=False)
        observability.logger().warning("completed the pending fire of a schedule's run that never started", extra={
            "fire_id": fire_id, "schedule_id": schedule_id, "run_id": run["id"], "outcome": result.outcome})


def _never_started(run: dict[str, Any]) -> bool:
    return (run["status"] == "running" and not run["execution_arn"] and not run["executor"]
            and (datetime.now(UTC) - run["created_at"]).total_seconds() > PENDING_GRACE_S)


def _forget(rt: "Runtime", schedule_id: int) -> None:
    """Delete the Scheduler schedule of a row that is gone (best effort: the next delivery tries again)."""
    try:
        rt.scheduler.delete(schedule_id)
    except Exception:  # the delivery itself succeeded: it fired nothing, as it should
        observability.logger().warning("could not delete the Scheduler schedule of a deleted schedule",
                                       exc_info=True, extra={"schedule_id": schedule_id})
        return
    observability.logger().info("deleted the Scheduler schedule of a deleted schedule",
                                extra={"schedule_id": schedule_id})


def _decide(conn: Any, schedule: dict[str, Any], fire_id: int, scheduled_time: datetime,
            note: str | None, settings: "Settings") -> FireResult | None:
    """Phase 1 after the claim: a skip (recorded now), else None with the run row written for a check."""
    owner_id = schedule["owner_id"]
    if not schedule["enabled"]:
        return _finish(conn, fire_id, "skipped", _join("paused", note))
    if (reason := idle.idle_reason(conn, schedule, datetime.now(UTC))) is not None:
        first = store.mark_idle_paused(conn, schedule["id"])
        store.advance(conn, schedule["id"], fired_at=max(scheduled_time, schedule["last_fire_at"] or scheduled_time),
                      next_fire_at=next_fire_after(schedule, max(scheduled_time, datetime.now(UTC))))
        return replace(_finish(conn, fire_id, "skipped", _join(reason, note)), idle=True, tell_idle=first)
    last_fire = max(scheduled_time, schedule["last_fire_at"] or scheduled_time)  # a late delivery never rewinds it
    next_fire = next_fire_after(schedule, max(scheduled_time, datetime.now(UTC)))
    previous = schedule["last_run_id"]
    if schedule["kind"] == "check" and previous and runs.run_status(conn, owner_id, previous) in RUN_UNFINISHED:
        store.advance(conn, schedule["id"], fired_at=last_fire, next_fire_at=next_fire)
        return _finish(conn, fire_id, "skipped", _join(f"previous run {previous} still running", note))
    if schedule["kind"] == "check" and (capped := budget.fire_skip(conn, owner_id)) is not None:
        store.advance(conn, schedule["id"], fired_at=last_fire, next_fire_at=next_fire)
        return replace(_finish(conn, fire_id, "skipped", _join(capped.skip_detail(), note)), capped=capped)
    spend = budget.fire_budget(conn, schedule) if schedule["kind"] == "check" else budget.FireBudget()
    if spend.skip is not None:
        store.advance(conn, schedule["id"], fired_at=last_fire, next_fire_at=next_fire)
        return _finish(conn, fire_id, "skipped", _join(spend.skip, note))
    run_id = None
    if schedule["kind"] == "check" and (unusable := _model_problem(settings, conn, owner_id)) is not None:
        store.advance(conn, schedule["id"], fired_at=last_fire, next_fire_at=next_fire)
        return _finish(conn, fire_id, "failed", _join(unusable, note))
    if schedule["kind"] == "check":
        run_id = runs.start_run(conn, owner_id, schedule["task"], trigger="schedule",
                                preferences=spend.preferences).run_id
        fires.attach_run(conn, fire_id, run_id)
    if note:
        fires.set_detail(conn, fire_id, note)
    store.advance(conn, schedule["id"], fired_at=last_fire, next_fire_at=next_fire, run_id=run_id)
    return None


def _model_problem(settings: "Settings", conn: Any, owner_id: int) -> str | None:
    """Why the owner's agents' models cannot be asked as the deployment is configured (no run row is
    written for such a fire), or None."""
    from zerg.agents.settings import check_models
    from zerg.llm.providers import ModelConfigError

    try:
        check_models(conn, settings, owner_id)
    except ModelConfigError as exc:
        return str(exc)
    return None


def complete(rt: "Runtime", fire_id: int, schedule: dict[str, Any], *, wait: bool = True) -> FireResult:
    """Phase 2: complete the ``pending`` fire ``fire_id`` (see the module's invariants). ``wait=False``:
    leave it to whoever holds it now (outcome ``pending``)."""
    with rt.pool.connection() as conn, conn.transaction():
        row = fires.lock(conn, fire_id, wait=wait)
        if row is None:
            return FireResult("pending" if fires.get(conn, fire_id) else "gone", fire_id=fire_id)
        if row["outcome"] != "pending":
            return _result_of(row)
        if row["run_id"] is not None or schedule["kind"] == "check":  # a check's run row came with its claim
            outcome, detail = _start_run(rt, conn, row)
        else:
            outcome, detail = _send(rt, schedule, row["scheduled_time"])
        detail = _join(detail, row["detail"])
        fires.finish(conn, fire_id, outcome, detail)
        return FireResult(outcome, row["run_id"], detail, fire_id=fire_id)


def _start_run(rt: "Runtime", conn: Any, row: dict[str, Any]) -> tuple[str, str | None]:
    """Start the fire's run unless it was started or closed meanwhile: (outcome, detail)."""
    from zerg.runs.launch import LaunchError, start_execution

    run = runs.get_run(conn, row["owner_id"], row["run_id"]) if row["run_id"] else None
    if run is None:
        return "failed", "its run no longer exists"
    if run["execution_arn"] or run["executor"]:
        return "started", None  # an earlier delivery started it and stopped before recording so
    if run["status"] != "running":
        return "failed", f"run {run['id']} ended {run['status']} before it started: {run['error'] or ''}".rstrip(": ")
    try:
        start_execution(rt, run)
    except LaunchError as exc:
        return "failed", str(exc)
    return "started", None


def _send(rt: "Runtime", schedule: dict[str, Any], scheduled_time: datetime) -> tuple[str, str | None]:
    """A digest or a reminder: no run; the sender says what it did ('sent', 'nothing', 'failed')."""
    try:
        if schedule["kind"] == "digest":
            from zerg.alerts.digest import send_digest

            return send_digest(rt, schedule, scheduled_time)
        from zerg.alerts.reminders import send_reminder

        return send_reminder(rt, schedule, scheduled_time)
    except Exception as exc:  # recorded on the fire; the next fire tries again
        observability.logger().warning("schedule send failed", exc_info=True,
                                       extra={"schedule_id": schedule["id"], "kind": schedule["kind"]})
        return "failed", f"{schedule['kind']} not sent: {type(exc).__name__}: {exc}"


def _duplicate(rt: "Runtime", schedule: dict[str, Any], scheduled_time: datetime, source: Source) -> FireResult:
    """An earlier delivery claimed this fire: report it; complete it if it is still pending."""
    with rt.pool.connection() as conn:
        row = fires.get_by_time(conn, schedule["id"], scheduled_time)
    if row is None:  # claimed, then deleted with its schedule in between
        return FireResult("gone", duplicate=True)
    result = complete(rt, row["id"], schedule) if row["outcome"] == "pending" else _result_of(row)
    observability.logger().info("duplicate schedule fire: nothing new started", extra={
        "schedule_id": schedule["id"], "scheduled_time": scheduled_time.isoformat(), "source": source,
        "fire_id": row["id"], "outcome": result.outcome})
    return replace(result, duplicate=True)


def recover_pending(rt: "Runtime", older_than_s: float | None = None,
                    should_stop: Callable[[], bool] | None = None) -> int:
    """Complete the fires pending longer than ``older_than_s`` (default :data:`PENDING_GRACE_S`):
    their process stopped between the phases (the ticker's sweep; on AWS the ``schedules``
    housekeeping task). Returns how many it completed."""
    with rt.pool.connection() as conn:
        stale = fires.stale_pending(conn, PENDING_GRACE_S if older_than_s is None else older_than_s)
    done = 0
    for row in stale:
        if should_stop is not None and should_stop():
            break
        with rt.pool.connection() as conn:
            schedule = store.get_for_fire(conn, row["schedule_id"])
        if schedule is None:
            continue
        result = complete(rt, row["id"], schedule, wait=False)
        if result.outcome not in ("pending", "gone"):
            done += 1
            observability.logger().warning("recovered a schedule fire its process left pending", extra={
                "fire_id": row["id"], "schedule_id": row["schedule_id"], "outcome": result.outcome,
                "run_id": result.run_id})
    return done


def next_fire_after(schedule: dict[str, Any], after: datetime) -> datetime | None:
    """The schedule's next fire time after ``after`` (None: a one-off that has fired)."""
    from zerg.schedules.expressions import when_of

    return when_of(schedule).next_fire(after)


def _finish(conn: Any, fire_id: int, outcome: str, detail: str | None) -> FireResult:
    fires.finish(conn, fire_id, outcome, detail)
    return FireResult(outcome, None, detail, fire_id=fire_id)  # type: ignore[arg-type]


def _result_of(row: dict[str, Any]) -> FireResult:
    return FireResult(row["outcome"], row["run_id"], row["detail"], fire_id=row["id"])


def _missed_note(missed: int) -> str | None:
    if missed <= 0:
        return None
    return f"{missed} earlier fire(s) missed while nothing was firing; only this latest one ran"


def _join(first: str | None, second: str | None) -> str | None:
    return "; ".join(p for p in (first, second) if p) or None


def _logged(schedule: dict[str, Any], scheduled_time: datetime, source: str, result: FireResult) -> FireResult:
    observability.logger().info("schedule fired", extra={
        "schedule_id": schedule["id"], "owner_id": schedule["owner_id"], "kind": schedule["kind"],
        "scheduled_time": scheduled_time.isoformat(), "source": source, "outcome": result.outcome,
        "run_id": result.run_id, "detail": result.detail})
    return result
