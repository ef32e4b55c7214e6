"""What every ``zerg`` command group acting for an owner shares (memory, schedules, contacts and
policy, inbox): the owner it acts for, and refusals as exit statuses.

Invariants:
- A command first brings the schema up to date, then resolves ``--owner NAME`` (default: the
  local owner) with the CLI's own resolver (``args.resolve_owner``).
- A refusal is one line on stderr and an exit status, never a traceback: 1 not found (or
  refused), 2 bad input, 3 a dependency unavailable (nothing changed; try again).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

Refusal = tuple[type[BaseException] | tuple[type[BaseException], ...], int | Callable[[BaseException], int]]


def count_arg(maximum: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from 1 to ``maximum`` (``--limit N``)."""
    def parse(text: str) -> int:
        if not text.isdigit() or not 1 <= int(text) <= maximum:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number from 1 to {maximum}")
        return int(text)
    return parse


def fail(message: str, status: int) -> int:
    """Say why on stderr; return ``status``."""
    print(f"zerg: error: {message}" if status >= 2 else f"zerg: {message}", file=sys.stderr)
    return status


def run_as_owner(args: argparse.Namespace, work: Callable[[Any, int], int], refusals: Sequence[Refusal] = ()) -> int:
    """``work(runtime, owner_id)``; an exception named in ``refusals`` becomes its exit status
    (a number, or a function of the exception)."""
    from zerg.migrate import migrate
    from zerg.wiring import get_runtime

    rt = get_runtime()
    with rt.pool.connection() as conn:
        migrate(conn)
        owner_id = args.resolve_owner(conn, args.owner)
    try:
        return work(rt, owner_id)
    except tuple(kind for kinds, _ in refusals for kind in (kinds if isinstance(kinds, tuple) else (kinds,))) as exc:
        for kinds, status in refusals:
            if isinstance(exc, kinds):
                return fail(str(exc), status(exc) if callable(status) else status)
        raise  # unreachable: exc matched one of them
