"""Schedules (``schedules``): every SQL statement on the table lives here.

Invariants:
- A schedule belongs to one owner; every read and write here is scoped by owner, except the
  system's own reads by the schedule alone: the ticker's :func:`due` sweep and :func:`get_for_fire`
  / :func:`advance` (a fire carries only the schedule id), which never reach an API answer.
- ``next_fire_at`` is NULL whenever the schedule is disabled (and for a one-off that has fired):
  :func:`due` reads the partial index ``schedules_due`` and finds nothing else. Writers
  (``service`` on create/update/pause/resume, ``advance`` after a fire) keep it so.
- A name is unique per owner (the table's constraint); :func:`create` and :func:`update` report a
  taken name as :class:`NameTaken` without aborting the caller's transaction.
- The per-owner limit counts what can still fire: a one-off that has fired (``at`` set, a last
  fire, no next fire) does not count (:data:`_FIRED_ONE_OFF`), and is pruned a week later
  (:func:`fired_one_offs`). :func:`create` counts and inserts under a per-owner advisory lock held
  to the end of the caller's transaction, so two concurrent creates cannot both pass the limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from psycopg import Connection, errors, sql
from psycopg.types.json import Jsonb

# What an update may set (the service decides the values; the names are fixed here).
UPDATABLE = ("name", "kind", "task", "cron", "rate", "at", "expression", "timezone", "enabled", "channels",
             "next_fire_at", "fire_usd_budget", "fire_token_budget", "day_usd_budget", "day_token_budget",
             "idle_pause_days", "idle_paused_at")


# A one-off that has fired: it shows when it fired until it is pruned, and never fires again.
_FIRED_ONE_OFF = "at IS NOT NULL AND last_fire_at IS NOT NULL AND next_fire_at IS NULL"
_CREATE_LOCK_SPACE = 0x5A534348  # advisory-lock namespace for "creating a schedule of owner N"


class NameTaken(ValueError):
    """The owner already has a schedule of that name."""


def _jsonb(value: Any) -> Any:
    return Jsonb(value) if value is not None else None


def create(conn: Connection, owner_id: int, *, kind: str, name: str, task: str, cron: str | None, rate: str | None,
           at: datetime | None, expression: str, timezone: str, enabled: bool, channels: dict | None,
           next_fire_at: datetime | None, limit: int) -> dict[str, Any] | None:
    """Insert the owner's schedule; None when the owner already has ``limit`` schedules that count.
    Holds the owner's create lock until the caller's transaction ends (it commits after the port)."""
    # Under READ COMMITTED a concurrent create's row is invisible to this count until it commits:
    # without the lock, two creates at limit - 1 would both insert.
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_CREATE_LOCK_SPACE, owner_id % 2**31))
    try:
        with conn.transaction():  # a savepoint: a taken name leaves the caller's transaction usable
            return conn.execute(
                """INSERT INTO schedules (owner_id, kind, name, task, cron, rate, at, expression, timezone, enabled,
                                          channels, next_fire_at)
                   SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s
                   WHERE (SELECT count(*) FROM schedules WHERE owner_id = %s AND NOT (""" + _FIRED_ONE_OFF + """)) < %s
                   RETURNING *""",
                (owner_id, kind, name, task, cron, rate, at, expression, timezone, enabled, _jsonb(channels),
                 next_fire_at, owner_id, limit),
            ).fetchone()
    except errors.UniqueViolation:
        raise NameTaken(f"a schedule named {name!r} exists already") from None


def get(conn: Connection, owner_id: int, schedule_id: int, *, for_update: bool = False) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT * FROM schedules WHERE owner_id = %s AND id = %s" + (" FOR UPDATE" if for_update else ""),
        (owner_id, schedule_id),
    ).fetchone()


def get_by_ref(conn: Connection, owner_id: int, name_or_id: str, *, for_update: bool = False) -> dict[str, Any] | None:
    """The owner's schedule named ``name_or_id``, else the one with that id (names are never all digits)."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute("SELECT * FROM schedules WHERE owner_id = %s AND name = %s" + lock,
                       (owner_id, name_or_id)).fetchone()
    if row is None and name_or_id.isascii() and name_or_id.isdigit() and int(name_or_id) < 2**62:
        row = get(conn, owner_id, int(name_or_id), for_update=for_update)
    return row


