"""Server-Sent Events over ``run_events``: replay after ``Last-Event-ID``, then follow.

One generator serves both transports: the local server writes each frame as it is produced (a
live stream); the Lambda handler collects frames for one long-poll (bounded below API Gateway's
timeout) and ends the body with ``retry:`` so a standard EventSource reconnects with the last id.
Heartbeats are not rows: they carry no id, so they never move ``Last-Event-ID``.
An open stream rides out a database outage: its polls fail quietly (heartbeats keep the
connection alive) and it goes on from the last event it sent once the database is back; the
session is re-checked then too. A new request meanwhile gets 503.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from psycopg import OperationalError

from zerg.runs.events import TERMINAL_EVENTS, list_events, terminal_event_id

log = logging.getLogger("zerg.api.sse")

RETRY_MS = 1000
RECHECK_S = 5.0  # a live stream asks this often whether its session is still live


def frame(event_id: int | None, kind: str, payload: dict[str, Any]) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(payload, default=str)}\n\n"


def heartbeat() -> str:
    return frame(None, "heartbeat", {"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def terminal_delivered(pool: Any, owner_id: int, run_id: int, after_id: int) -> bool:
    """True when the client already received the run's final event (nothing more will come)."""
    with pool.connection() as conn:
        final_id = terminal_event_id(conn, owner_id, run_id)
    return final_id is not None and after_id >= final_id


def stream(
    pool: Any,
    owner_id: int,
    run_id: int,
    after_id: int,
    *,
    heartbeat_s: float,
    deadline: float | None = None,
    linger_s: float | None = None,
    poll_s: float = 0.2,
    stop: threading.Event | None = None,
    still_valid: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """Frames for the owner's run after ``after_id``; stops after the terminal event, at
    ``deadline``, ``linger_s`` after the first new event (long-poll batching), within one
    poll once ``stop`` is set (a live stream whose client left), or once ``still_valid`` (asked
    every ``min(heartbeat_s, RECHECK_S)``) says the caller's session was revoked."""
    stop = stop or threading.Event()
    last_beat = last_check = time.monotonic()
    recheck_s = min(heartbeat_s, RECHECK_S)
    first_event_at: float | None = None
    outage = False
    while not stop.is_set():
        # A long-poll never waits for a connection past its deadline (Lambda's own timeout follows).
        wait_s = None if deadline is None else max(0.1, min(pool.timeout, deadline - time.monotonic()))
        try:
            with pool.connection(timeout=wait_s) as conn:
                batch = list_events(conn, owner_id, run_id, after_id=after_id)
        except OperationalError as exc:
            if not outage:
                log.warning("run %s: the event stream waits for the database: %s", run_id, exc)
            outage, batch = True, []
        else:
            outage = False
        for e in batch:
            after_id = e["id"]
            yield frame(e["id"], e["event_type"], e["payload"])
            if e["event_type"] in TERMINAL_EVENTS:
                return
        now = time.monotonic()
        if batch and first_event_at is None:
            first_event_at = now
        if deadline is not None and now >= deadline:
            return
        if linger_s is not None and first_event_at is not None and now - first_event_at >= linger_s:
            return
        if still_valid is not None and not outage and now - last_check >= recheck_s:
            last_check = now
            try:
                valid = still_valid()
            except OperationalError:  # cannot tell now (nor can a revocation be written): ask again later
                valid = True
            if not valid:  # logged out or revoked: the open stream ends too; a reconnect gets 401
                return
        if now - last_beat >= heartbeat_s:
            yield heartbeat()
            last_beat = now
        wait = poll_s if deadline is None else max(0.0, min(poll_s, deadline - now))
        stop.wait(wait)
