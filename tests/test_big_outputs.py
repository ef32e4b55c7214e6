"""Big tool outputs: streamed to the artifact as they arrive, capped for the model, bounded in memory.

Real processes (the host's sandbox level), a real SSH server on loopback, the local artifact store.
"""

from __future__ import annotations

import json
import re
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from functions.worker.handler import handler as worker_handler
from tests.support.factories import make_job, make_run
from zerg.artifacts.local import LocalArtifactStore
from zerg.config import load_settings
from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, ToolContext, invoke
from zerg.sandbox import execute
from zerg.tools.catalog import worker_tools
from zerg.tools.output import ShellOutput

TOOLS = worker_tools()
MB = 1_000_000


@pytest.fixture
def worker_store(tmp_path):
    store = LocalArtifactStore(tmp_path / "artifacts")
    return store, store.create_worker("big output", owner_id=1)


def streaming_ctx(store, wid, **env) -> ToolContext:
    return ToolContext(settings=load_settings(env), open_output=partial(store.open_tool_output, wid))


def call(name: str, ctx: ToolContext, **args):
    return invoke(TOOLS, name, json.dumps(args), ctx)


def rss_kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1))


def test_the_artifact_keeps_stdout_then_stderr_then_the_exit_trailer(worker_store):
    store, wid = worker_store
    out = call("container_exec", streaming_ctx(store, wid), command="echo out1; echo err1 >&2; printf out2; exit 3")
    assert out.artifact_path == "tool_calls/001_container_exec.txt" and out.artifact is None
    saved = store.read_file(wid, out.artifact_path)
    assert re.fullmatch(r"\$ echo out1; echo err1 >&2; printf out2; exit 3\n--- stdout ---\nout1\nout2\n"
                        r"--- stderr ---\nerr1\n--- exit ---\nexit_code: 3\nduration_ms: \d+\n", saved), saved
    # The model's report keeps its shape: exit code first, then each stream.
    assert out.exit_code == 3 and not out.ok
    assert out.text.startswith("$ echo out1") and "exit_code: 3\n" in out.text
    assert out.text.endswith("--- stdout ---\nout1\nout2\n--- stderr ---\nerr1\n")


def test_a_command_printing_60_mb_is_kept_up_to_the_bound_capped_for_the_model_and_never_held_in_memory(worker_store):
    store, wid = worker_store
    ctx = streaming_ctx(store, wid, ZERG_TOOL_OUTPUT_CAP="2000")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS: the peak of this call alone
    before = rss_kb("VmRSS")
    out = call("container_exec", ctx, command="head -c 60000000 /dev/zero | tr '\\0' a; echo never-reached",
               timeout_s=120)
    grew_mb = (rss_kb("VmHWM") - before) / 1000
    assert grew_mb < 10, f"the process grew by {grew_mb:.1f} MB for a 60 MB output"  # held whole: 146+
    size = store.size(wid, out.artifact_path)
    assert ARTIFACT_OUTPUT_CAP < size < ARTIFACT_OUTPUT_CAP + 1000  # the bound, plus header and trailer
    head = store.head(wid, out.artifact_path, 100).decode()
    assert head.startswith("$ head -c 60000000") and "--- stdout ---\naaaa" in head
    tail = store.tail(wid, out.artifact_path, 300).decode()
    assert "never-reached" not in tail and "exit_code: none" in tail
    assert f"note: output over {ARTIFACT_OUTPUT_CAP} bytes: the command was stopped and the rest not kept" in tail
    assert len(out.text) < 3000 and "[... truncated" in out.text and "the command was stopped" in out.text


def test_a_sink_that_refuses_more_output_ends_the_sandboxed_command(tmp_path):
    class FirstChunkOnly:
        def __init__(self):
            self.seen = b""

        def stdout(self, data):
            self.seen += data
            return False

        def stderr(self, data):
            return True

    sink = FirstChunkOnly()
    result = execute("echo first; sleep 60; echo late", 120, load_settings({}), output_cap=MB, sink=sink)
    # The output reached the sink while the command ran; refusing it ended the call, not the 60 s.
    assert sink.seen == b"first\n" and result.over_cap and result.exit_code is None and not result.timed_out
    assert (result.stdout, result.stderr) == ("", "")


def test_without_a_worker_the_raw_output_comes_back_as_text():
    out = call("container_exec", ToolContext(settings=load_settings({})), command="echo plain; echo warn >&2")
    assert out.artifact_path is None
    assert out.saved.startswith("$ echo plain; echo warn >&2\n--- stdout ---\nplain\n--- stderr ---\nwarn\n--- exit ---\n")


