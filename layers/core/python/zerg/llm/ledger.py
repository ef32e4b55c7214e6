"""The usage ledger (``llm_calls``): every model call, recorded by the model port itself.

:class:`MeteredChatModel` wraps whichever provider the runtime chose; each call made with a
:class:`~zerg.llm.CallTag` becomes one row (owner, run, job, component, model, tokens in / out /
cached / written to the prompt cache, USD, latency) and one EMF metric line. Every SQL statement on ``llm_calls`` lives here.

Invariants:
- The ledger never changes the outcome of a call: a row that cannot be written is logged and
  dropped, the model's answer is returned as is.
- Reads are scoped by owner. Usage reports count days in UTC; a call of unknown price adds 0 USD
  and marks its row ``cost_known: false``.
- Before a tagged call the owner's daily spending cap and the run's budget are checked by the
  check :mod:`zerg.wiring` hands in (:func:`zerg.alerts.budget.before_call`): past either the call
  is not made and the check's error (a :class:`~zerg.alerts.budget.SpendingCapReached`) is raised.
  A check that cannot be made (database down) lets the call through, with a log line.
- A call of a model the price table does not know is recorded at the owner's price for it when the
  check found one (the policy's ``model_prices``), else with an unknown cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import date, datetime, time as clock, timedelta, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from psycopg import Connection, sql

from zerg import observability
from zerg.llm.port import CallTag, ChatModel, ChatResult

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def record_call(conn: Connection, tag: CallTag, result: ChatResult, latency_ms: float) -> None:
    u = result.usage
    conn.execute(
        """INSERT INTO llm_calls (owner_id, run_id, job_id, component, model, tokens_in, tokens_out,
                                  tokens_cached, tokens_cache_write, cost_usd, latency_ms)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
        (tag.owner_id, tag.run_id, tag.job_id, tag.component, result.model, u.tokens_in, u.tokens_out,
         u.tokens_cached, u.tokens_cache_write, u.cost_usd, round(latency_ms)),
    )


def calls_of_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The owner's ledger rows of one run, oldest first."""
    return conn.execute(
        """SELECT id, run_id, job_id, component, model, tokens_in, tokens_out, tokens_cached, cost_usd,
                  latency_ms, created_at
           FROM llm_calls WHERE owner_id = %s AND run_id = %s ORDER BY id""",
        (owner_id, run_id),
    ).fetchall()


# What a usage report groups by, and the key of each row (a day is a UTC day, ``YYYY-MM-DD``).
USAGE_GROUPS = {
    "day": "(created_at AT TIME ZONE 'UTC')::date",  # a date, not to_char's text: 3x cheaper per row
    "model": "model",
    "component": "component",
    "job": "job_id",  # a worker job: its worker's and its summary's calls (calls of no job are left out)
}


def usage_report(conn: Connection, owner_id: int, from_day: date, to_day: date, group_by: str) -> list[dict[str, Any]]:
    """The owner's model calls from ``from_day`` to ``to_day`` (UTC days, inclusive), one row per
    key of ``group_by`` (day, model, component or job), sorted by key: ``{key, calls, tokens_in,
    tokens_out, cost_usd, cost_known}`` (a job's key is its id, as text)."""
    key = sql.SQL(USAGE_GROUPS[group_by])  # KeyError for anything else: callers validate first
    start = datetime.combine(from_day, clock.min, timezone.utc)
    end = datetime.combine(to_day + timedelta(days=1), clock.min, timezone.utc)
    rows = conn.execute(sql.SQL(
        """SELECT {key} AS key, count(*) AS calls, SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out,
                  COALESCE(SUM(cost_usd), 0) AS cost_usd, bool_and(cost_usd IS NOT NULL) AS cost_known
           FROM llm_calls WHERE owner_id = %s AND created_at >= %s AND created_at < %s {jobs_only}
           GROUP BY 1 ORDER BY 1""").format(
        key=key, jobs_only=sql.SQL("AND job_id IS NOT NULL" if group_by == "job" else "")),
        (owner_id, start, end),
    ).fetchall()
    return [_usage_row(r) for r in rows]


