"""The one model↔tool loop that every agent runs: the supervisor's turn and a worker's task.

The loop asks the model, appends its message, runs each tool call it made and appends the
results, until the model answers without a tool call, a hook stops it, or the step budget is
spent. What differs between agents is expressed as :class:`LoopHooks` (what the model is shown,
where messages are persisted, calls the agent handles itself such as ``spawn_worker``, when a
turn ends), never as a second copy of the loop.

Invariants:
- Usage is data: every model call (tokens, cost, latency) and every tool call (tool, outcome,
  duration) is added to the :class:`AgentUsage` the caller passes in, as it happens, so a loop
  that raises (model down) still leaves what it spent.
- Tool failures are text for the model (:func:`zerg.loop.tool.invoke`); only a hook decides to stop.
- A call to a tool in ``refused`` (one the owner's agent configuration removed) never runs, and is
  never handed to a hook: its result is the error "tool X is not allowed for this agent". The
  filter is here, in code, whatever a prompt says.
- Every message is handed to :meth:`LoopHooks.message` the moment it is appended.
- A model call whose hooks give an :class:`AnswerStream` is streamed: its text goes to the stream as
  the model writes it, and the stream is closed with the reply (or None when the call failed), so it
  can tell an answer from text beside tool calls. The reply itself is the same as without a stream.
- What the model is shown is assembled per inference by :func:`model_view`: tool results and
  ephemeral untrusted layers are fenced as data there (:mod:`zerg.llm.untrusted`), each with a
  marker no text written before the call can know; the stored messages keep the raw text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from zerg import observability, tracing
from zerg.llm import CallTag, ChatModel, ChatResult, ToolCall, Usage
from zerg.llm.port import TextStream
from zerg.llm.untrusted import fence_messages
from zerg.loop.tool import Tool, ToolContext, ToolOutcome, invoke


@dataclass(frozen=True)
class ModelCall:
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    latency_ms: float


@dataclass(frozen=True)
class ToolRun:
    tool: str
    ok: bool
    duration_ms: float


@dataclass
class AgentUsage:
    """What one loop spent, accumulated as it runs."""

    usage: Usage = field(default_factory=Usage)
    model_calls: list[ModelCall] = field(default_factory=list)
    tool_runs: list[ToolRun] = field(default_factory=list)

    def add_model_call(self, model: str, usage: Usage, latency_ms: float) -> None:
        self.usage.add(usage)
        self.model_calls.append(ModelCall(model, usage.tokens_in, usage.tokens_out, usage.cost_usd, latency_ms))

    def add_tool_run(self, tool: str, ok: bool, duration_ms: float) -> None:
        self.tool_runs.append(ToolRun(tool, ok, duration_ms))

    @property
    def model_ms(self) -> float:
        return sum(c.latency_ms for c in self.model_calls)

    @property
    def tool_ms(self) -> float:
        return sum(t.duration_ms for t in self.tool_runs)


@dataclass(frozen=True)
class Stop:
    """A hook's decision to end the loop, with the agent's own reason (a status, a cause)."""

    reason: str
    status: str | None = None


@dataclass
class LoopResult:
    answer: str | None = None  # the model's final message, when it answered
    stop: Stop | None = None  # why a hook ended the loop
    exhausted: bool = False  # the step budget ran out
    held: ToolCall | None = None  # the call a hook held (LoopHooks.hold): it and the rest of its reply did not run


def tool_attributes(call: ToolCall) -> dict[str, Any]:
    """The ``execute_tool`` span's attributes (the arguments only when content capture is on)."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                             "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"}
    if tracing.options().capture_content:
        attrs["gen_ai.tool.call.arguments"] = tracing.content(call.arguments)
    return attrs


