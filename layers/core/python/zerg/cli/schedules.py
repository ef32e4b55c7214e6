"""``zerg schedules``: the owner's schedules from the command line, through the same service as the
API and the supervisor (:mod:`zerg.schedules.service`).

Every command acts for the local owner, or ``--owner NAME``; a schedule is named by its name or
its id (NAME_OR_ID). Exit status: 0 done, 1 not found, 2 refused (bad input, a taken name, the
limit; one line on stderr, never a traceback), 3 EventBridge Scheduler unavailable (nothing
changed; try again).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from zerg.cli.common import fail as _fail
from zerg.cli.common import run_as_owner
from zerg.schedules.spec import KINDS, ScheduleSpec


def run_for_owner(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    """``work(runtime, owner_id)`` with the service's refusals as exit statuses."""
    from zerg.schedules import service

    return run_as_owner(args, work, ((service.ScheduleNotFound, 1), ((service.ScheduleError, service.ScheduleConflict), 2),
                                     (service.ScheduleUnavailable, 3)))


def local_time(moment: datetime | None, timezone: str) -> str:
    """An instant as the schedule's wall clock ("2026-11-23 06:00 CET"), or "-"."""
    if moment is None:
        return "-"
    return moment.astimezone(ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M %Z")


def written(schedule: dict[str, Any]) -> str:
    """The expression as the owner wrote it: 'cron 0 6 * * 1', 'rate 1 hour', 'at 2026-11-23T09:00:00'."""
    kind = next(k for k in ("cron", "rate", "at") if schedule[k] is not None)
    return f"{kind} {schedule[kind]}"


def describe(schedule: dict[str, Any]) -> str:
    state = "" if schedule["enabled"] else " (paused)"
    return (f"schedule {schedule['id']} {schedule['name']!r}: {written(schedule)} = {schedule['expression']} "
            f"in {schedule['timezone']}{state}; next fire {local_time(schedule['next_fire_at'], schedule['timezone'])}"
            f"{_spend(schedule)}")


def _channels(values: list[str] | None) -> dict[str, list[str]] | None:
    """``--channels warning=email,sms`` (repeatable; ``info=`` for none) as the body's overrides."""
    if not values:
        return None
    channels: dict[str, list[str]] = {}
    for value in values:
        severity, equals, listed = value.partition("=")
        if not equals:
            raise ValueError(f"--channels {value!r}: write SEVERITY=CHANNEL[,CHANNEL], e.g. warning=email,sms")
        channels[severity.strip()] = [c.strip() for c in listed.split(",") if c.strip()]
    return channels


def _budgets(args: argparse.Namespace) -> dict[str, Any]:
    """The budget options given (the spec validates them); ``--idle-pause-days never``: null."""
    values: dict[str, Any] = {}
    for name in ("fire_usd_budget", "fire_token_budget", "day_usd_budget", "day_token_budget"):
        if getattr(args, name, None) is not None:
            values[name] = getattr(args, name)
    idle = getattr(args, "idle_pause_days", None)
    if idle is not None:
        values["idle_pause_days"] = None if idle.strip().lower() == "never" else idle
    return values


def _spend(schedule: dict[str, Any]) -> str:
    parts = [f"{label} {'$' if 'usd' in name else ''}{schedule[name]}{'' if 'usd' in name else ' tokens'}"
             for name, label in (("fire_usd_budget", "per fire"), ("fire_token_budget", "per fire"),
                                 ("day_usd_budget", "per day"), ("day_token_budget", "per day"))
             if schedule.get(name) is not None]
    return f"; budget {', '.join(parts)}" if parts else ""


def cmd_add(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from zerg.schedules import service
    from zerg.validation import problems

    try:
        spec = ScheduleSpec.model_validate({
            "name": args.name, "task": " ".join(args.task) or None, "kind": args.kind, "cron": args.cron,
            "rate": args.rate, "at": args.at, "timezone": args.timezone, "enabled": not args.paused,
            "channels": _channels(args.channels), **_budgets(args)})
    except ValidationError as exc:
        return _fail(problems(exc.errors(), "body"), 2)
    except ValueError as exc:
        return _fail(str(exc), 2)

    def work(rt: Any, owner_id: int) -> int:
        print("created " + describe(service.create(rt, owner_id, spec)))
        return 0
    return run_for_owner(args, work)


def cmd_list(args: argparse.Namespace) -> int:
    from zerg.schedules import service

    def work(rt: Any, owner_id: int) -> int:
        schedules = service.list_schedules(rt, owner_id)
        if not schedules:
            print("no schedules (zerg schedules add NAME --cron '0 6 * * *' 'task' creates one)")
            return 0
        rows = [("ID", "NAME", "KIND", "WHEN", "SCHEDULER", "TIMEZONE", "ENABLED", "NEXT FIRE")]
        rows += [(str(s["id"]), s["name"], s["kind"], written(s), s["expression"], s["timezone"],
                  "yes" if s["enabled"] else "no", local_time(s["next_fire_at"], s["timezone"])) for s in schedules]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip())
        return 0
    return run_for_owner(args, work)


def _by_ref(action: str, verb: str) -> Callable[[argparse.Namespace], int]:
    """A command on one schedule named by NAME_OR_ID: ``service.<action>(rt, owner_id, id)``."""
    def command(args: argparse.Namespace) -> int:
        from zerg.schedules import service

        def work(rt: Any, owner_id: int) -> int:
            schedule = service.find(rt, owner_id, args.schedule)
            print(f"{verb} " + describe(getattr(service, action)(rt, owner_id, schedule["id"])))
            return 0
        return run_for_owner(args, work)
    return command


class _Intermixed(argparse.ArgumentParser):
    """Options may sit between positionals (``add NAME --cron X "task"``): plain argparse would
    take the empty task list right after NAME and then refuse the task."""

    _inside = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._inside:
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> argparse._SubParsersAction:
    """The ``zerg schedules`` group under the top-level sub-parsers; returns its sub-parsers so
    more commands can join (``run-now`` and ``history``: :mod:`zerg.cli.fire`)."""
    schedules = groups.add_parser("schedules", help="the owner's schedules: background checks, the digest, reminders"
                                  ).add_subparsers(dest="cmd", required=True, parser_class=_Intermixed)
    add = schedules.add_parser("add", help="create a schedule (EventBridge Scheduler on AWS, the ticker of zerg serve locally)")
    add.add_argument("name", help="unique among the owner's schedules, e.g. health-check")
    add.add_argument("task", nargs="*", help="check: what the background run does; reminder: the text to send; "
                                             "digest: optional")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="'M H DOM MON DOW'", help="standard 5-field Unix cron, e.g. '0 6 * * 1'")
    when.add_argument("--rate", metavar="'N UNIT'", help="every N minutes, hours or days, e.g. '1 hour'")
    when.add_argument("--at", metavar="YYYY-MM-DDTHH:MM", help="once, at this local time")
    add.add_argument("--tz", "--timezone", dest="timezone", metavar="ZONE",
                     help="IANA time zone, e.g. Europe/Berlin (default: the notification policy's, else UTC)")
    add.add_argument("--fire-usd-budget", type=float, metavar="USD", help="check: each fire's run stops past it")
    add.add_argument("--fire-token-budget", type=int, metavar="N", help="check: each fire's run stops past N tokens")
    add.add_argument("--day-usd-budget", type=float, metavar="USD", help="check: fires are skipped once a day spent it")
    add.add_argument("--day-token-budget", type=int, metavar="N", help="check: fires are skipped once a day spent N tokens")
    add.add_argument("--idle-pause-days", metavar="N|never",
                     help="pause when nobody opened or acknowledged its results for N days (default 14)")
    add.add_argument("--kind", choices=KINDS, default="check", help="check (default), digest or reminder")
    add.add_argument("--channels", action="append", metavar="SEVERITY=CH[,CH]",
                     help="channel override, e.g. warning=email (repeat per severity; 'info=' for none)")
    add.add_argument("--paused", action="store_true", help="create it paused")
    listing = schedules.add_parser("list", help="the owner's schedules with their next fire in their time zone")
    pause = schedules.add_parser("pause", help="stop a schedule firing (kept; resume starts it again)")
    resume = schedules.add_parser("resume", help="fire again from the next time on (missed fires are not caught up)")
    rm = schedules.add_parser("rm", help="delete a schedule")
    for parser in (pause, resume, rm):
        parser.add_argument("schedule", metavar="NAME_OR_ID")
    for parser, func in ((add, cmd_add), (listing, cmd_list), (pause, _by_ref("pause", "paused")),
                         (resume, _by_ref("resume", "resumed")), (rm, _by_ref("delete", "deleted"))):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
    return schedules
