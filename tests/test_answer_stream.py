"""The answer streams (issue 29, item 3): the supervisor's final synthesis reaches the run's event log as
``answer_delta`` events while the model writes it; the stored answer is the whole text; a reconnect with
``Last-Event-ID`` resumes without duplication; a cancelled run stops streaming.

Batching is tested with a clock the test moves; the providers through their real SDKs against the
scripted server on loopback; whole runs through the local engine and ``zerg serve``. The scripted model
holds the rest of an answer until the test releases it (an event, never a sleep)."""

from __future__ import annotations

import json
import threading

import pytest

from tests.support.api import http_login
from tests.support.factories import run_events
from tests.support.scripts import run_script
from tests.support.waiting import wait_for
from tests.test_api import db_events, read_stream
from tests.test_providers import MODEL, settings_for
from tests.test_run_e2e import start_and_wait
from tests.test_tracing import LATEST, closed_trace, named, receiver, run_to_end, traced  # noqa: F401 (fixtures)
from zerg.llm import CallTag, ChatResult, ToolCall
from zerg.llm.ledger import MeteredChatModel, calls_of_run
from zerg.llm.port import StreamStopped
from zerg.llm.providers import ProviderRouter
from zerg.runs import store as runs
from zerg.supervisor import answer_stream
from zerg.supervisor.answer_stream import AnswerDeltas

ANSWER = "Disk is **78%** full.\n\n```bash\ndf -h\n```\n\nMemory: 2 GB free."


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A TextStream that keeps what a provider handed it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def text(self, piece: str) -> None:
        self.calls.append(("text", piece))

    def restart(self) -> None:
        self.calls.append(("restart", ""))

    @property
    def pieces(self) -> list[str]:
        return [p for kind, p in self.calls if kind == "text"]


def deltas_of(events) -> list[dict]:
    return [p for kind, p in events if kind == "answer_delta"]


def spelled(deltas: list[dict]) -> str:
    """The draft a client builds from ``deltas``, checking every offset continues it."""
    draft = ""
    for d in deltas:
        if d.get("reset"):
            draft = ""
        assert d["offset"] == len(draft), (d, draft)
        draft += d["text"]
    return draft


# --- batching -----------------------------------------------------------------------------------

def test_the_first_words_go_at_once_then_one_event_per_interval_with_offsets():
    sent: list[dict] = []
    clock = Clock()
    stream = AnswerDeltas(lambda p: sent.append(p) or len(sent), clock=clock)
    stream.text("Disk ")
    assert sent == [{"offset": 0, "text": "Disk ", "reset": True}]  # the page gets the first words now
    for piece in ["is ", "78% ", "full"]:  # faster than the interval: they wait
        stream.text(piece)
    assert len(sent) == 1
    clock.now += answer_stream.FLUSH_S * 2
    stream.text(".")
    assert sent[1] == {"offset": 5, "text": "is 78% full."}
    stream.text(" ✓ done")
    stream.close(ChatResult(model="m", content="Disk is 78% full. ✓ done"))
    assert sent[2] == {"offset": 17, "text": " ✓ done"}  # offsets count code points
    assert spelled(sent) == "Disk is 78% full. ✓ done"


def test_many_characters_waiting_are_written_before_the_interval():
    sent: list[dict] = []
    stream = AnswerDeltas(lambda p: sent.append(p) or len(sent), clock=Clock())
    stream.text("a")
    stream.text("x" * answer_stream.FLUSH_CHARS)
    assert [len(p["text"]) for p in sent] == [1, answer_stream.FLUSH_CHARS]


def test_text_beside_tool_calls_is_withdrawn_and_so_is_a_failed_calls():
    for reply in (ChatResult(model="m", content="Let me check", tool_calls=[ToolCall("c1", "spawn_worker", "{}")]),
                  None):
        sent: list[dict] = []
        stream = AnswerDeltas(lambda p, sent=sent: sent.append(p) or len(sent), clock=Clock())
        stream.text("Let me check")
        stream.close(reply)
        assert sent[-1] == {"offset": 0, "text": "", "reset": True} and spelled(sent) == ""
    quiet: list[dict] = []
    silent = AnswerDeltas(lambda p: quiet.append(p) or 1, clock=Clock())
    silent.close(ChatResult(model="m", content="", tool_calls=[ToolCall("c1", "spawn_worker", "{}")]))
    assert quiet == []  # nothing shown, nothing to withdraw


def test_a_retried_call_starts_a_new_draft():
    sent: list[dict] = []
    clock = Clock()
    stream = AnswerDeltas(lambda p: sent.append(p) or len(sent), clock=clock)
    stream.text("First try")
    stream.restart()
    clock.now += 1
    stream.text("Second")
    stream.close(ChatResult(model="m", content="Second"))
    assert sent[-1] == {"offset": 0, "text": "Second", "reset": True} and spelled(sent) == "Second"


