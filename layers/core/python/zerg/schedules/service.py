"""Schedules: the one code path that creates, changes, pauses, resumes, lists and deletes them, for
the API, ``zerg schedules`` and the supervisor's directives alike.

Invariants:
- The row and what fires it (``rt.scheduler``: EventBridge Scheduler on AWS, the ticker's rows
  locally) change together: the row is written, the port called, then the transaction commits.
  When the port fails the row change is rolled back and the caller gets
  :class:`ScheduleUnavailable` ("nothing changed"). (The one gap left: the port succeeded and the
  commit then failed. The next change of the row puts the schedule again; a fire of a schedule
  whose row is gone finds no row, starts nothing, and deletes that Scheduler schedule.)
- ``next_fire_at`` is recomputed from now whenever what decides it changes (expression, time zone,
  enabled) and is NULL while disabled; any other change keeps it, so a due fire is not lost to a
  rename. Resuming does not catch up on fires missed while paused.
- A one-off that fired more than :data:`ONE_OFF_KEPT` ago is deleted, row and port together, by
  :func:`prune_fired_one_offs` (the ``schedules`` housekeeping task): it never fires again, and
  the owner had a week to see when it fired.
- Input is refused with :class:`ScheduleError` naming the field; a taken name or the per-owner
  limit is :class:`ScheduleConflict`; another owner's schedule is :class:`ScheduleNotFound`, the
  same answer as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.notify.policy import timezone_of
from zerg.schedules import store
from zerg.schedules.expressions import ScheduleError, When, parse_when, when_of
from zerg.schedules.spec import BUDGET_FIELDS, DIGEST_TASK, TASK_MAX, SchedulePatch, SchedulePreviewSpec, ScheduleSpec

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

MAX_PER_OWNER = 100
ONE_OFF_KEPT = timedelta(days=7)  # a fired one-off stays this long (its last fire shown), then goes
PRUNE_BATCH = 200  # one-offs pruned per sweep at most; the rest go next time

__all__ = ["MAX_PER_OWNER", "ScheduleConflict", "ScheduleError", "ScheduleNotFound", "ScheduleUnavailable",
           "create", "delete", "find", "get", "list_schedules", "pause", "preview", "prune_fired_one_offs", "public",
           "resume", "update"]


class ScheduleNotFound(LookupError):
    """No such schedule of this owner."""


class ScheduleConflict(ValueError):
    """The name is taken, or the owner has the most schedules allowed."""


class ScheduleUnavailable(RuntimeError):
    """EventBridge Scheduler could not be changed; the row was rolled back."""


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A schedule as every reader sees it (the API's ``Schedule``): what the owner wrote, Scheduler's
    form, and when it fires."""
    return {"id": row["id"], "name": row["name"], "kind": row["kind"], "task": row["task"],
            "cron": row["cron"], "rate": row["rate"], "at": row["at"].isoformat() if row["at"] else None,
            "expression": row["expression"], "timezone": row["timezone"], "enabled": row["enabled"],
            "channels": row["channels"], "next_fire_at": row["next_fire_at"], "last_fire_at": row["last_fire_at"],
            "last_run_id": row["last_run_id"], "created_at": row["created_at"], "updated_at": row["updated_at"],
            **{f: (float(row[f]) if f.endswith("usd_budget") and row[f] is not None else row[f]) for f in BUDGET_FIELDS},
            "idle_paused_at": row["idle_paused_at"]}


def _name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ScheduleError("name: must not be blank")
    if not name.isprintable():
        raise ScheduleError("name: must not contain control characters")
    if name.isascii() and name.isdigit():
        raise ScheduleError("name: must not be only digits (a number names a schedule by its id)")
    return name


def _task(rt: Runtime, kind: str, task: str | None) -> str:
    text = (task or "").strip()
    if not text:
        if kind == "digest":
            return DIGEST_TASK
        raise ScheduleError(f"task: required for a {kind} schedule "
                            f"({'what the background run does' if kind == 'check' else 'the text to send'})")
    if "\x00" in text:
        raise ScheduleError("task: must not contain NUL characters")
    size, limit = len(text.encode()), rt.settings.task_max_bytes
    if len(text) > TASK_MAX or size > limit:
        raise ScheduleError(f"task: {size} bytes; the limit is {min(limit, TASK_MAX)} (ZERG_TASK_MAX_BYTES)")
    return text


def _columns(when: When) -> dict[str, Any]:
    return {"cron": when.text if when.kind == "cron" else None, "rate": when.text if when.kind == "rate" else None,
            "at": when.at_local, "expression": when.expression, "timezone": when.timezone}


def _put(rt: Runtime, conn: Connection, row: dict[str, Any]) -> None:
    from zerg.ports import SchedulerUnavailable

    try:
        rt.scheduler.put(row)
    except SchedulerUnavailable:
        conn.rollback()
        raise ScheduleUnavailable("the schedule could not be saved in EventBridge Scheduler; nothing changed; "
                                  "try again shortly") from None


