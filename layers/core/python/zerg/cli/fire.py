"""``zerg schedules run-now`` and ``zerg schedules history``: fire a schedule by hand as the ticker
would (and wait for its run, like ``zerg run``), and list its latest fires.

Exit status as the other ``zerg schedules`` commands (:mod:`zerg.cli.schedules`); run-now
also exits 1 when the fire did not succeed (its run failed, it was skipped, the send failed) and
130 on Ctrl-C (the run is cancelled on the way out, as ``zerg run`` does).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from zerg.cli.common import count_arg
from zerg.cli.schedules import local_time, run_for_owner

HISTORY_MAX = 1000


def cmd_run_now(args: argparse.Namespace) -> int:
    from zerg import observability
    from zerg.local.run import prepare_local_run, wait_for_run
    from zerg.schedules import service
    from zerg.schedules.firing import fire

    if not args.verbose:  # the handlers' log lines are for operators, not this terminal
        observability.set_level("WARNING")

    def work(rt: Any, owner_id: int) -> int:
        schedule = service.find(rt, owner_id, args.schedule)
        if schedule["kind"] == "check":
            prepare_local_run(rt)
        result = fire(rt, schedule["id"], datetime.now(UTC), source="run-now")
        print(f"fired schedule {schedule['id']} {schedule['name']!r} ({schedule['kind']}): {result.outcome}"
              + (f" ({result.detail})" if result.detail else "")
              + (f", run {result.run_id}" if result.run_id else ""), flush=True)
        if result.outcome != "started" or result.run_id is None:
            return 0 if result.outcome in ("sent", "nothing") else 1
        return wait_for_run(rt, owner_id, result.run_id)

    from zerg.wiring import get_runtime

    try:
        return run_for_owner(args, work)
    finally:
        get_runtime().close()


def cmd_history(args: argparse.Namespace) -> int:
    from zerg.schedules import fires, service

    def work(rt: Any, owner_id: int) -> int:
        schedule = service.find(rt, owner_id, args.schedule)
        with rt.pool.connection() as conn:
            rows = fires.list_for_schedule(conn, owner_id, schedule["id"], args.limit)
        if not rows:
            print(f"schedule {schedule['id']} {schedule['name']!r} has not fired yet")
            return 0
        table = [("SCHEDULED", "SOURCE", "OUTCOME", "RUN", "DETAIL")]
        table += [(local_time(r["scheduled_time"], schedule["timezone"]), r["source"], r["outcome"],
                   str(r["run_id"] or "-"), r["detail"] or "") for r in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
        for r in table:
            print("  ".join([*(cell.ljust(w) for cell, w in zip(r, widths, strict=False)), r[-1]]).rstrip())
        return 0
    return run_for_owner(args, work)


def add_fire_commands(schedules: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                      resolve_owner: Callable[[Any, str | None], int]) -> None:
    """``run-now`` and ``history`` under ``zerg schedules``."""
    run_now = schedules.add_parser("run-now", help="fire a schedule now as the ticker would, and wait for its run")
    run_now.add_argument("-v", "--verbose", action="store_true", help="show the handlers' log lines")
    history = schedules.add_parser("history", help="a schedule's latest fires: time, source, outcome, run, why")
    history.add_argument("--limit", type=count_arg(HISTORY_MAX), default=20, help="how many (default 20)")
    for parser, func in ((run_now, cmd_run_now), (history, cmd_history)):
        parser.add_argument("schedule", metavar="NAME_OR_ID")
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
