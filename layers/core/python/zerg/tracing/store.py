"""The ``run_spans`` table: every span of a run's trace kept locally, for the run's waterfall
(``GET /api/jarvis/runs/{id}/trace``). All of its SQL lives here, with the span exporter that
writes it (:class:`SpanStoreExporter`, added by :mod:`zerg.tracing.setup` when ``ZERG_TRACE_STORE``
is on).

Invariants:
- A span is stored only when it names its run and owner (``zerg.run.id``, ``zerg.owner.id``: every
  span :mod:`zerg.tracing` opens does); once per run (a retried export changes nothing).
- Reads are scoped by owner: another owner's run has no spans.
- The exporter never fails the work: a batch that cannot be written is logged and dropped.
- Spans older than ``ZERG_TRACE_RETENTION_DAYS`` are deleted by :func:`prune` (``zerg serve``'s daily
  housekeeping): the run, its events and the waterfall built from them stay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from zerg import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from psycopg_pool import ConnectionPool

    from zerg.runtime import Runtime

log = logging.getLogger(__name__)

KINDS = {0: "internal", 1: "server", 2: "client", 3: "producer", 4: "consumer"}
STATUSES = {0: "unset", 1: "ok", 2: "error"}


def row_of(span: "ReadableSpan") -> dict[str, Any] | None:
    """The ``run_spans`` row of a finished span, or None when it names no run."""
    attrs = dict(span.attributes or {})
    run_id, owner_id = attrs.get(tracing.RUN_ID), attrs.get(tracing.OWNER_ID)
    ctx = span.get_span_context()
    if not isinstance(run_id, int) or not isinstance(owner_id, int) or ctx is None or span.start_time is None:
        return None
    end = span.end_time if span.end_time is not None else span.start_time
    return {
        "owner_id": owner_id, "run_id": run_id, "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "name": span.name[:300], "kind": KINDS.get(span.kind.value, "internal"),
        "started_at": datetime.fromtimestamp(span.start_time / 1e9, tz=timezone.utc),
        "duration_ms": max(0.0, (end - span.start_time) / 1e6),
        "status": STATUSES.get(span.status.status_code.value, "unset"),
        "status_message": (span.status.description or None) and span.status.description[:2000],
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()},
    }


def insert_spans(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO run_spans (owner_id, run_id, trace_id, span_id, parent_span_id, name, kind, started_at,
                                      duration_ms, status, status_message, attributes)
               SELECT %(owner_id)s, %(run_id)s, %(trace_id)s, %(span_id)s, %(parent_span_id)s, %(name)s, %(kind)s,
                      %(started_at)s, %(duration_ms)s, %(status)s, %(status_message)s, %(attributes)s
               WHERE EXISTS (SELECT 1 FROM runs WHERE id = %(run_id)s AND owner_id = %(owner_id)s)
               ON CONFLICT (run_id, span_id) DO NOTHING""",
            [{**r, "attributes": Jsonb(r["attributes"])} for r in rows],
        )


def spans_of_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The owner's spans of one run, in start order (none for another owner's run)."""
    return conn.execute(
        """SELECT trace_id, span_id, parent_span_id, name, kind, started_at, duration_ms, status, status_message,
                  attributes
           FROM run_spans WHERE owner_id = %s AND run_id = %s ORDER BY started_at, id""",
        (owner_id, run_id),
    ).fetchall()


def trace_of_run(conn: Connection, owner_id: int, run_id: int) -> str | None:
    """The trace id of the owner's run's kept spans, or None."""
    row = conn.execute("SELECT trace_id FROM run_spans WHERE owner_id = %s AND run_id = %s LIMIT 1",
                       (owner_id, run_id)).fetchone()
    return row["trace_id"] if row else None


def delete_older_than(conn: Connection, before: datetime, *, batch: int = 5000) -> int:
    """Delete up to ``batch`` spans (any owner's) that started before ``before``; how many went."""
    return conn.execute(
        """DELETE FROM run_spans WHERE id IN (
               SELECT id FROM run_spans WHERE started_at < %s ORDER BY started_at LIMIT %s)""",
        (before, batch),
    ).rowcount


def prune(rt: "Runtime", *, batch: int = 5000) -> dict[str, Any]:
    """Delete every span older than the retention, ``batch`` at a time; its count (housekeeping)."""
    before = datetime.now(timezone.utc) - timedelta(days=rt.settings.trace_retention_days)
    deleted = 0
    while True:
        with rt.pool.connection() as conn:
            n = delete_older_than(conn, before, batch=batch)
        deleted += n
        if n < batch:
            return {"spans_deleted": deleted}


def export_run_spans(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's spans, oldest first, streamed (``zerg owners export``)."""
    with conn.cursor() as cur:
        yield from cur.stream("SELECT * FROM run_spans WHERE owner_id = %s ORDER BY id", (owner_id,))


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class SpanStoreExporter:
    """An OpenTelemetry ``SpanExporter`` writing each run's spans to ``run_spans``."""

    def __init__(self, pool: Callable[[], "ConnectionPool"]) -> None:
        self._pool = pool

    def export(self, spans: Sequence["ReadableSpan"]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        rows = [r for r in (row_of(s) for s in spans) if r is not None]
        if not rows:
            return SpanExportResult.SUCCESS
        try:
            with self._pool().connection() as conn:
                insert_spans(conn, [{**r, "attributes": _json_safe(r["attributes"])} for r in rows])
        except Exception as exc:  # the work goes on; the waterfall misses these spans
            log.warning("%d span(s) not stored: %s: %s", len(rows), type(exc).__name__, exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
