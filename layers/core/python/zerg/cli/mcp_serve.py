"""``zerg mcp serve``: Zerg as an MCP server over stdio, for editors and local agents
(docs/mcp.md, "Zerg as an MCP server").

It acts for the local owner, or ``--owner NAME``, with the tools and resources of
:mod:`zerg.api.mcpserver.server`. Runs that ``ask`` starts execute in this process on the local
engine (as ``zerg run``), or on Step Functions when ``ZERG_STATE_MACHINE_ARN`` is set.

Invariants:
- Standard output is the protocol's alone: the SDK's stdio transport claims it while serving (a
  stray print goes to standard error), and every line of ours goes to standard error. A line that
  is not a JSON-RPC message is answered with a JSON-RPC parse error (the SDK would drop it).
- The client closing standard input ends the server; the steps that run on after an answer (the
  Remember step) are waited for, bounded, as ``zerg run`` waits for them, then the process exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from zerg.api.mcpserver.server import build_server
    from zerg.db import close_pools
    from zerg.local.run import prepare_local_run
    from zerg.migrate import migrate
    from zerg.wiring import get_runtime

    rt = get_runtime()
    with rt.pool.connection() as conn:
        migrate(conn)
        owner_id = args.resolve_owner(conn, args.owner)
    stdout, sys.stdout = sys.stdout, sys.stderr  # our own lines (the sandbox notice) never touch the wire
    try:
        prepare_local_run(rt)
    finally:
        sys.stdout = stdout
    server = build_server(rt, owner_id, "stdio")

    async def serve() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            frames, frames_in = anyio.create_memory_object_stream(0)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(answer_bad_lines, read, frames, write)
                await server.run(frames_in, write, server.create_initialization_options())

    print(f"zerg mcp serve: acting for owner {owner_id} over stdio", file=sys.stderr, flush=True)
    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    finally:
        rt.close()  # the local engine waits (bounded) for the steps after an answer, as zerg run does
        close_pools()  # now, not at interpreter exit (when the pool's own teardown can no longer run)
    return 0


async def answer_bad_lines(read: Any, frames: Any, write: Any) -> None:
    """Hand the server each message the transport read; a line that is not a JSON-RPC message is
    answered with a parse error (id null) instead of being dropped in silence."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    async with frames:
        async for item in read:
            if isinstance(item, Exception):
                said = "; ".join(line.strip() for line in str(item).splitlines()[1:3])[:300]
                code, what = ((types.PARSE_ERROR, "Parse error: not JSON") if "Invalid JSON" in said else
                              (types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC message"))
                error = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code,
                                                                                      message=f"{what} ({said})"))
                await write.send(SessionMessage(error))
            else:
                await frames.send(item)


def add_commands(mcp: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """``zerg mcp serve`` under the ``zerg mcp`` sub-parsers."""
    serve = mcp.add_parser("serve", help="serve Zerg's tools (ask, runs, memory, inbox, schedules) over MCP on "
                           "stdio, for editors and local agents")
    add_owner_option(serve)
    serve.set_defaults(func=cmd_serve, resolve_owner=resolve_owner)