def test_a_closed_run_refuses_the_next_event_and_the_call_stops():
    stream = AnswerDeltas(lambda p: None, clock=Clock())  # emit drops events after the terminal one
    with pytest.raises(StreamStopped):
        stream.text("too late")
    stream.close(None)  # withdrawing after the stop never raises


def test_a_database_that_cannot_take_the_draft_costs_the_draft_only():
    tried: list[dict] = []

    def down(payload):
        tried.append(payload)
        raise OSError("database down")

    stream = AnswerDeltas(down, clock=Clock())
    stream.text("words")  # the first words are written at once: that write fails
    stream.text("more")
    stream.close(ChatResult(model="m", content="wordsmore"))  # no exception: the answer comes whole at the end
    assert tried == [{"offset": 0, "text": "words", "reset": True}]  # tried once, then nothing more of this call


# --- providers ----------------------------------------------------------------------------------

def test_chat_completions_streams_through_the_real_openai_sdk_and_keeps_usage(llm, tmp_path, pool, owner):
    settings = settings_for("openai-chat", llm, tmp_path)
    pieces = ["Disk is ", "**78%** ", "full.\n\n", "```bash\ndf -h\n```", "\n\nMemory: 2 GB free."]
    llm.script({"content": ANSWER, "chunks": pieces})
    model = MeteredChatModel(ProviderRouter(settings), lambda: pool)
    seen = Recorder()
    result = model.complete([{"role": "user", "content": "check"}], model=MODEL["openai-chat"], stream=seen,
                            tag=CallTag("supervisor", owner))
    assert seen.pieces == pieces and result.content == ANSWER and result.stop_reason == "stop"
    assert llm.requests[-1]["stream"] is True and llm.requests[-1]["stream_options"] == {"include_usage": True}
    assert result.usage.tokens_in > 0 and result.usage.tokens_out > 0  # from the stream's last chunk
    with pool.connection() as conn:
        row = conn.execute("SELECT tokens_in, tokens_out FROM llm_calls WHERE owner_id = %s", (owner,)).fetchone()
    assert (row["tokens_in"], row["tokens_out"]) == (result.usage.tokens_in, result.usage.tokens_out)


def test_a_streamed_reply_of_tool_calls_is_assembled_and_writes_nothing(llm, tmp_path):
    settings = settings_for("openai-chat", llm, tmp_path)
    llm.script({"tool_calls": [("spawn_worker", {"task": "Check disk"}), ("spawn_worker", {"task": "Check memory"})]})
    seen = Recorder()
    result = ProviderRouter(settings).complete([{"role": "user", "content": "check"}], model=MODEL["openai-chat"],
                                               stream=seen)
    assert seen.calls == [] and result.stop_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("spawn_worker", '{"task": "Check disk"}'), ("spawn_worker", '{"task": "Check memory"}')]
    assert all(c.id.startswith("call_") for c in result.tool_calls)


def test_a_stream_that_breaks_off_is_retried_from_the_start(llm, tmp_path):
    settings = settings_for("openai-chat", llm, tmp_path)
    llm.script({"content": "one two three four", "break_after": 2},
               {"content": "The whole answer", "chunks": ["The ", "whole answer"]})
    seen = Recorder()
    result = ProviderRouter(settings).complete([{"role": "user", "content": "go"}], model=MODEL["openai-chat"],
                                               stream=seen)
    assert seen.calls == [("text", "one "), ("text", "two "), ("restart", ""), ("text", "The "),
                          ("text", "whole answer")]
    assert result.content == "The whole answer"


