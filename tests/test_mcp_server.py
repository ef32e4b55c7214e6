"""Zerg as an MCP server (issue 30, docs/mcp.md "Zerg as an MCP server"), driven by the official
``mcp`` client SDK: over stdio (``zerg mcp serve`` spawned as a process, as an editor would) and
over ``POST /mcp`` on a loopback ``zerg serve``, with the scripted model answering the runs.

What it shows: the tools are listed; ``ask`` returns the run's answer with progress notifications
on the way; a worker's result is a resource; another owner's token sees nothing of the first
(the same "not found" as for an id that does not exist); bad frames, unknown tools and bad
arguments get clear JSON-RPC or tool errors, never a 5xx or a trace; a flood of calls is refused.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import httpx
import pytest

from tests.support.api import login
from tests.support.scripts import role_of, run_script
from tests.support.waiting import wait_for

TOOLS = {"ask", "run_status", "list_runs", "memory_search", "memory_read", "memory_write", "inbox_list", "inbox_ack",
         "list_schedules"}
pytestmark = pytest.mark.e2e  # runs on the local engine: in zerg serve, or in the zerg mcp serve process

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def stdio_params(*args: str):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "zerg.cli", "mcp", "serve", *args],
                                 env=dict(os.environ))


def over_stdio(work, *args: str):
    """``work(session)`` on a session with ``zerg mcp serve ARGS`` (a process of its own)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    async def main():
        with open(os.devnull, "w") as quiet:  # the server's own lines (stderr): not the test's output
            async with stdio_client(stdio_params(*args), errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)

    from zerg.mcp_servers.client import in_own_loop

    return in_own_loop(main)  # a browser test before this one may leave a loop running here


