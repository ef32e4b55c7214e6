"""``zerg agents show|set|reset``: the owner's agent configuration from the command line, through
the same validation as the API (:mod:`zerg.agents.settings`).

Every command acts for the local owner, or ``--owner NAME``. Exit status: 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from zerg.cli.common import run_as_owner

RESET = ("default", "none")  # --model default, --temperature default, ... : back to the deployment's


def _run(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    from zerg.agents.settings import AgentConfigError

    return run_as_owner(args, work, ((AgentConfigError, 2),))


def _show(entry: dict[str, Any]) -> None:
    defaults = entry["defaults"]

    def shown(name: str) -> str:
        value = entry[name]
        text = "model default" if value is None else str(value)
        return text + (" (default)" if value == defaults[name] else "")

    print(f"{entry['agent']}:")
    for name in ("model", "temperature", "max_tokens"):
        print(f"  {name + ':':<15}{shown(name)}")
    allowed = entry["allowed_tools"]
    every = allowed == entry["available_tools"]
    print(f"  {'tools:':<15}{'all: ' if every else ''}{', '.join(allowed) or 'none'}")
    if not every:
        print(f"  {'not allowed:':<15}{', '.join(n for n in entry['available_tools'] if n not in allowed)}")
    instructions = entry["instructions"].strip()
    print(f"  {'instructions:':<15}{'none' if not instructions else ''}")
    for line in instructions.splitlines():
        print(f"    {line}")
    if entry["updated_at"]:
        print(f"  {'changed:':<15}{entry['updated_at']:%Y-%m-%d %H:%M} UTC")


def cmd_agents_show(args: argparse.Namespace) -> int:
    from zerg.agents import settings as agent_settings
    from zerg.tools.catalog import tool_names

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            entries = agent_settings.list_agents(conn, rt.settings, owner_id, tool_names())
        for entry in entries:
            if args.agent in (None, entry["agent"]):
                _show(entry)
        return 0
    return _run(args, work)


def change_values(args: argparse.Namespace) -> dict[str, Any]:
    """The ``zerg agents set`` options as :class:`~zerg.agents.settings.AgentConfigChange` fields
    ("default" for a value: back to the deployment's default)."""
    from zerg.agents import settings as agent_settings
    from zerg.agents.settings import AgentConfigError

    values: dict[str, Any] = {}
    for name, parse, kind in (("model", str, "model id"), ("temperature", float, "number"),
                              ("max_tokens", int, "whole number")):
        text = getattr(args, name)
        if text is None:
            continue
        if text.strip().lower() in RESET:
            values[name] = None
            continue
        try:
            values[name] = parse(text)
        except ValueError:
            raise AgentConfigError(f"--{name.replace('_', '-')} {text!r}: not a {kind} (or default)") from None
    if args.instructions is not None:
        values["instructions"] = None if args.instructions.strip().lower() in RESET else args.instructions
    if args.instructions_file is not None:
        try:
            with open(args.instructions_file, encoding="utf-8") as f:
                values["instructions"] = f.read(agent_settings.INSTRUCTIONS_MAX + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise AgentConfigError(f"--instructions-file {args.instructions_file}: {exc}") from None
    if args.tools is not None:
        values["allowed_tools"] = None if args.tools.strip().lower() in (*RESET, "all") else \
            [n.strip() for n in args.tools.split(",") if n.strip()]
    return values


def cmd_agents_set(args: argparse.Namespace) -> int:
    from zerg.agents import settings as agent_settings
    from zerg.tools.catalog import tool_names

    def work(rt: Any, owner_id: int) -> int:
        change = agent_settings.parse_change(change_values(args))
        with rt.pool.connection() as conn:
            _show(agent_settings.change(conn, rt.settings, owner_id, args.agent, change, tool_names()[args.agent]))
        return 0
    return _run(args, work)


def cmd_agents_reset(args: argparse.Namespace) -> int:
    from zerg.agents import settings as agent_settings
    from zerg.tools.catalog import tool_names

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            _show(agent_settings.reset(conn, rt.settings, owner_id, args.agent, tool_names()[args.agent]))
        return 0
    return _run(args, work)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg agents`` group under the top-level sub-parsers."""
    from zerg.agents.configs import AGENTS

    agents = groups.add_parser("agents", help="the owner's supervisor and worker configuration"
                               ).add_subparsers(dest="cmd", required=True)
    show = agents.add_parser("show", help="model, temperature, max tokens, tools and instructions of each agent")
    show.add_argument("agent", nargs="?", choices=AGENTS)
    set_p = agents.add_parser("set", help="change the options given; the others stay ('default' resets one)")
    set_p.add_argument("agent", choices=AGENTS)
    set_p.add_argument("--model", metavar="ID", help="model id, or default")
    set_p.add_argument("--temperature", metavar="T", help="0 to 2, or default")
    set_p.add_argument("--max-tokens", dest="max_tokens", metavar="N", help="1 to 100000, or default")
    what = set_p.add_mutually_exclusive_group()
    what.add_argument("--instructions", metavar="TEXT", help="standing instructions (at most 4000 characters), or none")
    what.add_argument("--instructions-file", metavar="PATH", help="read the standing instructions from a file")
    set_p.add_argument("--tools", metavar="A,B,...", help="the allowed tools, comma-separated, or all")
    reset = agents.add_parser("reset", help="every option of the agent back to the deployment's defaults")
    reset.add_argument("agent", choices=AGENTS)
    for parser, func in ((show, cmd_agents_show), (set_p, cmd_agents_set), (reset, cmd_agents_reset)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
