"""``zerg inbox``: the owner's background results from the command line, through the same code as
the API (:mod:`zerg.alerts.inbox` to list, :func:`zerg.alerts.background.acknowledge` to
acknowledge, which stops a critical alert's escalation).

Every command acts for the local owner, or ``--owner NAME``. Exit status: 0 done, 1 not found,
2 bad input (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timezone
from typing import Any

from zerg.cli.common import count_arg, fail, run_as_owner


def line(item: dict[str, Any]) -> str:
    """One item: run id, severity, time (UTC), headline, and whether it was acknowledged."""
    when = item["created_at"].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ")
    state = "" if item["acknowledged_at"] is None else "\t(acknowledged)"
    return f"{item['run_id']}\t{item['severity'].upper()}\t{when}\t{item['headline']}{state}"


def cmd_list(args: argparse.Namespace) -> int:
    from zerg.alerts import inbox

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            rows = inbox.list_for_owner(conn, owner_id, limit=args.limit, unacknowledged_only=args.unacknowledged)
        if not rows:
            print("the inbox is empty" + (" (nothing unacknowledged)" if args.unacknowledged else ""))
        for row in rows:
            print(line(row))
        return 0

    return run_as_owner(args, work)


def cmd_ack(args: argparse.Namespace) -> int:
    from zerg.alerts import background

    def work(rt: Any, owner_id: int) -> int:
        item = background.acknowledge(rt, owner_id, args.run_id)
        if item is None:
            return fail(f"no inbox item for run {args.run_id}", 1)
        print(f"acknowledged: {line(item)}")
        return 0

    return run_as_owner(args, work)


def _run_id(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) < 2**62:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id (a positive number, as zerg inbox shows it)")
    return int(text)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg inbox`` group under the top-level sub-parsers: ``zerg inbox`` lists,
    ``zerg inbox ack RUN_ID`` acknowledges. ``resolve_owner(conn, name)`` is the CLI's own."""
    inbox_p = groups.add_parser("inbox", help="background results (scheduled checks): list them, acknowledge one")
    inbox_p.add_argument("--limit", type=count_arg(200), default=50, metavar="N", help="how many (1-200, default 50)")
    inbox_p.add_argument("--unacknowledged", action="store_true", help="only the items not acknowledged yet")
    add_owner_option(inbox_p)
    inbox_p.set_defaults(func=cmd_list, resolve_owner=resolve_owner)
    sub = inbox_p.add_subparsers(dest="cmd", metavar="{ack}")
    ack = sub.add_parser("ack", help="acknowledge a result (a critical alert stops repeating)")
    ack.add_argument("run_id", type=_run_id, help="the run id zerg inbox shows")
    add_owner_option(ack)
    ack.set_defaults(func=cmd_ack, resolve_owner=resolve_owner)
