"""MCP client overhead (issue 30 item 1): a tool of an owner's MCP server called the way a worker calls it,
against the same work done directly in this process.

- stdio in the sandbox: ``mcp-server-time`` (PyPI) ``get_current_time``. One call = the owner's row read and
  its listing, a fresh container_exec sandbox, the server's start, initialize, tools/list (the call is made
  only while the tool is listed as cached), tools/call, the shutdown and the teardown. Direct: the
  server's own ``TimeServer().get_current_time`` in this process.
- streamable HTTP: the SDK-built server of the tests on loopback (stateless, JSON responses), ``word_count``.
  One call = the same steps over HTTP (each request's destination checked). Direct: ``len(text.split())``.
- for scale: ``python -c "import mcp_server_time.server"`` on the host, outside any sandbox (the server's
  own start, most of a stdio call).
- listing cost per server: uncached (connect and list: ``refresh``) and cached (the worker's tool set built
  from the stored listing: what a worker pays at its start).

Median of 15 each (smoke: 2). Run: .venv/bin/python -m bench.mcp
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._common import bench_database, environ, fmt, mcp_stdio_paths, measure, script


def main(smoke: bool = False) -> None:
    from mcp_server_time.server import TimeServer
    from zerg import mcp_servers
    from zerg.mcp_servers import ServerSpec
    from zerg.owners import create_owner
    from zerg.sandbox import detect
    from zerg.tools.mcp_tools import owner_tools
    from zerg.wiring import get_runtime

    from tests.support.mcp.http_server import HttpMcpServer

    repeat = 2 if smoke else 15
    paths = mcp_stdio_paths()  # an installation the sandbox's uid can read
    with (
        contextlib.closing(HttpMcpServer()) as http,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=str(Path(tmp) / "data"),
                ZERG_MCP_STDIO_PATHS=paths),
    ):
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench").owner_id
            mcp_servers.put_server(conn, rt.sealer, owner, "time",
                                   ServerSpec(command="mcp-server-time --local-timezone UTC"))
            mcp_servers.put_server(conn, rt.sealer, owner, "notes", ServerSpec(url=http.url, allow_private=True))
        print(f"sandbox level: {detect.level(rt.settings).describe()}")

        def refresh(name: str):
            return lambda: mcp_servers.refresh(rt.pool.connection, rt.settings, rt.sealer, owner, name)

        refresh("time")()  # warm: the sandbox probe, the imports
        refresh("notes")()
        listed = {name: _tool(rt, owner, name, tool) for name, tool in (("time", "get_current_time"),
                                                                          ("notes", "word_count"))}

        def call(server: str, arguments: dict):
            def run() -> None:
                result = mcp_servers.call_tool(rt.pool.connection, rt.settings, rt.sealer, owner, server,
                                               listed[server], arguments, timeout_s=60)
                assert not result.is_error, result
            return run

        text = "the quick brown fox jumps over the lazy dog"
        time_server = TimeServer()
        rows = [
            ("stdio (sandbox): mcp-server-time get_current_time", call("time", {"timezone": "Europe/Paris"}),
             lambda: time_server.get_current_time("Europe/Paris")),
            ("streamable HTTP (loopback): word_count", call("notes", {"text": text}), lambda: len(text.split())),
        ]
        print(f"== MCP tool call vs the same call done directly, median of {repeat} ==")
        for label, through, direct in rows:
            via, bare = measure(through, repeat), measure(direct, max(repeat, 200))
            print(fmt(label, via))
            print(fmt("  the same call done directly", bare))
            print(f"  {'overhead per call':<42} p50 {via['p50_ms'] - bare['p50_ms']:8.1f} ms")
        start = measure(lambda: subprocess.run([sys.executable, "-c", "import mcp_server_time.server"], check=True),
                        repeat)
        print(fmt("  for scale: mcp-server-time's own import, on the host", start))
        print(f"== listing cost per server, median of {repeat} ==")
        for name, label in (("time", "stdio (sandbox), 2 tools"), ("notes", "streamable HTTP, 4 tools")):
            print(fmt(f"uncached (connect + tools/list): {label}", measure(refresh(name), repeat)))
        print(fmt("cached: a worker's MCP tool set (2 servers)", measure(lambda: owner_tools(rt, owner), repeat * 10)))


def _tool(rt, owner: int, server: str, name: str) -> dict:
    from zerg import mcp_servers

    with rt.pool.connection() as conn:
        view = mcp_servers.get_server(conn, owner, server)
    if not view.tools:
        raise RuntimeError(f"the server {server} could not be listed: {view.listing_note}")
    return next(t for t in view.tools if t["name"] == name)


if __name__ == "__main__":
    script(main)