def over_http(base: str, token: str, work):
    """``work(session)`` on a session with ``POST /mcp`` of the ``zerg serve`` at ``base``."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            async with streamable_http_client(f"{base}/mcp", http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)

    from zerg.mcp_servers.client import in_own_loop

    return in_own_loop(main)  # a browser test before this one may leave a loop running here


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def asked(progress: list[str], task: str = "is my disk ok?", **extra):
    """A ``work`` that lists the tools, asks ``task`` (progress messages into ``progress``) and
    returns (tool names, the ask's result)."""
    async def work(session):
        names = {t.name for t in (await session.list_tools()).tools}

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        result = await session.call_tool("ask", {"task": task, **extra}, progress_callback=on_progress)
        return names, result

    return work


# ---- over stdio: zerg mcp serve ----

def test_zerg_mcp_serve_answers_ask_over_stdio_with_progress_notifications(runtime_env, llm, alice):
    runtime_env()
    llm.respond_with(run_script(["Check disk"], answer=lambda r: "Disk is fine: 40% used."))
    progress: list[str] = []
    names, result = over_stdio(asked(progress), "--owner", alice.name)

    assert names == TOOLS
    out = structured(result)
    assert (out["status"], out["answer"]) == ("success", "Disk is fine: 40% used.")
    assert json.loads(result.content[0].text)["answer"] == "Disk is fine: 40% used."
    assert any(line.startswith(f"> run {out['run_id']} started") for line in progress), progress
    assert any("worker #" in line and "spawned" in line for line in progress), progress
    from zerg.runs import store as runs
    from zerg.wiring import get_runtime

    with get_runtime().pool.connection() as conn:  # the run is alice's, started like any API run
        run = runs.get_run(conn, alice.owner_id, out["run_id"])
    assert (run["owner_id"], run["task"], run["trigger"]) == (alice.owner_id, "is my disk ok?", "api")


def test_zerg_mcp_serve_reads_and_writes_memory_as_the_owner_and_refuses_bad_input(runtime_env, alice):
    runtime_env()

    async def work(session):
        wrote = await session.call_tool("memory_write",
                                        {"path": "notes/servers.md", "content": "# Servers\ncube: 4 TB"})
        read = await session.call_tool("memory_read", {"path": "notes/servers.md"})
        missing = await session.call_tool("memory_read", {"path": "notes/none.md"})
        bad_path = await session.call_tool("memory_read", {"path": "../etc/passwd"})
        bad_args = await session.call_tool("list_runs", {"limit": 500, "colour": "red"})
        try:
            await session.call_tool("delete_everything", {})
            unknown = None
        except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
            unknown = exc
        return wrote, read, missing, bad_path, bad_args, unknown

    wrote, read, missing, bad_path, bad_args, unknown = over_stdio(work, "--owner", alice.name)
    assert structured(wrote)["created"] is True
    file = structured(read)
    assert (file["content"], file["writer"]) == ("# Servers\ncube: 4 TB", "user")  # the owner's own writer
    assert missing.is_error and missing.content[0].text == "memory file 'notes/none.md' not found"
    assert bad_path.is_error and "path" in bad_path.content[0].text
    assert bad_args.is_error
    text = bad_args.content[0].text
    assert text.startswith("bad arguments for list_runs:") and "limit" in text and "colour" in text
    assert "Traceback" not in text
    from mcp.shared.exceptions import MCPError

    assert isinstance(unknown, MCPError) and unknown.error.code == -32602
    assert "unknown tool 'delete_everything'" in unknown.error.message and "ask" in unknown.error.message


def test_zerg_mcp_serve_keeps_stdout_for_the_protocol_and_exits_when_stdin_closes(runtime_env, alice):
    import subprocess

    runtime_env()
    frames = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                  "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
              {"jsonrpc": "2.0", "method": "notifications/initialized"},
              {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
              {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}]
    done = subprocess.run([sys.executable, "-m", "zerg.cli", "mcp", "serve", "--owner", alice.name],
                          input="".join(json.dumps(f) + "\n" for f in frames) + "{not json\n[1, 2]\n",
                          capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # every line of stdout is a frame
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["serverInfo"]["name"] == "zerg"
    listed = {t["name"]: t for t in by_id[2]["result"]["tools"]}
    assert set(listed) == TOOLS
    assert listed["run_status"]["annotations"]["readOnlyHint"] is True
    assert listed["memory_write"]["annotations"]["destructiveHint"] is True
    assert listed["ask"]["inputSchema"]["required"] == ["task"]
    assert by_id[3]["error"]["code"] == -32602 and "unknown tool 'nope'" in by_id[3]["error"]["message"]
    unanswerable = [a["error"] for a in answers if a.get("id") is None]  # the lines that are not frames
    assert [e["code"] for e in unanswerable] == [-32700, -32600]
    assert unanswerable[0]["message"].startswith("Parse error: not JSON (Invalid JSON: key must be a string")
    assert f"acting for owner {alice.owner_id} over stdio" in done.stderr and "Traceback" not in done.stderr


# ---- over HTTP: POST /mcp on zerg serve ----

def test_post_mcp_answers_ask_with_progress_and_serves_the_workers_result(api_server, llm, alice):
    base, _ = api_server
    llm.respond_with(run_script(["Check disk"], answer=lambda r: "Disk is fine."))
    progress: list[str] = []

    async def work(session):
        names, result = await asked(progress)(session)
        run_id = result.structured_content["run_id"]
        status = await session.call_tool("run_status", {"run_id": run_id})
        job_id = status.structured_content["workers"][0]["job_id"]
        templates = await session.list_resource_templates()
        resource = await session.read_resource(f"zerg://workers/{job_id}/result")
        return names, result, status, templates, resource

    names, result, status, templates, resource = over_http(base, login(alice), work)
    assert names == TOOLS
    assert (structured(result)["status"], structured(result)["answer"]) == ("success", "Disk is fine.")
    assert any("started" in line for line in progress) and any("spawned" in line for line in progress), progress
    assert structured(status)["result"] == "Disk is fine."
    assert [t.uri_template for t in templates.resource_templates] == ["zerg://workers/{id}/result"]
    assert resource.contents[0].text == "Finished: Check disk"  # the scripted worker's report


def test_ask_that_outlasts_its_wait_returns_the_run_id_and_how_to_follow_it(api_server, llm, alice):
    base, _ = api_server
    release = threading.Event()
    script = run_script(["Check disk"], answer=lambda r: "Done at last.")

    def respond(request):
        if role_of(request) == "supervisor" and not release.is_set():
            release.wait(60)  # the run is under way until the test lets it go
        return script(request)

    llm.respond_with(respond)
    token = login(alice)

    async def first(session):
        return await session.call_tool("ask", {"task": "slow one", "wait_seconds": 0})

    out = structured(over_http(base, token, first))
    assert out["status"] == "running" and out["answer"] is None
    assert out["hint"].startswith("still running after") and f"run_status with run_id {out['run_id']}" in out["hint"]
    release.set()

    async def follow(session):
        return (await session.call_tool("run_status", {"run_id": out["run_id"]})).structured_content

    doc = wait_for(lambda: (d := over_http(base, token, follow))["status"] == "success" and d, "the run to finish")
    assert doc["result"] == "Done at last."


def test_another_owners_token_sees_nothing_of_the_first(api_server, llm, alice, bob, pool):
    base, _ = api_server
    llm.respond_with(run_script(["Check disk"], answer=lambda r: "alice's secret answer"))

    async def alices(session):
        ran = (await session.call_tool("ask", {"task": "alice's question"})).structured_content
        await session.call_tool("memory_write", {"path": "notes/alice.md", "content": "alice's note"})
        status = (await session.call_tool("run_status", {"run_id": ran["run_id"]})).structured_content
        return ran["run_id"], status["workers"][0]["job_id"]

    run_id, job_id = over_http(base, login(alice), alices)
    from zerg.alerts import inbox
    from zerg.alerts.severity import Assessment

    with pool.connection() as conn:  # alice has an inbox item too
        inbox.add(conn, alice.owner_id, run_id, None, Assessment("info", "alice's headline", "d", "model"))
    unused = run_id + 10_000

    async def bobs(session):
        texts = {}
        for name, args in (("run_status", {"run_id": run_id}), ("run_status", {"run_id": unused}),
                           ("inbox_ack", {"run_id": run_id}), ("inbox_ack", {"run_id": unused}),
                           ("memory_read", {"path": "notes/alice.md"}), ("memory_read", {"path": "notes/nobody.md"})):
            result = await session.call_tool(name, args)
            assert result.is_error, (name, args)
            texts[name, json.dumps(args)] = result.content[0].text
        lists = [(await session.call_tool(n, {})).structured_content for n in ("list_runs", "inbox_list")]
        found = (await session.call_tool("memory_search", {"query": "alice's note"})).structured_content
        errors = []
        for job in (job_id, job_id + 10_000):
            try:
                await session.read_resource(f"zerg://workers/{job}/result")
            except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
                errors.append(exc.error.message)
        return texts, lists, found, errors

    texts, lists, found, errors = over_http(base, login(bob), bobs)
    assert texts["run_status", json.dumps({"run_id": run_id})] == f"run {run_id} not found"
    assert texts["run_status", json.dumps({"run_id": unused})] == f"run {unused} not found"  # worded alike
    assert texts["inbox_ack", json.dumps({"run_id": run_id})] == f"inbox item of run {run_id} not found"
    assert texts["memory_read", json.dumps({"path": "notes/alice.md"})] == "memory file 'notes/alice.md' not found"
    assert lists == [{"runs": [], "next_before_id": None}, {"items": []}]
    assert found["hits"] == []
    assert errors == [f"worker {job_id} not found", f"worker {job_id + 10_000} not found"]
    everything = json.dumps([list(texts.values()), lists, found, errors])
    assert "alice's secret answer" not in everything and "alice's note" not in everything.replace(
        "notes/alice.md", "")


def test_bad_frames_get_a_clear_jsonrpc_error_never_a_server_error(api_server, alice):
    base, _ = api_server
    token = login(alice)
    auth = {"Authorization": f"Bearer {token}"}
    client = httpx.Client(base_url=base, timeout=30)

    def post(body: bytes, **headers: str) -> httpx.Response:
        return client.post("/mcp", content=body, headers={**MCP_HEADERS, **auth, **headers})

    def sse_message(response: httpx.Response) -> dict:
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])

    not_json = post(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700
    not_utf8 = post(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}')
    assert not_utf8.status_code == 400 and not_utf8.json()["error"]["code"] in (-32700, -32602)
    not_rpc = post(json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}).encode())
    assert not_rpc.status_code == 400 and not_rpc.json()["jsonrpc"] == "2.0" and "error" in not_rpc.json()
    a_list = post(b"[1, 2, 3]")
    assert a_list.status_code == 400 and a_list.json()["error"] == {
        "code": -32600, "message": "Invalid Request: the message: [1, 2, 3] is not of type 'object'"}
    own_key = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "colour": "red"}).encode())
    assert own_key.status_code == 400 and "colour" in own_key.json()["error"]["message"]
    long_method = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x" * 201}).encode())
    assert long_method.status_code == 400 and long_method.json()["error"]["message"].startswith(
        "Invalid Request: method:")
    a_response = post(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode())
    assert a_response.status_code == 400 and a_response.json()["error"]["code"] == -32600
    unknown_method = post(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/destroy"}).encode())
    assert unknown_method.status_code == 200
    assert sse_message(unknown_method) == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32601, "message": "Method not found", "data": "tools/destroy"}}
    bad_params = post(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}}).encode())
    assert bad_params.status_code == 200 and sse_message(bad_params)["error"]["code"] == -32602
    bad_args = post(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                "params": {"name": "run_status", "arguments": {"run_id": "x"}}}).encode())
    result = sse_message(bad_args)["result"]
    assert result["isError"] is True and result["content"][0]["text"].startswith("bad arguments for run_status: run_id")
    assert post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()).status_code == 202
    wrong_type = post(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', **{"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415 and "error" in wrong_type.json()
    html_only = post(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', Accept="text/html")
    assert html_only.status_code == 406 and "error" in html_only.json()
    no_accept = client.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                            headers={"Content-Type": "application/json", **auth})
    assert no_accept.status_code == 200 and sse_message(no_accept) == {"jsonrpc": "2.0", "id": 1, "result": {}}

    anonymous = client.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', headers=MCP_HEADERS)
    assert anonymous.status_code == 401 and "Authorization: Bearer" in anonymous.json()["message"]
    forged = client.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                         headers={**MCP_HEADERS, "Authorization": "Bearer not-a-token"})
    assert forged.status_code == 401 and forged.json()["error"] == "unauthorized"
    cookie_only = client.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                              headers={**MCP_HEADERS, "Cookie": f"zerg_session={token}",
                                       "Sec-Fetch-Site": "same-origin", "X-Zerg-Client": "web"})
    assert cookie_only.status_code == 401
    got = client.get("/mcp", headers=auth)
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    for response in (not_json, not_rpc, a_list, unknown_method, bad_args, wrong_type, html_only, anonymous):
        assert "Traceback" not in response.text