def test_a_server_that_refuses_streaming_is_asked_again_without_it(llm, tmp_path):
    settings = settings_for("openai-chat", llm, tmp_path)
    llm.script({"status": 400, "message": "Unrecognized request argument: stream_options"}, {"content": ANSWER})
    seen = Recorder()
    result = ProviderRouter(settings).complete([{"role": "user", "content": "go"}], model=MODEL["openai-chat"],
                                               stream=seen)
    assert seen.calls == [("text", ANSWER)] and result.content == ANSWER
    assert [r.get("stream") for r in llm.requests] == [True, None]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_responses_and_anthropic_stream_through_their_sdks_too(provider, llm, tmp_path, pool, owner):
    settings = settings_for(provider, llm, tmp_path)
    pieces = ["Disk is ", "**78%** ", "full.\n\n", "```bash\ndf -h\n```", "\n\nMemory: 2 GB free."]
    llm.script({"content": ANSWER, "chunks": pieces},
               {"tool_calls": [("spawn_worker", {"task": "Check disk"}), ("spawn_worker", {"task": "Check memory"})]},
               {"content": "one two three four", "break_after": 2}, {"content": "The whole answer"})
    model = MeteredChatModel(ProviderRouter(settings), lambda: pool)
    ask = [{"role": "user", "content": "check"}]
    seen = Recorder()
    result = model.complete(ask, model=MODEL[provider], stream=seen, tag=CallTag("supervisor", owner))
    assert seen.pieces == pieces and result.content == ANSWER and result.stop_reason == "stop"
    assert llm.raw_requests[-1]["body"]["stream"] is True
    assert result.usage.tokens_in > 0 and result.usage.tokens_out > 0
    with pool.connection() as conn:
        row = conn.execute("SELECT tokens_in, tokens_out FROM llm_calls WHERE owner_id = %s", (owner,)).fetchone()
    assert (row["tokens_in"], row["tokens_out"]) == (result.usage.tokens_in, result.usage.tokens_out)

    tools = [{"type": "function", "function": {"name": "spawn_worker", "parameters": {"type": "object"}}}]
    calls = Recorder()
    reply = model.complete(ask, model=MODEL[provider], stream=calls, tools=tools, tag=CallTag("supervisor", owner))
    assert calls.calls == [] and reply.stop_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("spawn_worker", {"task": "Check disk"}), ("spawn_worker", {"task": "Check memory"})]

    retried = Recorder()
    again = model.complete(ask, model=MODEL[provider], stream=retried, tag=CallTag("supervisor", owner))
    assert retried.calls[:3] == [("text", "one "), ("text", "two "), ("restart", "")]
    assert "".join(p for k, p in retried.calls[3:]) == again.content == "The whole answer"


def test_bedrock_does_not_stream_and_hands_the_whole_text_over_once(llm, tmp_path):
    settings = settings_for("bedrock", llm, tmp_path)
    llm.script({"content": ANSWER}, {"tool_calls": [("spawn_worker", {"task": "Check disk"})]})
    seen = Recorder()
    router = ProviderRouter(settings)
    result = router.complete([{"role": "user", "content": "check"}], model=MODEL["bedrock"], stream=seen)
    assert seen.calls == [("text", ANSWER)] and result.content == ANSWER
    tools = [{"type": "function", "function": {"name": "spawn_worker", "parameters": {"type": "object"}}}]
    router.complete([{"role": "user", "content": "check"}], model=MODEL["bedrock"], stream=seen, tools=tools)
    assert seen.calls == [("text", ANSWER)]  # a reply of tool calls hands nothing over


# --- whole runs ---------------------------------------------------------------------------------

def test_a_run_streams_its_answer_after_the_last_worker_and_stores_the_whole_text(runtime_env, llm, engine, pool,
                                                                                   owner):
    runtime_env()
    script = run_script(["Check disk", "Check memory"], answer=lambda r: ANSWER)
    llm.respond_with(lambda r: {**spec, "chunks": [ANSWER[:9], ANSWER[9:30], ANSWER[30:]]}
                     if (spec := script(r)).get("content") == ANSWER else spec)
    run, _ = start_and_wait(engine, pool, owner, "check disk and memory")
    assert run["status"] == "success" and run["result"] == ANSWER
    events = run_events(pool, run["id"])
    kinds = [k for k, _ in events]
    first = kinds.index("answer_delta")
    assert first > max(i for i, k in enumerate(kinds) if k.startswith("worker_"))  # the synthesis, after the workers
    assert kinds[-1] == "supervisor_complete" and set(kinds[first:-1]) == {"answer_delta"}
    assert spelled(deltas_of(events)) == ANSWER == events[-1][1]["result"]
    with pool.connection() as conn:  # the streamed call is in the ledger like any other
        supervisor_calls = [c for c in calls_of_run(conn, owner, run["id"]) if c["component"] == "supervisor"]
    assert len(supervisor_calls) == 2 and all(c["tokens_out"] > 0 for c in supervisor_calls)


@pytest.mark.e2e  # the run's launch path starts the local engine
def test_the_streamed_supervisor_calls_keep_their_chat_spans_with_usage(
        traced, receiver, llm, pool, owner):  # noqa: F811 (the fixtures imported above)
    rt = traced(**LATEST)
    script = run_script(["Check disk"], answer=lambda r: ANSWER)
    llm.respond_with(lambda r: {**spec, "chunks": [ANSWER[:9], ANSWER[9:]]}
                     if (spec := script(r)).get("content") == ANSWER else spec)
    run = run_to_end(rt, pool, owner, "check disk")
    assert run["status"] == "success" and run["result"] == ANSWER
    spans = closed_trace(receiver, run, workers=1)
    supervisor = {s["span_id"] for s in named(spans, "invoke_agent supervisor")}
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    streamed = [c for c in chats if c["parent_span_id"] in supervisor]
    assert len(streamed) == 2 and all(c["attributes"]["zerg.streamed"] is True for c in streamed)
    assert all(c["attributes"]["gen_ai.usage.output_tokens"] > 0 for c in streamed)
    assert sorted(c["attributes"]["gen_ai.response.finish_reasons"][0] for c in streamed) == ["stop", "tool_call"]
    assert not any(c["attributes"]["zerg.streamed"] for c in chats if c not in streamed)  # workers do not stream


