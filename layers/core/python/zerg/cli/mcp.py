"""``zerg mcp ...``: Model Context Protocol both ways (issue 30). ``zerg mcp servers add|list|refresh|rm``:
the owner's MCP servers, whose tools workers get as ``mcp__<server>__<tool>`` (:mod:`zerg.mcp_servers`),
through the same validation as the API. (``zerg mcp serve``, Zerg as an MCP server, joins this group.)

A secret is read from a file or from the environment, never from the command line (where ``ps`` and the
shell's history would show it), sealed for the owner and never printed. Every command acts for the local
owner, or ``--owner NAME``. Exit status: 0 done, 1 no such server, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zerg.cli.common import fail, run_as_owner


class McpInputError(ValueError):
    """An option the registration cannot take (the message says which and why)."""


def _run(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    from zerg.mcp_servers import SecretWouldBeLost, ServerNotFound

    return run_as_owner(args, work, ((McpInputError, 2), (SecretWouldBeLost, 2), (ServerNotFound, lambda exc: fail(
        f"no MCP server {exc} (zerg mcp servers list)", 1))))


def _secret(path: str | None, env: str | None, what: str) -> str | None:
    if path:
        try:
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise McpInputError(f"cannot read the {what} file: {exc.strerror}") from None
    elif env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise McpInputError(f"the environment variable {env} holding the {what} is not set")
    else:
        return None
    if not value:
        raise McpInputError(f"the {what} is empty")
    return value


def _show(server: Any) -> None:
    where = server.url if server.transport == "http" else f"$ {server.command}"
    auth = "" if server.auth == "none" else f"\t{server.auth}" + (" (sealed)")
    listed = (f"{len(server.tools or [])} tool(s) listed {server.listed_at:%Y-%m-%d %H:%M} UTC" if server.listed_at
              else "not listed")
    print(f"{server.name}\t{server.transport}\t{where}{auth}\t{listed}")
    for tool in server.tools or []:
        print(f"  {tool['exposed']}{' (read-only)' if tool['read_only'] else ''}")
    if server.listing_note:
        print(f"  note: {server.listing_note}")


def cmd_add(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from zerg import mcp_servers
    from zerg.validation import problems

    def work(rt: Any, owner_id: int) -> int:
        body: dict[str, Any] = {"url": args.url, "command": args.command, "allow_private": args.allow_private}
        if args.no_auth:
            body["auth"] = "none"
        token = _secret(args.token_file, args.token_env, "bearer token")
        if token:
            body["bearer_token"] = token
        client_secret = _secret(args.client_secret_file, args.client_secret_env, "OAuth client secret")
        if args.client_id or client_secret:
            if not (args.client_id and client_secret):
                raise McpInputError("OAuth needs --client-id and --client-secret-file (or --client-secret-env)")
            body["oauth"] = {"client_id": args.client_id, "client_secret": client_secret, "scope": args.scope,
                             "issuer": args.issuer}
        try:
            mcp_servers.check_name(args.name)
            spec = mcp_servers.ServerSpec.model_validate(body)
        except ValueError as exc:
            text = problems(exc.errors(), "server") if isinstance(exc, ValidationError) else str(exc)
            raise McpInputError(text) from None
        with rt.pool.connection() as conn:
            mcp_servers.put_server(conn, rt.sealer, owner_id, args.name, spec)
        _show(mcp_servers.refresh(rt.pool.connection, rt.settings, rt.sealer, owner_id, args.name))
        return 0

    return _run(args, work)


def cmd_list(args: argparse.Namespace) -> int:
    from zerg import mcp_servers

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            servers = mcp_servers.list_servers(conn, owner_id)
        if not servers:
            print("no MCP servers (zerg mcp servers add NAME --url URL | --command 'CMD')")
        for server in servers:
            _show(server)
        return 0

    return _run(args, work)


def cmd_refresh(args: argparse.Namespace) -> int:
    from zerg import mcp_servers

    def work(rt: Any, owner_id: int) -> int:
        server = mcp_servers.refresh(rt.pool.connection, rt.settings, rt.sealer, owner_id, args.name)
        _show(server)
        return 0 if server.listing_note is None or server.tools else 1

    return _run(args, work)


def cmd_rm(args: argparse.Namespace) -> int:
    from zerg import mcp_servers

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            mcp_servers.remove_server(conn, owner_id, args.name)
        print(f"removed MCP server {args.name}")
        return 0

    return _run(args, work)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> argparse._SubParsersAction:
    """The ``zerg mcp`` group; returns its sub-parsers (``zerg mcp serve`` adds itself there)."""
    mcp = groups.add_parser("mcp", help="Model Context Protocol: the owner's MCP servers as worker tools, and "
                            "Zerg as an MCP server").add_subparsers(dest="mcp_cmd", required=True)
    servers = mcp.add_parser("servers", help="the owner's MCP servers (their tools: mcp__<server>__<tool>)"
                             ).add_subparsers(dest="cmd", required=True)
    add = servers.add_parser("add", help="register (or replace) an MCP server and list its tools")
    add.add_argument("name", help="1-24 of a-z, 0-9 and '-': tools are named mcp__<name>__<tool>")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a remote server's streamable HTTP endpoint")
    where.add_argument("--command", help="a local server: a shell command run over stdio in the sandbox")
    token = add.add_mutually_exclusive_group()
    token.add_argument("--token-file", metavar="PATH", help="a file holding the bearer token (sealed, never echoed)")
    token.add_argument("--token-env", metavar="VAR", help="an environment variable holding the bearer token")
    token.add_argument("--no-auth", action="store_true",
                       help="no secret: drop a stored one (without a secret option, replacing a server keeps its "
                            "stored secret when the URL is the same)")
    add.add_argument("--client-id", help="OAuth client credentials: the client id")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument("--client-secret-file", metavar="PATH", help="OAuth: a file holding the client secret")
    secret.add_argument("--client-secret-env", metavar="VAR", help="OAuth: an environment variable holding it")
    add.add_argument("--scope", help="OAuth: the scopes to ask for")
    add.add_argument("--issuer", help="OAuth: the authorization server that issued the credentials")
    add.add_argument("--allow-private", action="store_true",
                     help="the URL's host may be a private or loopback address (that host only)")
    lst = servers.add_parser("list", help="the owner's MCP servers and their cached tools")
    refresh = servers.add_parser("refresh", help="list a server's tools again")
    refresh.add_argument("name")
    rm = servers.add_parser("rm", help="remove an MCP server and its sealed secret")
    rm.add_argument("name")
    for parser, func in ((add, cmd_add), (lst, cmd_list), (refresh, cmd_refresh), (rm, cmd_rm)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
    return mcp