def usage_totals(conn: Connection, owner_id: int, from_day: date, to_day: date) -> dict[str, Any]:
    """The owner's model calls from ``from_day`` to ``to_day`` (UTC days, inclusive) in one row:
    ``{calls, tokens_in, tokens_out, cost_usd, cost_known, runs}`` (``runs``: the runs that made a
    call in the period; calls of no run, such as memory's, count in the rest but not there)."""
    start = datetime.combine(from_day, clock.min, timezone.utc)
    end = datetime.combine(to_day + timedelta(days=1), clock.min, timezone.utc)
    row = conn.execute(
        """SELECT count(*) AS calls, COALESCE(SUM(tokens_in), 0) AS tokens_in,
                  COALESCE(SUM(tokens_out), 0) AS tokens_out, COALESCE(SUM(cost_usd), 0) AS cost_usd,
                  COALESCE(bool_and(cost_usd IS NOT NULL), true) AS cost_known, count(DISTINCT run_id) AS runs
           FROM llm_calls WHERE owner_id = %s AND created_at >= %s AND created_at < %s""",
        (owner_id, start, end),
    ).fetchone()
    return {"calls": row["calls"], "tokens_in": int(row["tokens_in"]), "tokens_out": int(row["tokens_out"]),
            "cost_usd": float(row["cost_usd"]), "cost_known": row["cost_known"], "runs": row["runs"]}


def usage_by_component(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The owner's run's model calls per component (supervisor, worker, summary, memory, intent,
    ...), sorted by component: ``{component, calls, tokens_in, tokens_out, cost_usd, cost_known}``."""
    rows = conn.execute(
        """SELECT component AS key, count(*) AS calls, SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out,
                  COALESCE(SUM(cost_usd), 0) AS cost_usd, bool_and(cost_usd IS NOT NULL) AS cost_known
           FROM llm_calls WHERE owner_id = %s AND run_id = %s GROUP BY component ORDER BY component""",
        (owner_id, run_id),
    ).fetchall()
    return [{"component": r.pop("key"), **r} for r in map(_usage_row, rows)]


def _usage_row(row: dict[str, Any]) -> dict[str, Any]:
    key = row["key"].isoformat() if isinstance(row["key"], date) else row["key"]
    key = str(key) if isinstance(key, int) else key
    return {"key": key, "calls": row["calls"], "tokens_in": int(row["tokens_in"]),
            "tokens_out": int(row["tokens_out"]), "cost_usd": float(row["cost_usd"]), "cost_known": row["cost_known"]}


def spent_since(conn: Connection, owner_id: int, since: datetime) -> Decimal:
    """What the owner's model calls cost since ``since`` (USD; calls of unknown price count 0)."""
    row = conn.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) AS spent FROM llm_calls WHERE owner_id = %s AND created_at >= %s",
        (owner_id, since),
    ).fetchone()
    return Decimal(row["spent"])


def run_spend(conn: Connection, owner_id: int, run_id: int) -> tuple[Decimal, int]:
    """What the owner's run's model calls cost so far: (USD, tokens in + out); unknown prices count 0."""
    row = conn.execute(
        """SELECT COALESCE(SUM(cost_usd), 0) AS usd, COALESCE(SUM(tokens_in + tokens_out), 0) AS tokens
           FROM llm_calls WHERE owner_id = %s AND run_id = %s""",
        (owner_id, run_id),
    ).fetchone()
    return Decimal(row["usd"]), int(row["tokens"])


def schedule_spend_since(conn: Connection, owner_id: int, schedule_id: int, since: datetime) -> tuple[Decimal, int]:
    """What the runs the owner's schedule fired cost since ``since``: (USD, tokens in + out)."""
    row = conn.execute(
        """SELECT COALESCE(SUM(cost_usd), 0) AS usd, COALESCE(SUM(tokens_in + tokens_out), 0) AS tokens
           FROM llm_calls WHERE owner_id = %s AND created_at >= %s AND run_id IN (
               SELECT run_id FROM schedule_fires WHERE owner_id = %s AND schedule_id = %s AND run_id IS NOT NULL)""",
        (owner_id, since, owner_id, schedule_id),
    ).fetchone()
    return Decimal(row["usd"]), int(row["tokens"])