def test_a_scheduled_run_does_not_stream_its_assessment(runtime_env, llm, engine, pool, owner):
    from tests.support.scripts import background_script

    runtime_env()
    llm.respond_with(background_script(["Check disk"]))
    with pool.connection() as conn:
        started = runs.start_run(conn, owner, "nightly check", trigger="schedule")
    engine.wait(engine.start_execution(started.run_id, owner, started.thread_id), timeout=60)
    assert deltas_of(run_events(pool, started.run_id)) == []


@pytest.mark.e2e  # zerg serve runs it on the local engine
def test_a_reconnect_with_last_event_id_mid_stream_resumes_without_duplication(api_server, llm, alice, pool):
    base, _ = api_server
    release = threading.Event()
    words = ANSWER.split(" ")
    chunks = [words[0]] + [" " + w for w in words[1:]]
    script = run_script(["Check disk"], answer=lambda r: ANSWER)
    llm.respond_with(lambda r: {**spec, "chunks": chunks, "until": release}
                     if (spec := script(r)).get("content") == ANSWER else spec)
    client = http_login(base, alice)
    started = client.post("/api/jarvis/supervisor", json={"task": "check disk"}).json()
    url = started["stream_url"]
    try:
        before = _until_first_delta(client, url)  # the model holds the rest of its answer meanwhile
    finally:
        release.set()
    last_id = before[-1][0]
    assert before[-1][1] == "answer_delta" and before[-1][2] == {"offset": 0, "text": chunks[0], "reset": True}
    rest = read_stream(client, url, last_id=last_id)
    assert [e[0] for e in rest] == [e[0] for e in db_events(pool, started["run_id"]) if e[0] > last_id]
    assert not {e[0] for e in before} & {e[0] for e in rest}  # nothing twice
    together = [p for _, k, p in before + rest if k == "answer_delta"]
    assert spelled(together) == ANSWER == rest[-1][2]["result"]


def _until_first_delta(client, url):
    """The run's events up to and including its first answer_delta (the stream is left mid-answer)."""
    events = []
    for event in _iter_stream(client, url):
        events.append(event)
        if event[1] == "answer_delta":
            return events
    return None


def _iter_stream(client, url):
    import json

    from httpx_sse import connect_sse

    with connect_sse(client, "GET", url, timeout=30) as source:
        for sse in source.iter_sse():
            if sse.event in ("heartbeat", "message", ""):
                continue
            yield int(sse.id), sse.event, json.loads(sse.data)


@pytest.mark.e2e  # zerg serve runs it on the local engine
def test_cancelling_a_run_while_its_answer_streams_stops_the_stream(api_server, llm, alice, pool):
    base, _ = api_server
    release = threading.Event()
    words = ANSWER.split(" ")
    chunks = [words[0]] + [" " + w for w in words[1:]]
    script = run_script(["Check disk"], answer=lambda r: ANSWER)
    llm.respond_with(lambda r: {**spec, "chunks": chunks, "until": release}
                     if (spec := script(r)).get("content") == ANSWER else spec)
    client = http_login(base, alice)
    run_id = client.post("/api/jarvis/supervisor", json={"task": "check disk"}).json()["run_id"]
    try:
        wait_for(lambda: deltas_of(run_events(pool, run_id)), "the first answer_delta")
        assert client.post(f"/api/jarvis/runs/{run_id}/cancel").status_code == 200
    finally:
        release.set()  # the model goes on writing: nothing more of it may reach the log
    wait_for(lambda: _closed_turn(pool, run_id), "the supervisor's turn to end", limit_s=30)
    events = run_events(pool, run_id)
    terminal = max(i for i, (k, _) in enumerate(events) if k in ("supervisor_complete", "error"))
    assert events[terminal][0] == "error" and terminal == len(events) - 1
    assert len(deltas_of(events)) == 1 and spelled(deltas_of(events)) == chunks[0]
    with pool.connection() as conn:
        run = runs.get_run(conn, alice.owner_id, run_id)
    assert run["status"] == "cancelled" and run["result"] is None  # the rest of the answer never became the run's


def _closed_turn(pool, run_id) -> bool:
    """The supervisor's resume turn saved its working messages (the workers' outcomes filled in), which
    it does whatever ended it: its answer, or the stop at the cancel."""
    with pool.connection() as conn:
        row = conn.execute("SELECT working_messages FROM runs WHERE id = %s", (run_id,)).fetchone()
    tools = [m for m in row["working_messages"] or [] if m.get("role") == "tool"]
    return bool(tools) and all(m.get("content") for m in tools)
