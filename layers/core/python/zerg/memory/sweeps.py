"""Daily memory sweeps that delete in batches (old file versions, long-forgotten facts), locally
from ``zerg serve``'s housekeeping and on AWS from the housekeeping rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime


def delete_in_batches(rt: "Runtime", delete_batch: "Callable[[Connection], int]", batch: int, counted: str,
                      should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Call ``delete_batch`` (one transaction each, at most ``batch`` rows) until a batch comes back
    short; ``should_stop`` (a Lambda's remaining time) is asked between batches, and a sweep cut
    short says ``complete=False``. Returns ``{counted: rows deleted, "complete": ...}`` for the log."""
    deleted = 0
    while True:
        with rt.pool.connection() as conn:
            n = delete_batch(conn)
        deleted += n
        if n < batch:
            return {counted: deleted, "complete": True}
        if should_stop is not None and should_stop():
            return {counted: deleted, "complete": False}
