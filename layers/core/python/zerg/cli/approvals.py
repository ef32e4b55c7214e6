"""``zerg approvals policy show|set|reset``: the owner's approval policy from the command line,
through the same validation as the API (:mod:`zerg.approvals`, docs/approvals.md).

``set`` changes only what its options name and keeps the rest. Every command acts for the local
owner, or ``--owner NAME``. Exit status: 0 done, 2 bad input (said precisely, nothing changed).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from zerg.cli.common import run_as_owner


class PolicyInputError(ValueError):
    """An option the policy cannot take (the message says which and why)."""


def _run(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    from zerg.approvals import PolicyUnreadable

    return run_as_owner(args, work, ((PolicyInputError, 2), (PolicyUnreadable, 1)))


def _show(view: dict[str, Any]) -> None:
    from zerg.approvals.policy import DEFAULT_MODES

    print("approval policy" + ("" if view["customised"] else " (all defaults)") + ":")
    for tool, mode in view["tools"].items():
        print(f"  {tool + ':':<17}{mode}{' (default)' if mode == DEFAULT_MODES[tool] else ''}")
    print(f"  {'built-in:':<17}{'on' if view['builtin_allowlist'] else 'off'}: "
          f"{', '.join(view['builtin_commands'])}")
    for host, patterns in sorted(view["ssh_allow"].items()):
        print(f"  ssh {('every host' if host == '*' else host) + ':'}")
        for pattern in patterns:
            print(f"    {pattern}")
    print(f"  {'expiry:':<17}{view['expiry_s']} s")
    if view["updated_at"]:
        print(f"  {'changed:':<17}{view['updated_at']:%Y-%m-%d %H:%M} UTC")


def changed(current: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The policy document after ``set``'s options (not validated yet)."""
    doc = {**current, "tools": dict(current.get("tools", {})),
           "ssh_allow": {h: list(p) for h, p in current.get("ssh_allow", {}).items()}}
    for item in args.tool or ():
        tool, eq, mode = item.partition("=")
        if not eq or not tool.strip() or not mode.strip():
            raise PolicyInputError(f"--tool {item!r}: give TOOL=MODE, e.g. send_email=allow")
        doc["tools"][tool.strip()] = mode.strip().lower()
    for item in args.allow or ():
        host, eq, pattern = item.partition("=")
        if not eq or not host.strip() or not pattern.strip():
            raise PolicyInputError(f"--allow {item!r}: give HOST=PATTERN, e.g. web1='systemctl restart nginx'")
        patterns = doc["ssh_allow"].setdefault(host.strip(), [])
        if pattern.strip() not in patterns:
            patterns.append(pattern.strip())
    for item in args.disallow or ():
        host, eq, pattern = item.partition("=")
        patterns = doc["ssh_allow"].get(host.strip(), [])
        if not eq or pattern.strip() not in patterns:
            raise PolicyInputError(f"--disallow {item!r}: no such pattern (zerg approvals policy show lists them)")
        patterns.remove(pattern.strip())
        if not patterns:
            del doc["ssh_allow"][host.strip()]
    if args.builtin is not None:
        doc["builtin_allowlist"] = args.builtin == "on"
    if args.expiry is not None:
        doc["expiry_s"] = args.expiry
    return doc


def cmd_policy_show(args: argparse.Namespace) -> int:
    from zerg import approvals

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            _show(approvals.view(conn, owner_id))
        return 0
    return _run(args, work)


def cmd_policy_set(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from zerg import approvals
    from zerg.approvals.policy import Policy
    from zerg.validation import problems

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn, conn.transaction():
            current = approvals.load_policy(conn, owner_id).model_dump(mode="json", exclude_defaults=True)
            try:
                policy = Policy.model_validate(changed(current, args))
            except ValidationError as exc:
                raise PolicyInputError(f"not changed: {problems(exc.errors(), 'policy')}") from None
            approvals.set_policy(conn, owner_id, policy)
            _show(approvals.view(conn, owner_id))
        return 0
    return _run(args, work)


def cmd_policy_reset(args: argparse.Namespace) -> int:
    from zerg import approvals

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            approvals.reset_policy(conn, owner_id)
            _show(approvals.view(conn, owner_id))
        return 0
    return _run(args, work)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg approvals`` group under the top-level sub-parsers (``policy`` for now; the
    pending approvals of issue 27 join it)."""
    approvals = groups.add_parser("approvals", help="which tool calls run, ask the owner first, or never run"
                                  ).add_subparsers(dest="cmd", required=True)
    policy = approvals.add_parser("policy", help="the owner's approval policy").add_subparsers(dest="policy_cmd",
                                                                                               required=True)
    show = policy.add_parser("show", help="every governed tool's mode, the SSH allowlists, the expiry")
    set_p = policy.add_parser("set", help="change what the options name; the rest stays")
    set_p.add_argument("--tool", action="append", metavar="TOOL=MODE", help="allow, ask or deny a governed tool")
    set_p.add_argument("--allow", action="append", metavar="HOST=PATTERN",
                       help="a command pattern that runs without asking on HOST ('*': every host)")
    set_p.add_argument("--disallow", action="append", metavar="HOST=PATTERN", help="remove a pattern")
    set_p.add_argument("--builtin", choices=("on", "off"), help="the built-in read-only commands (df, free, ...)")
    set_p.add_argument("--expiry", type=int, metavar="SECONDS", help="how long an approval request waits (60-86400)")
    reset = policy.add_parser("reset", help="forget the owner's policy: back to the defaults")
    for parser, func in ((show, cmd_policy_show), (set_p, cmd_policy_set), (reset, cmd_policy_reset)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
