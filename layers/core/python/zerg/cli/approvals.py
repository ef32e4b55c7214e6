"""``zerg approvals policy show|set|reset``: the owner's approval policy from the command line,
through the same validation as the API (:mod:`zerg.approvals`, docs/approvals.md); and
``zerg approvals list|approve ID|deny ID``: the owner's approvals, answered through the same core
answers as the API (:mod:`zerg.approvals.wait`: owner-scoped, once).

``set`` changes only what its options name and keeps the rest. Every command acts for the local
owner, or ``--owner NAME``. Exit status: 0 done, 2 bad input (said precisely, nothing changed);
``approve``/``deny``: 1 when the approval was answered already, expired or its run ended (said which),
2 when the owner has no such approval.
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
        print(f"  {tool + ':':<17}{mode}{' (default)' if mode == DEFAULT_MODES.get(tool) else ''}")
    print(f"  {'built-in:':<17}{'on' if view['builtin_allowlist'] else 'off'}: "
          f"{', '.join(view['builtin_commands'])}")
    for host, patterns in sorted(view["ssh_allow"].items()):
        print(f"  ssh {('every host' if host == '*' else host) + ':'}")
        for pattern in patterns:
            print(f"    {pattern}")
    print(f"  {'expiry:':<17}{view['expiry_s']} s")
    print(f"  {'asks per run:':<17}at most {view['max_asks_per_run']}")
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
    if args.max_asks is not None:
        doc["max_asks_per_run"] = args.max_asks
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


class NoSuchApproval(LookupError):
    """The owner has no approval of that id."""


class NotAnswered(RuntimeError):
    """The approval was answered already, expired or its run ended: this answer decided nothing."""


def _show_approval(item: dict[str, Any]) -> None:
    call, run = item["call"], item["run"]
    code = f" code {item['code']}" if item["code"] else ""
    print(f"approval {item['id']} [{item['status']}]{code}  run {run['id']} ({run['trigger']}): {run['task']}")
    if item["kind"] == "directive":  # Zerg's own words for the change, and what approving it did
        print(f"  directive: {item['summary']}")
        print(f"  expires: {item['expires_at']}")
        if item["outcome"] is not None:
            print(f"  done: {item['outcome']}")
        return
    what = {k: call[k] for k in ("host", "command", "url", "method", "recipient") if call[k] is not None}
    detail = "  ".join(f"{k}={v!r}" for k, v in what.items()) if what else repr(call["arguments"])
    print(f"  call: {call['tool']}  {detail}")
    print(f"  expires: {item['expires_at'] or 'when its wait starts'}")
    if item["asked_because"]:
        print(f"  asked because: {item['asked_because']}")
    # the model's words: fenced so they read as data, never as an instruction
    print("  model's stated reason (data, not an instruction):")
    for line in (item["reason"]["text"] or "(none)").splitlines() or [""]:
        print(f"    | {line}")


def cmd_list(args: argparse.Namespace) -> int:
    from zerg.approvals import wait

    def work(rt: Any, owner_id: int) -> int:
        items = wait.listing(rt, owner_id)
        if not items:
            print("no approvals")
        for item in items:
            _show_approval(item)
        return 0
    return _run_answers(args, work)


def _answer(args: argparse.Namespace, decision: str) -> int:
    from zerg.approvals import wait

    def work(rt: Any, owner_id: int) -> int:
        try:
            answer = (wait.approve if decision == "approve" else wait.deny)(rt, owner_id, args.id)
        except wait.ApprovalNotFound:
            raise NoSuchApproval(f"approval {args.id} not found (zerg approvals list shows yours)") from None
        if not answer.decided:
            raise NotAnswered(answer.message)
        print(answer.message)
        return 0
    return _run_answers(args, work)


def cmd_approve(args: argparse.Namespace) -> int:
    return _answer(args, "approve")


def cmd_deny(args: argparse.Namespace) -> int:
    return _answer(args, "deny")


def _run_answers(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    return run_as_owner(args, work, ((NoSuchApproval, 2), (NotAnswered, 1)))


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg approvals`` group under the top-level sub-parsers: ``list``, ``approve ID``,
    ``deny ID`` and ``policy``."""
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
    set_p.add_argument("--max-asks", type=int, metavar="N", help="approvals one run may ask for (1-50)")
    reset = policy.add_parser("reset", help="forget the owner's policy: back to the defaults")
    for parser, func in ((show, cmd_policy_show), (set_p, cmd_policy_set), (reset, cmd_policy_reset)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
    listing = approvals.add_parser("list", help="the owner's pending approvals, then the recent answered ones")
    approve = approvals.add_parser("approve", help="approve a pending approval: its call runs, once")
    deny = approvals.add_parser("deny", help="deny a pending approval: its call never runs")
    for parser in (approve, deny):
        parser.add_argument("id", type=int, metavar="ID", help="the approval's id (zerg approvals list)")
    for parser, func in ((listing, cmd_list), (approve, cmd_approve), (deny, cmd_deny)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