def validate(rt: Runtime, owner_id: int, spec: ScheduleSpec, *, now: datetime | None = None) -> dict[str, Any]:
    """What :func:`create` would write for ``spec`` (name, task, time zone, expression columns),
    checked as it checks them, without writing anything; ScheduleError when it would refuse."""
    now = now or datetime.now(UTC)
    name, task = _name(spec.name), _task(rt, spec.kind, spec.task)
    with rt.pool.connection() as conn:
        timezone = spec.timezone if spec.timezone is not None else timezone_of(conn, owner_id) or "UTC"
    when = parse_when(cron=spec.cron, rate=spec.rate, at=spec.at, timezone=timezone, now=now)
    return {"name": name, "task": task, "kind": spec.kind, **_columns(when)}


def preview(rt: Runtime, owner_id: int, spec: SchedulePreviewSpec, *, now: datetime | None = None) -> dict[str, Any]:
    """The next ``spec.count`` fires after ``now`` of the expression as :func:`create` would read it
    (the same parser, the owner's default time zone), without writing anything; ScheduleError when
    create would refuse it. A one-off has one fire."""
    now = now or datetime.now(UTC)
    timezone = spec.timezone
    if timezone is None:
        with rt.pool.connection() as conn:
            timezone = timezone_of(conn, owner_id) or "UTC"
    when = parse_when(cron=spec.cron, rate=spec.rate, at=spec.at, timezone=timezone, now=now)
    fires: list[datetime] = []
    moment = now
    while len(fires) < spec.count and (moment := when.next_fire(moment)) is not None:
        fires.append(moment)
    return {"kind": when.kind, "text": when.text, "expression": when.expression, "timezone": when.timezone,
            "fires": fires}


def create(rt: Runtime, owner_id: int, spec: ScheduleSpec, *, now: datetime | None = None) -> dict[str, Any]:
    """Write the owner's new schedule and what fires it."""
    now = now or datetime.now(UTC)
    name, task = _name(spec.name), _task(rt, spec.kind, spec.task)
    with rt.pool.connection() as conn:
        timezone = spec.timezone if spec.timezone is not None else timezone_of(conn, owner_id) or "UTC"
        when = parse_when(cron=spec.cron, rate=spec.rate, at=spec.at, timezone=timezone, now=now)
        try:
            row = store.create(conn, owner_id, kind=spec.kind, name=name, task=task, **_columns(when),
                               enabled=spec.enabled, channels=spec.channels or None,
                               next_fire_at=when.next_fire(now) if spec.enabled else None, limit=MAX_PER_OWNER)
        except store.NameTaken as exc:
            raise ScheduleConflict(f"name: {exc}") from None
        if row is None:
            raise ScheduleConflict(f"an owner has at most {MAX_PER_OWNER} schedules; delete one first")
        budgets = {f: getattr(spec, f) for f in BUDGET_FIELDS if getattr(spec, f) != row[f]}
        if budgets:  # the same transaction: the schedule exists with its budgets or not at all
            row = store.update(conn, owner_id, row["id"], **budgets)
        _put(rt, conn, row)
        conn.commit()
    return public(row)


def update(rt: Runtime, owner_id: int, schedule_id: int, patch: SchedulePatch, *,
           now: datetime | None = None) -> dict[str, Any]:
    """Change the fields ``patch`` gives (cron, rate or at replaces the expression)."""
    given = patch.model_fields_set
    for field in sorted(given - {"channels", *BUDGET_FIELDS}):
        if getattr(patch, field) is None:
            raise ScheduleError(f"{field}: must not be null")
    expressions = [f for f in ("cron", "rate", "at") if f in given]
    if len(expressions) > 1:
        raise ScheduleError(f"give at most one of cron, rate or at (got {' and '.join(expressions)})")
    return _change(rt, owner_id, schedule_id, {f: getattr(patch, f) for f in given}, now)


def pause(rt: Runtime, owner_id: int, schedule_id: int) -> dict[str, Any]:
    return _change(rt, owner_id, schedule_id, {"enabled": False}, None)


def resume(rt: Runtime, owner_id: int, schedule_id: int) -> dict[str, Any]:
    """Enable again; the next fire is the first one from now (missed fires are not caught up)."""
    return _change(rt, owner_id, schedule_id, {"enabled": True}, None)