def tool_outcome(span: Any, outcome: str, text: str | None, result: LoopResult | None) -> None:
    """What a tool call's span records of its outcome: ok, error (the tool's result says so), refused
    (the configuration removed the tool), held (it waits for the owner's approval: it did not run;
    the run's ``approval_wait`` span covers the wait)."""
    if span is None:
        return
    span.set_attribute("zerg.tool.outcome", outcome)
    if outcome in ("error", "refused"):
        tracing.mark_error(span, (text or outcome)[:200], error_type="tool_error" if outcome == "error" else outcome)
    if text is not None and tracing.options().capture_content:
        span.set_attribute("gen_ai.tool.call.result", tracing.content(text))
    if result is not None and result.stop is not None:
        span.set_attribute("zerg.loop.stop", result.stop.reason[:200])


def model_view(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the model may see them for one inference: every tool result and every message
    marked untrusted fenced as data (:func:`zerg.llm.untrusted.fence_messages`), bookkeeping keys
    (``zerg_*``) removed."""
    return fence_messages(messages)


class AnswerStream(TextStream, Protocol):
    """A model call's text as it is written (:class:`~zerg.llm.port.TextStream`), then the call's end."""

    def close(self, reply: ChatResult | None) -> None:
        """The call ended with ``reply`` (None: it failed); text beside tool calls is no answer."""


class LoopHooks:
    """The points where agents differ; each default is "nothing special"."""

    def check(self) -> Stop | None:
        """Before each model call: stop (cancelled, out of time) or go on."""
        return None

    def request(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What the model is shown for this call, before fencing: ephemeral layers are added here,
        never stored; one carrying untrusted text is a non-system message marked with
        :data:`zerg.llm.untrusted.UNTRUSTED`. The loop then applies :func:`model_view`."""
        return messages

    def timeout(self) -> float | None:
        """This model call's budget in seconds (None: the provider's default)."""
        return None

    def answer_stream(self) -> AnswerStream | None:
        """Where this model call's text goes as it is written (None: the call is not streamed)."""
        return None

    def message(self, message: dict[str, Any]) -> None:
        """A message was appended to the conversation."""

    def handle(self, call: ToolCall) -> dict[str, Any] | None:
        """The tool message for a call the agent handles itself (e.g. ``spawn_worker``), or None
        to run the call through the tool set."""
        return None

    def hold(self, call: ToolCall) -> Stop | None:
        """Before a call runs: end the loop here, leaving this call and the rest of its reply
        unanswered (e.g. it waits for the owner's approval; :meth:`AgentLoop.run` resumes with them)."""
        return None

    def tool_started(self, call: ToolCall) -> None:
        pass

    def tool_done(self, call: ToolCall, outcome: ToolOutcome) -> Stop | None:
        return None

    def step_done(self, messages: list[dict[str, Any]]) -> Stop | None:
        """After a step's tool calls: end the turn (e.g. workers were spawned) or go on."""
        return None


@dataclass
class AgentLoop:
    llm: ChatModel
    model: str
    tools: dict[str, Tool]
    ctx: ToolContext
    tag: CallTag
    max_steps: int
    hooks: LoopHooks = field(default_factory=LoopHooks)
    answer_on_last_step: bool = False  # the last step keeps the tools visible but must answer
    temperature: float | None = None  # None: the model's own default
    max_tokens: int | None = None  # of each answer; None: the model's own default
    refused: frozenset[str] = frozenset()  # tools the agent has that its configuration does not allow

    def run(self, messages: list[dict[str, Any]], spent: AgentUsage, pending: list[ToolCall] | None = None,
            steps_taken: int = 0) -> LoopResult:
        """Run until an answer, a stop or the step budget. Resuming a held loop: ``messages`` as it was,
        ``pending`` the calls of its last reply still unanswered (the first one decided by the caller),
        ``steps_taken`` the model calls it already made (they count against ``max_steps``)."""
        schemas = [t.schema() for t in self.tools.values()]
        hooks = self.hooks
        if pending:
            if result := self._calls(pending, messages, spent):
                return result
            if stop := hooks.step_done(messages):
                return LoopResult(stop=stop)
        for step in range(steps_taken, self.max_steps):
            if stop := hooks.check():
                return LoopResult(stop=stop)
            last = step == self.max_steps - 1
            started = time.perf_counter()
            reply = self._ask(model_view(hooks.request(messages)), schemas,
                              "none" if last and self.answer_on_last_step else None)
            spent.add_model_call(reply.model, reply.usage, (time.perf_counter() - started) * 1000)
            self._append(messages, reply.as_message())
            if not reply.tool_calls:
                return LoopResult(answer=reply.content.strip())
            if result := self._calls(reply.tool_calls, messages, spent):
                return result
            if stop := hooks.step_done(messages):
                return LoopResult(stop=stop)
        return LoopResult(exhausted=True)

    def _ask(self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]],
             tool_choice: str | None) -> ChatResult:
        """One model call, streamed when the hooks give a stream (closed with the reply either way)."""
        stream = self.hooks.answer_stream()
        streaming = {"stream": stream} if stream is not None else {}
        try:
            reply = self.llm.complete(messages, model=self.model, tools=schemas, timeout=self.hooks.timeout(),
                                      tool_choice=tool_choice, tag=self.tag, temperature=self.temperature,
                                      max_tokens=self.max_tokens, **streaming)
        except BaseException:
            if stream is not None:
                stream.close(None)
            raise
        if stream is not None:
            stream.close(reply)  # may stop the loop (StreamStopped): the run closed while the model wrote
        return reply

    def _calls(self, calls: list[ToolCall], messages: list[dict[str, Any]], spent: AgentUsage) -> LoopResult | None:
        """Run one reply's tool calls in order; a result when a hook ends the loop."""
        for call in calls:
            with tracing.span(f"execute_tool {call.name}", tool_attributes(call), kind="internal") as span:
                result, outcome, text = self._call(call, messages, spent)
                tool_outcome(span, outcome, text, result)
            if result is not None:
                return result
        return None

    def _call(self, call: ToolCall, messages: list[dict[str, Any]],
              spent: AgentUsage) -> tuple[LoopResult | None, str, str | None]:
        """One tool call: (a result when a hook ends the loop, its outcome, the tool message's text)."""
        hooks = self.hooks
        if call.name in self.refused:  # never run, never handled: the configuration removed it
            spent.add_tool_run(call.name, False, 0.0)
            text = f"ERROR: tool {call.name} is not allowed for this agent"
            self._append(messages, {"role": "tool", "tool_call_id": call.id, "content": text})
            return None, "refused", text
        handled = hooks.handle(call)
        if handled is not None:
            self._append(messages, handled)
            return None, "ok", handled.get("content")
        if stop := hooks.hold(call):
            return LoopResult(stop=stop, held=call), "held", None
        hooks.tool_started(call)
        outcome = self._run_tool(call, spent)
        self._append(messages, {"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        stop = hooks.tool_done(call, outcome)
        return (LoopResult(stop=stop) if stop else None), ("ok" if outcome.ok else "error"), outcome.text

    def _append(self, messages: list[dict[str, Any]], message: dict[str, Any]) -> None:
        messages.append(message)
        self.hooks.message(message)

    def _run_tool(self, call: ToolCall, spent: AgentUsage) -> ToolOutcome:
        started = time.perf_counter()
        outcome = invoke(self.tools, call.name, call.arguments, self.ctx)
        duration_ms = (time.perf_counter() - started) * 1000
        spent.add_tool_run(call.name, outcome.ok, duration_ms)
        known = call.name if call.name in self.tools else "unknown"  # a model's invented name is no dimension
        observability.metrics({"tool": known, "outcome": "ok" if outcome.ok else "error"},
                              ("ToolCalls", 1, "Count"), ("ToolDuration", duration_ms, "Milliseconds"))
        return outcome