def list_for_owner(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM schedules WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def count_for_owner(conn: Connection, owner_id: int) -> int:
    """The owner's schedules that count toward the limit (fired one-offs do not)."""
    return conn.execute("SELECT count(*) AS n FROM schedules WHERE owner_id = %s AND NOT (" + _FIRED_ONE_OFF + ")",
                        (owner_id,)).fetchone()["n"]


def update(conn: Connection, owner_id: int, schedule_id: int, **values: Any) -> dict[str, Any] | None:
    """Set the given columns (names from :data:`UPDATABLE`) and ``updated_at``; None when not the owner's."""
    unknown = set(values) - set(UPDATABLE)
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    sets = [sql.SQL("{} = %s").format(sql.Identifier(column)) for column in values]
    params = [_jsonb(v) if column == "channels" else v for column, v in values.items()]
    statement = sql.SQL("UPDATE schedules SET {}, updated_at = now() WHERE owner_id = %s AND id = %s RETURNING *").format(
        sql.SQL(", ").join(sets))
    try:
        with conn.transaction():
            return conn.execute(statement, (*params, owner_id, schedule_id)).fetchone()
    except errors.UniqueViolation:
        raise NameTaken(f"a schedule named {values.get('name')!r} exists already") from None


def delete(conn: Connection, owner_id: int, schedule_id: int) -> dict[str, Any] | None:
    return conn.execute("DELETE FROM schedules WHERE owner_id = %s AND id = %s RETURNING *",
                        (owner_id, schedule_id)).fetchone()


def fired_one_offs(conn: Connection, fired_before: datetime, limit: int) -> list[dict[str, Any]]:
    """The system's prune: every owner's one-offs that fired before ``fired_before``, oldest first
    (``owner_id`` and ``id`` only: the delete is the owner's, :func:`delete_fired_one_off`)."""
    return conn.execute(
        "SELECT owner_id, id FROM schedules WHERE " + _FIRED_ONE_OFF + " AND last_fire_at < %s "
        "ORDER BY last_fire_at LIMIT %s",
        (fired_before, limit),
    ).fetchall()


def delete_fired_one_off(conn: Connection, owner_id: int, schedule_id: int,
                         fired_before: datetime) -> dict[str, Any] | None:
    """Delete the owner's schedule if it is still a one-off that fired before ``fired_before``
    (None otherwise: given a new time meanwhile, say)."""
    return conn.execute(
        "DELETE FROM schedules WHERE owner_id = %s AND id = %s AND " + _FIRED_ONE_OFF + " AND last_fire_at < %s "
        "RETURNING *",
        (owner_id, schedule_id, fired_before),
    ).fetchone()


def due(conn: Connection, now: datetime, limit: int) -> list[dict[str, Any]]:
    """The system's sweep: enabled schedules whose next fire is at or before ``now``, earliest first
    (the partial index ``schedules_due`` answers it)."""
    return conn.execute(
        """SELECT * FROM schedules WHERE enabled AND next_fire_at IS NOT NULL AND next_fire_at <= %s
           ORDER BY next_fire_at LIMIT %s""",
        (now, limit),
    ).fetchall()


def get_for_fire(conn: Connection, schedule_id: int, *, for_update: bool = False) -> dict[str, Any] | None:
    """The schedule a fire names, whoever owns it (a system read: a fire carries only the id)."""
    return conn.execute("SELECT * FROM schedules WHERE id = %s" + (" FOR UPDATE" if for_update else ""),
                        (schedule_id,)).fetchone()


def advance(conn: Connection, schedule_id: int, *, fired_at: datetime, next_fire_at: datetime | None,
            run_id: int | None = None) -> dict[str, Any] | None:
    """Record a fire: ``last_fire_at``, the next fire (kept NULL if the schedule was paused
    meanwhile), and the run it started, if any. ``updated_at`` is the owner's changes only."""
    return conn.execute(
        """UPDATE schedules SET last_fire_at = %s,
                  next_fire_at = CASE WHEN enabled THEN %s::timestamptz END,
                  last_run_id = COALESCE(%s, last_run_id)
           WHERE id = %s RETURNING *""",
        (fired_at, next_fire_at, run_id, schedule_id),
    ).fetchone()


def mark_idle_paused(conn: Connection, schedule_id: int) -> bool:
    """Record, once, that the schedule paused itself for lack of attention (not an owner's change:
    ``updated_at`` stays). True when this call recorded it."""
    row = conn.execute("UPDATE schedules SET idle_paused_at = now() WHERE id = %s AND idle_paused_at IS NULL RETURNING id",
                       (schedule_id,)).fetchone()
    return row is not None


def export_schedules(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's schedules, for ``zerg owners export``."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM schedules WHERE owner_id = %s ORDER BY id", (owner_id,))
