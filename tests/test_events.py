"""The run event log: ids become visible in order, so Last-Event-ID never skips an event."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.factories import make_run
from zerg.runs import events


def test_a_later_event_of_the_same_run_waits_for_the_earlier_transaction(pool, owner, database_url):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as first:
        events.emit(first, run_id, owner, "supervisor_thinking", {"message": "first, not yet committed"})
        with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as second:
            second.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                events.emit(second, run_id, owner, "supervisor_thinking", {"message": "second"})
    # Once the first commits, the second goes through with a higher id.
    with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as second:
        later = events.emit(second, run_id, owner, "supervisor_thinking", {"message": "second"})
    with pool.connection() as conn:
        ids = [e["id"] for e in events.list_events(conn, owner, run_id)]
    assert ids[-1] == later and ids == sorted(ids)


def test_other_runs_are_not_held_up(pool, owner, database_url):
    run_a, _ = make_run(pool, owner)
    run_b, _ = make_run(pool, owner)
    with pool.connection() as first:
        events.emit(first, run_a, owner, "supervisor_thinking", {"message": "a"})
        with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as second:
            second.execute("SET lock_timeout = '200ms'")
            events.emit(second, run_b, owner, "supervisor_thinking", {"message": "b"})


def test_events_are_read_per_owner(pool, owner, other_owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        events.emit(conn, run_id, owner, "supervisor_thinking", {"message": "mine"})
        assert events.list_events(conn, other_owner, run_id) == []


def test_unknown_event_types_are_refused(pool, owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn, pytest.raises(ValueError, match="unknown event type"):
        events.emit(conn, run_id, owner, "worker_exploded", {})