def _change(rt: Runtime, owner_id: int, schedule_id: int, changes: dict[str, Any],
            now: datetime | None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    with rt.pool.connection() as conn:
        row = store.get(conn, owner_id, schedule_id, for_update=True)  # one change of a schedule at a time
        if row is None:
            raise ScheduleNotFound(f"schedule {schedule_id} not found")
        values = _values(rt, row, changes, now)
        if not values:
            return public(row)
        try:
            new = store.update(conn, owner_id, schedule_id, **values)
        except store.NameTaken as exc:
            raise ScheduleConflict(f"name: {exc}") from None
        assert new is not None  # locked above
        if {"expression", "timezone", "enabled", "next_fire_at"} & set(values):  # what Scheduler knows
            _put(rt, conn, new)
        conn.commit()
    return public(new)


def _values(rt: Runtime, row: dict[str, Any], changes: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns to write for ``changes`` to ``row``, checked."""
    values: dict[str, Any] = {}
    if "name" in changes:
        values["name"] = _name(changes["name"])
    kind = changes.get("kind", row["kind"])
    if "kind" in changes:
        values["kind"] = kind
    if "task" in changes or "kind" in changes:
        values["task"] = _task(rt, kind, changes.get("task", row["task"]))
    if "channels" in changes:
        values["channels"] = changes["channels"] or None
    values.update({f: changes[f] for f in BUDGET_FIELDS if f in changes})
    timezone = changes.get("timezone", row["timezone"])
    new_expression = any(f in changes for f in ("cron", "rate", "at"))
    if new_expression:
        when = parse_when(cron=changes.get("cron"), rate=changes.get("rate"), at=changes.get("at"),
                          timezone=timezone, now=now)
    elif "timezone" in changes:  # the same expression read in another zone; a pending at must stay ahead
        pending_at = row["at"] is not None and row["last_fire_at"] is None
        when = parse_when(cron=row["cron"], rate=row["rate"], at=row["at"], timezone=timezone, now=now,
                          allow_past=not pending_at)
    else:
        when = when_of(row)
    if new_expression or "timezone" in changes:
        values.update(_columns(when))
    enabled = changes.get("enabled", row["enabled"])
    if enabled != row["enabled"]:
        values["enabled"] = enabled
    if enabled and row["idle_paused_at"] is not None:  # resumed: idle again only after N more days
        values["idle_paused_at"] = None
    if new_expression or "timezone" in changes or enabled != row["enabled"]:
        values["next_fire_at"] = when.next_fire(now) if enabled else None
    return values


def delete(rt: Runtime, owner_id: int, schedule_id: int) -> dict[str, Any]:
    """Delete the schedule and what fires it; returns what was deleted."""
    from zerg.ports import SchedulerUnavailable

    with rt.pool.connection() as conn:
        row = store.delete(conn, owner_id, schedule_id)
        if row is None:
            raise ScheduleNotFound(f"schedule {schedule_id} not found")
        try:
            rt.scheduler.delete(schedule_id)
        except SchedulerUnavailable:
            conn.rollback()
            raise ScheduleUnavailable("the schedule could not be deleted in EventBridge Scheduler; nothing changed; "
                                      "try again shortly") from None
        conn.commit()
    return public(row)


def prune_fired_one_offs(rt: Runtime, *, now: datetime | None = None,
                         should_stop: Callable[[], bool] | None = None) -> dict[str, int]:
    """Delete every owner's one-offs that fired more than :data:`ONE_OFF_KEPT` before ``now``, each
    with what fires it (as :func:`delete` does); counts of pruned and failed ones."""
    from zerg.ports import SchedulerUnavailable

    fired_before = (now or datetime.now(UTC)) - ONE_OFF_KEPT
    with rt.pool.connection() as conn:
        stale = store.fired_one_offs(conn, fired_before, PRUNE_BATCH)
    counts = {"pruned": 0, "prune_errors": 0}
    for ref in stale:
        if should_stop is not None and should_stop():
            break
        with rt.pool.connection() as conn:
            row = store.delete_fired_one_off(conn, ref["owner_id"], ref["id"], fired_before)
            if row is None:  # given a new time (or deleted) since the read: not ours to prune
                conn.rollback()
                continue
            try:
                rt.scheduler.delete(row["id"])
            except SchedulerUnavailable:  # the row stays with its schedule; the next sweep tries again
                conn.rollback()
                counts["prune_errors"] += 1
                observability.logger().warning("could not prune a fired one-off schedule", extra={
                    "schedule_id": row["id"], "owner_id": row["owner_id"]})
                continue
            conn.commit()
        counts["pruned"] += 1
    return counts


def get(rt: Runtime, owner_id: int, schedule_id: int) -> dict[str, Any]:
    with rt.pool.connection() as conn:
        row = store.get(conn, owner_id, schedule_id)
    if row is None:
        raise ScheduleNotFound(f"schedule {schedule_id} not found")
    return public(row)


def find(rt: Runtime, owner_id: int, name_or_id: str) -> dict[str, Any]:
    """The owner's schedule by name, or by id when given digits (the CLI's NAME_OR_ID)."""
    with rt.pool.connection() as conn:
        row = store.get_by_ref(conn, owner_id, name_or_id.strip())
    if row is None:
        raise ScheduleNotFound(f"no schedule named {name_or_id!r}" +
                               (" or with that id" if name_or_id.strip().isascii() and name_or_id.strip().isdigit() else ""))
    return public(row)


def list_schedules(rt: Runtime, owner_id: int) -> list[dict[str, Any]]:
    """The owner's schedules, oldest first."""
    with rt.pool.connection() as conn:
        return [public(row) for row in store.list_for_owner(conn, owner_id)]
