"""The usage ledger (``llm_calls``): every model call, recorded by the model port itself.

:class:`MeteredChatModel` wraps whichever provider the runtime chose; each call made with a
:class:`~zerg.llm.CallTag` becomes one row (owner, run, job, component, model, tokens in / out /
cached, USD, latency) and one EMF metric line. Every SQL statement on ``llm_calls`` lives here.

Invariants:
- The ledger never changes the outcome of a call: a row that cannot be written is logged and
  dropped, the model's answer is returned as is.
- Reads are scoped by owner.
- Before a tagged call the owner's daily spending cap is checked (:mod:`zerg.alerts.budget`): past
  it the call is not made and :class:`~zerg.alerts.budget.SpendingCapReached` is raised. A check
  that cannot be made (database down) lets the call through, with a log line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from psycopg import Connection

from zerg import observability
from zerg.llm.port import CallTag, ChatModel, ChatResult

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def record_call(conn: Connection, tag: CallTag, result: ChatResult, latency_ms: float) -> None:
    u = result.usage
    conn.execute(
        """INSERT INTO llm_calls (owner_id, run_id, job_id, component, model, tokens_in, tokens_out,
                                  tokens_cached, cost_usd, latency_ms)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
        (tag.owner_id, tag.run_id, tag.job_id, tag.component, result.model, u.tokens_in, u.tokens_out,
         u.tokens_cached, u.cost_usd, round(latency_ms)),
    )


def calls_of_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The owner's ledger rows of one run, oldest first."""
    return conn.execute(
        """SELECT id, run_id, job_id, component, model, tokens_in, tokens_out, tokens_cached, cost_usd,
                  latency_ms, created_at
           FROM llm_calls WHERE owner_id = %s AND run_id = %s ORDER BY id""",
        (owner_id, run_id),
    ).fetchall()


def spent_since(conn: Connection, owner_id: int, since: datetime) -> Decimal:
    """What the owner's model calls cost since ``since`` (USD; calls of unknown price count 0)."""
    row = conn.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) AS spent FROM llm_calls WHERE owner_id = %s AND created_at >= %s",
        (owner_id, since),
    ).fetchone()
    return Decimal(row["spent"])


def export_llm_calls(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's whole usage ledger, oldest first, streamed (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM llm_calls WHERE owner_id = %s ORDER BY id", (owner_id,))


class MeteredChatModel:
    """A :class:`ChatModel` that records every tagged call in the ledger."""

    def __init__(self, inner: ChatModel, pool: Callable[[], "ConnectionPool"]) -> None:
        self.inner = inner
        self._pool = pool

    def complete(self, messages: list[dict[str, Any]], *, model: str, tag: CallTag | None = None,
                 **kwargs: Any) -> ChatResult:
        if tag is not None:
            self._check_cap(tag)
        started = time.perf_counter()
        result = self.inner.complete(messages, model=model, tag=tag, **kwargs)
        latency_ms = (time.perf_counter() - started) * 1000
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

    def _check_cap(self, tag: CallTag) -> None:
        """Raise :class:`~zerg.alerts.budget.SpendingCapReached` when the owner's cap is spent."""
        from zerg.alerts import budget

        try:
            with self._pool().connection() as conn:
                state = budget.today(conn, tag.owner_id)
        except Exception as exc:  # no database, no ledger either: the run's own steps will say so
            observability.logger().warning("spending cap not checked", extra={"reason": f"{type(exc).__name__}: {exc}"})
            return
        state.check()
