"""``zerg schedules run-now`` and ``zerg schedules history``: fire a schedule by hand as the ticker
would (and wait for its run, like ``zerg run``), and list its latest fires.

Exit status as the other ``zerg schedules`` commands (:mod:`zerg.schedules.commands`); run-now
also exits 1 when the fire did not succeed (its run failed, it was skipped, the send failed) and
130 on Ctrl-C (the run is cancelled on the way out, as ``zerg run`` does).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from zerg.statuses import RUN_FINAL

HISTORY_MAX = 1000


def cmd_run_now(args: argparse.Namespace) -> int:
    from zerg import observability
    from zerg.schedules import service
    from zerg.schedules.commands import _run
    from zerg.schedules.fire import fire

    if not args.verbose:  # the handlers' log lines are for operators, not this terminal
        observability.set_level("WARNING")

    def work(rt: Any, owner_id: int) -> int:
        schedule = service.find(rt, owner_id, args.schedule)
        if schedule["kind"] == "check":
            _prepare_local_run(rt)
        result = fire(rt, schedule["id"], datetime.now(UTC), source="run-now")
        print(f"fired schedule {schedule['id']} {schedule['name']!r} ({schedule['kind']}): {result.outcome}"
              + (f" ({result.detail})" if result.detail else "")
              + (f", run {result.run_id}" if result.run_id else ""), flush=True)
        if result.outcome != "started" or result.run_id is None:
            return 0 if result.outcome in ("sent", "nothing") else 1
        return _wait_for_run(rt, owner_id, result.run_id)

    from zerg.runtime import get_runtime

    try:
        return _run(args, work)
    finally:
        get_runtime().close()


def _prepare_local_run(rt: Any) -> None:
    """What ``zerg run`` does before a run executes in this process: say how isolated workers are,
    and warm the engine's imports."""
    from zerg.local.engine import LocalStarter, prewarm
    from zerg.sandbox import announce

    if isinstance(rt.starter, LocalStarter):
        announce(rt.settings)
        prewarm(cache_dir=rt.settings.data_dir / "cache")


def _wait_for_run(rt: Any, owner_id: int, run_id: int) -> int:
    """Follow the run's progress until it ends, then print its answer as ``zerg run`` does, then its
    inbox item's severity and headline when it has one."""
    from zerg.local.engine import LocalStarter
    from zerg.local.run import cancel, follow_events, print_report, report_of
    from zerg.runs import store as runs

    local = isinstance(rt.starter, LocalStarter)

    def ended() -> bool:  # the run closed, and this process's execution of it (if any) stopped
        with rt.pool.connection() as conn:
            if runs.run_status(conn, owner_id, run_id) not in RUN_FINAL:
                return False
        return not local or rt.starter.execution_of(run_id) is None or rt.starter.ended_execution(run_id) is not None

    interrupted = False
    try:
        follow_events(rt, owner_id, run_id, ended)
    except KeyboardInterrupt:
        if not local:
            raise
        interrupted = True
        cancel(rt, rt.starter, owner_id, run_id)
    report = report_of(rt, owner_id, run_id, interrupted)
    print_report(rt, report, owner_id)
    if local and not interrupted:  # the steps after the answer (memory, the inbox item) run on here
        rt.starter.finish_background(lambda line: print(line, file=sys.stderr, flush=True))
    item = _inbox_item(rt, owner_id, run_id)
    if item is not None:
        print(f"inbox: {item['severity']}: {item['headline']}")
    if interrupted:
        return 130
    return 0 if report.status == "success" else 1


def _inbox_item(rt: Any, owner_id: int, run_id: int) -> dict[str, Any] | None:
    """The run's inbox item (severity, headline), when the inbox has one for it."""
    from zerg.alerts import inbox

    with rt.pool.connection() as conn:
        return inbox.get(conn, owner_id, run_id)


def cmd_history(args: argparse.Namespace) -> int:
    from zerg.schedules import fires, service
    from zerg.schedules.commands import _run, local_time

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
    return _run(args, work)


def _limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= HISTORY_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number 1-{HISTORY_MAX}")
    return int(text)


def add_fire_commands(schedules: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                      resolve_owner: Callable[[Any, str | None], int]) -> None:
    """``run-now`` and ``history`` under ``zerg schedules``."""
    run_now = schedules.add_parser("run-now", help="fire a schedule now as the ticker would, and wait for its run")
    run_now.add_argument("-v", "--verbose", action="store_true", help="show the handlers' log lines")
    history = schedules.add_parser("history", help="a schedule's latest fires: time, source, outcome, run, why")
    history.add_argument("--limit", type=_limit, default=20, help="how many (default 20)")
    for parser, func in ((run_now, cmd_run_now), (history, cmd_history)):
        parser.add_argument("schedule", metavar="NAME_OR_ID")
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