def test_a_tool_that_fails_midway_keeps_the_partial_output_and_says_so(worker_store):
    store, wid = worker_store
    with pytest.raises(RuntimeError):
        with ShellOutput(streaming_ctx(store, wid), "ssh_exec", "[cube] $ tail -f log") as output:
            output.stdout(b"line 1\nline 2\n")
            output.stderr(b"warning\n")
            raise RuntimeError("connection dropped")
    saved = store.read_file(wid, "tool_calls/001_ssh_exec.txt")
    assert saved.startswith("[cube] $ tail -f log\n--- stdout ---\nline 1\nline 2\n--- stderr ---\nwarning\n--- exit ---\n")
    assert "note: the tool failed before the command finished: RuntimeError" in saved


def test_a_call_that_fails_before_any_output_claims_no_artifact_file(worker_store):
    store, wid = worker_store
    with pytest.raises(RuntimeError):
        with ShellOutput(streaming_ctx(store, wid), "container_exec", "$ true"):
            raise RuntimeError("no sandbox")
    assert not [f for f in store.list_files(wid) if f.path.startswith("tool_calls/")]


def test_a_store_that_fails_midway_does_not_fail_the_call(worker_store):
    store, wid = worker_store

    class DiskFull:
        path = "tool_calls/001_container_exec.txt"

        def __init__(self):
            self.written = 0

        def write(self, data):
            if self.written > 100:
                raise OSError(28, "No space left on device")
            self.written += len(data)

        def close(self):
            pass

    ctx = ToolContext(settings=load_settings({}), open_output=lambda tool: DiskFull())
    out = call("container_exec", ctx, command="seq 1 2000")
    assert out.ok and out.exit_code == 0 and "1999\n2000" in out.text
    assert "the raw output could not be fully saved (OSError: [Errno 28] No space left on device)" in out.text


def test_ssh_output_reaches_the_artifact_while_the_remote_command_still_runs(runtime_env, pool, ssh_server, tmp_path):
    from zerg.owners import local_owner

    rt = runtime_env(ZERG_SSH_HOSTS=json.dumps({"cube": ssh_server.host_config()}))
    wid = rt.store.create_worker("ssh stream", owner_id=1)
    with pool.connection() as conn:
        ctx = ToolContext(settings=rt.settings, owner_id=local_owner(conn), runtime=rt,
                          open_output=partial(rt.store.open_tool_output, wid))
    go = tmp_path / "go"
    command = f"echo first-line; while [ ! -e {go} ]; do sleep 0.05; done; echo second-line"
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(out=call("ssh_exec", ctx, host="cube", command=command,
                                                                    timeout_s=120)))
    runner.start()
    path = "tool_calls/001_ssh_exec.txt"
    seen = ""
    for _ in range(600):  # until the first line is in the artifact (the command waits for us meanwhile)
        try:
            seen = rt.store.read_file(wid, path)
        except Exception:
            seen = ""
        if seen.endswith("--- stdout ---\nfirst-line\n"):
            break
        time.sleep(0.05)
    still_running = runner.is_alive()
    go.touch()
    runner.join(120)
    assert seen.endswith("--- stdout ---\nfirst-line\n") and still_running, (seen, outcome)
    out = outcome["out"]
    assert out.ok and out.artifact_path == path
    final = rt.store.read_file(wid, path)
    assert "--- stdout ---\nfirst-line\nsecond-line\n--- stderr ---\n--- exit ---\nexit_code: 0\n" in final


def test_a_worker_streams_each_shell_call_into_one_file_and_shows_the_model_a_capped_view(runtime_env, llm, pool, owner):
    rt = runtime_env(ZERG_TOOL_OUTPUT_CAP="1000")
    run_id, _ = make_run(pool, owner)
    job_id = make_job(pool, owner, run_id, "Print a big log")
    llm.script(
        {"tool_calls": [("container_exec", {"command": "seq 1 400000"})]},  # ~2.7 MB
        {"tool_calls": [("get_current_time", {})]},
        {"content": "Printed it."},
    )
    out = worker_handler({"job_id": job_id, "run_id": run_id, "owner_id": owner})
    assert out["status"] == "success"
    wid = out["worker_id"]
    tool_files = sorted(f.path for f in rt.store.list_files(wid) if f.path.startswith("tool_calls/"))
    assert tool_files == ["tool_calls/001_container_exec.txt", "tool_calls/002_get_current_time.txt"]
    saved = rt.store.read_file(wid, tool_files[0])
    assert "\n1\n2\n3\n" in saved and "\n399999\n400000\n--- stderr ---\n--- exit ---\nexit_code: 0\n" in saved
    assert [c["path"] for c in rt.store.read_metadata(wid)["tool_calls"]] == tool_files
    shown = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "[... truncated" in shown and "400000" in shown and len(shown) < 4000