def test_a_flood_of_calls_is_refused_while_the_owners_slots_are_taken(api_server, llm, alice, pool, monkeypatch):
    from zerg.api.mcpserver import server as mcp_server

    monkeypatch.setattr(mcp_server, "CALL_SLOTS", 2)  # the cap, smaller: two asks in flight fill it
    base, _ = api_server
    release = threading.Event()
    script = run_script(["Check disk"], answer=lambda r: "fine")

    def respond(request):
        if role_of(request) == "supervisor" and not release.is_set():
            release.wait(60)
        return script(request)

    llm.respond_with(respond)
    token = login(alice)
    answers: list = []

    def ask_in_thread():
        async def work(session):
            return await session.call_tool("ask", {"task": "hold a slot", "wait_seconds": 20})
        answers.append(over_http(base, token, work))

    holders = [threading.Thread(target=ask_in_thread) for _ in range(2)]
    for t in holders:
        t.start()
    try:
        def runs_started():
            with pool.connection() as conn:
                return conn.execute("SELECT count(*) AS n FROM runs WHERE owner_id = %s",
                                    (alice.owner_id,)).fetchone()["n"] == 2
        wait_for(runs_started, "both asks to hold their slots")

        async def flood(session):
            return [await session.call_tool("list_runs", {}) for _ in range(3)]

        refused = over_http(base, token, flood)
        assert all(r.is_error and r.content[0].text.startswith("too many calls: 2 of this owner's calls")
                   for r in refused)
        other = over_http(base, login_other(pool), flood)  # another owner is not held back by alice's flood
        assert not any(r.is_error for r in other)
    finally:
        release.set()
        for t in holders:
            t.join(60)
    assert [a.structured_content["answer"] for a in answers] == ["fine", "fine"]

    async def after(session):
        return await session.call_tool("list_runs", {})
    assert not over_http(base, token, after).is_error  # the slots are given back