def usage_by_job(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The owner's run's model calls per worker job (its worker's and its summary's calls), by job id:
    ``{job_id, calls, tokens_in, tokens_out, cost_usd, cost_known}``."""
    rows = conn.execute(
        """SELECT job_id AS key, count(*) AS calls, SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out,
                  COALESCE(SUM(cost_usd), 0) AS cost_usd, bool_and(cost_usd IS NOT NULL) AS cost_known
           FROM llm_calls WHERE owner_id = %s AND run_id = %s AND job_id IS NOT NULL GROUP BY job_id ORDER BY job_id""",
        (owner_id, run_id),
    ).fetchall()
    return [{"job_id": int(r.pop("key")), **r} for r in map(_usage_row, rows)]


def export_llm_calls(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's whole usage ledger, oldest first, streamed (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM llm_calls WHERE owner_id = %s ORDER BY id", (owner_id,))


class CapState(Protocol):
    # The owner's price of the called model (USD per million tokens in, out) when they set one.
    price: tuple[float, float] | None

    def check(self) -> None:
        """Raise when this model call may not be made (the owner's cap, the run's budget, an unknown price)."""


# The spending state before one call (tag, model), read through the connection (``zerg.alerts.budget.before_call``).
CapCheck = Callable[[Connection, CallTag, str], CapState]


class MeteredChatModel:
    """A :class:`ChatModel` that records every tagged call in the ledger, and checks the owner's
    spending cap before it with ``cap_check`` (none: no cap)."""

    def __init__(self, inner: ChatModel, pool: Callable[[], "ConnectionPool"], cap_check: CapCheck | None = None) -> None:
        self.inner = inner
        self._pool = pool
        self._cap_check = cap_check

    def complete(self, messages: list[dict[str, Any]], *, model: str, tag: CallTag | None = None,
                 **kwargs: Any) -> ChatResult:
        state = self._check_cap(tag, model) if tag is not None else None
        started = time.perf_counter()
        result = self.inner.complete(messages, model=model, tag=tag, **kwargs)
        latency_ms = (time.perf_counter() - started) * 1000
        if state is not None and state.price is not None and result.usage.cost_usd is None:
            u = result.usage  # a model the table does not know, priced by its owner
            u.cost_usd = round((u.tokens_in * state.price[0] + u.tokens_out * state.price[1]) / 1_000_000, 8)
        if tag is None:
            observability.logger().warning("model call without a tag: not in the usage ledger", extra={"model": model})
            return result
        try:
            with self._pool().connection() as conn:
                record_call(conn, tag, result, latency_ms)
        except Exception as exc:  # the ledger is bookkeeping: the answer matters more
            observability.logger().warning("usage ledger row dropped", extra={"reason": f"{type(exc).__name__}: {exc}"})
        u = result.usage
        values = [("ModelCalls", 1, "Count"), ("ModelTokensIn", u.tokens_in, "Count"),
                  ("ModelTokensOut", u.tokens_out, "Count"), ("ModelLatency", latency_ms, "Milliseconds")]
        if u.cost_usd is not None:
            values.append(("ModelCostUSD", u.cost_usd, "None"))
        observability.metrics({"component": tag.component, "model": result.model}, *values)
        return result

    def _check_cap(self, tag: CallTag, model: str) -> CapState | None:
        """Raise the check's error (the owner's cap or the run's budget is spent, or the model has no
        price for a budgeted run); a check that cannot be made passes."""
        if self._cap_check is None:
            return None
        try:
            with self._pool().connection() as conn:
                state = self._cap_check(conn, tag, model)
        except Exception as exc:  # no database, no ledger either: the run's own steps will say so
            observability.logger().warning("spending cap not checked", extra={"reason": f"{type(exc).__name__}: {exc}"})
            return None
        state.check()
        return state
