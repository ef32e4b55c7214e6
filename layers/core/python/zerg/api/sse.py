"""Server-Sent Events over ``run_events``: replay after ``Last-Event-ID``, then follow.

Two streams share one loop (:func:`_follow`): a run's events (:func:`stream`, ends with the run's
terminal event) and the owner-wide feed (:func:`owner_stream`: ``run_started`` / ``run_finished``
of every run of the owner, never ends by itself; a client without an id starts at the owner's
newest feed event, told to it by an id-only frame, so a reconnect resumes from there, not from "now").
The loop serves both transports: the local server writes each frame as it is produced (a
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

from zerg.runs.events import TERMINAL_EVENTS, latest_event_id, list_events, owner_feed, terminal_event_id

log = logging.getLogger("zerg.api.sse")

RETRY_MS = 5000  # seed 8.4: a dropped stream reconnects after 5 s
RECHECK_S = 5.0  # a live stream asks this often whether its session is still live


def frame(event_id: int | None, kind: str, payload: dict[str, Any]) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(payload, default=str)}\n\n"


def cursor(event_id: int) -> str:
    """An id-only frame: sets the client's Last-Event-ID without dispatching an event."""
    return f"id: {event_id}\n\n"


def heartbeat() -> str:
    return frame(None, "heartbeat", {"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def terminal_delivered(pool: Any, owner_id: int, run_id: int, after_id: int) -> bool:
    """True when the client already received the run's final event (nothing more will come)."""
    with pool.connection() as conn:
        final_id = terminal_event_id(conn, owner_id, run_id)
    return final_id is not None and after_id >= final_id


# One batch of a stream: (event id, event name, payload, whether it ends the stream).
Fetch = Callable[[Any, int], list[tuple[int, str, dict[str, Any], bool]]]


def stream(pool: Any, owner_id: int, run_id: int, after_id: int, **follow: Any) -> Iterator[str]:
    """Frames for the owner's run after ``after_id``, up to and including its terminal event (see
    :func:`_follow` for the keyword arguments)."""

    def fetch(conn: Any, after: int) -> list[tuple[int, str, dict[str, Any], bool]]:
        return [(e["id"], e["event_type"], e["payload"], e["event_type"] in TERMINAL_EVENTS)
                for e in list_events(conn, owner_id, run_id, after_id=after)]

    return _follow(pool, fetch, after_id, label=f"run {run_id}", **follow)


def feed_start(pool: Any, owner_id: int) -> int:
    """Where a new feed client (no Last-Event-ID) starts: the owner's newest feed event, no history."""
    with pool.connection() as conn:
        return latest_event_id(conn, owner_id)


def owner_stream(pool: Any, owner_id: int, after_id: int, *, announce: bool = False, **follow: Any) -> Iterator[str]:
    """The owner-wide feed after ``after_id``; ``announce`` (a client that sent no id, started at
    :func:`feed_start`) first sends an id-only frame so its reconnects resume from there. Ends
    only as :func:`_follow` says (deadline, linger, stop, revoked session)."""
    if announce:
        yield cursor(after_id)

    def fetch(conn: Any, after: int) -> list[tuple[int, str, dict[str, Any], bool]]:
        return [(e["id"], e["kind"], e["payload"], False) for e in owner_feed(conn, owner_id, after_id=after)]

    yield from _follow(pool, fetch, after_id, label=f"owner {owner_id}'s feed", **follow)


def _follow(
    pool: Any,
    fetch: Fetch,
    after_id: int,
    *,
    label: str,
    heartbeat_s: float,
    deadline: float | None = None,
    linger_s: float | None = None,
    poll_s: float = 0.2,
    stop: threading.Event | None = None,
    still_valid: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """Frames of ``fetch`` after ``after_id``; stops after an event that ends the stream, at
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
                batch = fetch(conn, after_id)
        except OperationalError as exc:
            if not outage:
                log.warning("%s: the event stream waits for the database: %s", label, exc)
            outage, batch = True, []
        else:
            outage = False
        for event_id, kind, payload, final in batch:
            after_id = event_id
            yield frame(event_id, kind, payload)
            if final:
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