def login_other(pool) -> str:
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    with pool.connection() as conn:
        return login(create_owner(conn, unique_name("carol")))


def test_post_mcp_through_the_lambda_handler_as_api_gateway_delivers_it(runtime_env, alice):
    from tests.support.api import call

    runtime_env()
    token = login(alice)
    frame = {"jsonrpc": "2.0", "id": "a1", "method": "tools/call", "params": {"name": "list_schedules"}}
    status, body, result = call("POST", "/mcp", raw=json.dumps(frame).encode(), token=token,
                                headers={"accept": "application/json, text/event-stream"})
    assert status == 200 and result["headers"]["Content-Type"] == "text/event-stream"
    assert result["headers"]["X-Content-Type-Options"] == "nosniff"  # the API's security headers too
    data = json.loads(next(line[5:] for line in body.splitlines() if line.startswith("data:")))
    assert data["id"] == "a1" and data["result"]["structuredContent"] == {"schedules": []}
    status, body, _ = call("POST", "/mcp", raw=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                           headers={"accept": "*/*"})
    assert status == 401 and body["error"] == "unauthorized"


@pytest.mark.parametrize("uri", ["zerg://workers/abc/result", "zerg://workers/1/secrets", "file:///etc/passwd"])
def test_a_resource_outside_the_template_is_a_clear_error(api_server, alice, uri):
    base, _ = api_server

    async def work(session):
        try:
            await session.read_resource(uri)
        except Exception as exc:  # noqa: BLE001
            return exc.error.code, exc.error.message
        return None

    code, message = over_http(base, login(alice), work)
    assert code == -32602 and message.startswith("unknown resource") and "zerg://workers/{id}/result" in message
