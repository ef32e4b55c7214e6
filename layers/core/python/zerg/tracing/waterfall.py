"""A run's stored spans as the waterfall the dashboard draws (``GET /api/jarvis/runs/{id}/trace``):
spans nested under their parents, each with its start, duration, status and the tokens and cost of
its subtree (a ``chat`` span's own; an agent's or the run's, summed over the calls below it).

A span whose parent was not stored (the run's root span is written when the run closes; a span
batch lost to a database outage) stands at the top level, so nothing recorded is hidden.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from zerg import tracing

TOKENS = (("tokens_in", "gen_ai.usage.input_tokens"), ("tokens_out", "gen_ai.usage.output_tokens"),
          ("tokens_cached", "gen_ai.usage.cache_read.input_tokens"))


def _node(row: dict[str, Any]) -> dict[str, Any]:
    attrs = row["attributes"] or {}
    node = {"span_id": row["span_id"], "parent_span_id": row["parent_span_id"], "name": row["name"],
            "kind": row["kind"], "start": row["started_at"], "duration_ms": round(float(row["duration_ms"]), 3),
            "status": row["status"], "status_message": row["status_message"],
            "operation": attrs.get("gen_ai.operation.name"), "attributes": attrs, "children": []}
    for key, attr in TOKENS:
        value = attrs.get(attr)
        node[key] = int(value) if isinstance(value, (int, float)) else 0
    cost = attrs.get(tracing.COST_USD)
    node["cost_usd"] = float(cost) if isinstance(cost, (int, float)) else 0.0
    return node


def _total(node: dict[str, Any]) -> None:
    for child in node["children"]:
        _total(child)
        for key, _ in TOKENS:
            node[key] += child[key]
        node["cost_usd"] = round(node["cost_usd"] + child["cost_usd"], 8)


def build(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``{trace_id, started_at, duration_ms, spans}`` from a run's ``run_spans`` rows (start order)."""
    nodes = {row["span_id"]: _node(row) for row in rows}
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = nodes.get(node["parent_span_id"] or "")
        (parent["children"] if parent is not None and parent is not node else roots).append(node)
    for node in roots:
        _total(node)
    start: datetime | None = min((r["started_at"] for r in rows), default=None)
    end = max((r["started_at"].timestamp() * 1000 + float(r["duration_ms"]) for r in rows), default=None)
    return {"trace_id": rows[0]["trace_id"] if rows else None, "started_at": start,
            "duration_ms": round(end - start.timestamp() * 1000, 3) if start is not None and end is not None else None,
            "spans": roots}
