"""Zerg as an MCP server (issue 30): what one tool call costs over MCP against the same read over the
REST API, per call, p50: over ``POST /mcp`` (the official SDK's client, stateless streamable HTTP on
the local server) and over stdio (``zerg mcp serve`` as a process, the SDK's stdio client), beside
the service call itself in-process (the floor both share).

Each case reads the same rows three ways: ``run_status`` = ``GET /api/jarvis/runs/{id}``,
``memory_read`` = ``GET /api/jarvis/memory/file?path=...``, ``list_runs`` = ``GET /api/jarvis/runs``.
Every way is warmed first (the first call builds what Powertools and the SDK cache), then measured
call after call on one connection (HTTP keep-alive; one MCP session).

Run: .venv/bin/python -m bench.mcp_server   (smoke: main(smoke=True), fewer calls, same code paths)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from bench._common import bench_database, environ, fmt, measure

WARM = 5


def _stats(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {"p50_ms": statistics.median(samples), "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "mean_ms": statistics.fmean(samples), "n": len(samples)}


async def _timed_calls(session, cases, repeat: int, rest) -> dict[str, tuple[dict, dict, float]]:
    """Per case: (the MCP call's stats, the REST call's stats, the median of their paired
    differences), the two alternated call by call so a busy machine weighs on both alike."""
    out = {}
    for name, args, path in cases:
        for _ in range(WARM):
            await session.call_tool(name, args)
            rest(path)
        over, back, diffs = [], [], []
        for _ in range(repeat):
            start = time.perf_counter()
            rest(path)
            middle = time.perf_counter()
            result = await session.call_tool(name, args)
            end = time.perf_counter()
            if result.is_error:
                raise RuntimeError(f"{name}: {result.content[0].text}")
            back.append((middle - start) * 1000)
            over.append((end - middle) * 1000)
            diffs.append(over[-1] - back[-1])
        out[name] = (_stats(over), _stats(back), statistics.median(diffs))
    return out


def over_http(url: str, token: str, cases, repeat: int, rest) -> dict[str, tuple[dict, dict, float]]:
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await _timed_calls(session, cases, repeat, rest)

    return anyio.run(main)


def over_stdio(owner: str, cases, repeat: int, rest) -> dict[str, tuple[dict, dict, float]]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "zerg.cli", "mcp", "serve", "--owner", owner],
                                   env=dict(os.environ))

    async def main():
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await _timed_calls(session, cases, repeat, rest)

    return anyio.run(main)


def main(smoke: bool = False) -> None:
    import httpx

    from zerg.api.mcpserver import tools
    from zerg.local.server import make_server
    from zerg.memory import filesystem as fs
    from zerg.owners import create_owner
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    repeat = 20 if smoke else 300
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url, \
            environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp, ZERG_EMBEDDINGS="off"):
        rt = get_runtime()
        with rt.pool.connection() as conn:
            owner = create_owner(conn, "bench-mcp")
            run_id = runs.start_run(conn, owner.owner_id, "check the disk").run_id
            for i in range(19):
                runs.start_run(conn, owner.owner_id, f"earlier task {i}")
        fs.write(rt, owner.owner_id, "notes/servers.md", "# Servers\n" + "cube: 4 TB, backups nightly.\n" * 60,
                 writer="user")
        cases = [("run_status", {"run_id": run_id}, f"/api/jarvis/runs/{run_id}"),
                 ("memory_read", {"path": "notes/servers.md"}, "/api/jarvis/memory/file?path=notes%2Fservers.md"),
                 ("list_runs", {"limit": 20}, "/api/jarvis/runs?limit=20")]
        server = make_server("127.0.0.1", 0).start()
        try:
            client = httpx.Client(base_url=server.url, timeout=30)
            token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
            client.headers["Authorization"] = f"Bearer {token}"
            direct = {}
            for name, args, _ in cases:
                parsed = tools.parse(tools.BY_NAME[name], args)
                direct[name] = measure(lambda: tools.CALLS[name](rt, owner.owner_id, parsed), repeat)  # noqa: B023

            def rest(path: str) -> None:
                client.get(path).raise_for_status()

            http = over_http(f"{server.url}/mcp", token, cases, repeat, rest)
            stdio = over_stdio("bench-mcp", cases, repeat, rest)
        finally:
            server.stop()

    print("== MCP server: one tool call against the same REST read, per call, alternated ==")
    for name, _, path in cases:
        print(f"-- {name} (REST: GET {path.split('?')[0]})")
        print(fmt(f"{name}: the service call in-process", direct[name]))
        print(fmt(f"{name}: POST /mcp tools/call", http[name][0]))
        print(fmt(f"{name}: REST GET, alternated with it", http[name][1]))
        print(fmt(f"{name}: stdio tools/call (zerg mcp serve)", stdio[name][0]))
        print(fmt(f"{name}: REST GET, alternated with that", stdio[name][1]))
        print(f"{name}: MCP overhead over REST, median of pairs: POST /mcp {http[name][2]:+.2f} ms, "
              f"stdio {stdio[name][2]:+.2f} ms")
    over = {way: statistics.median(got[n][2] for n, _, _ in cases) for way, got in (("POST /mcp", http),
                                                                                   ("stdio", stdio))}
    print(f"MCP overhead over the REST call (median of the cases): POST /mcp {over['POST /mcp']:+.2f} ms, "
          f"stdio {over['stdio']:+.2f} ms")


if __name__ == "__main__":
    main()
