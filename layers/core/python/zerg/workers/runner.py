"""WorkerRunner: one disposable agent, one task, every byte persisted as it happens.

Invariants:
- Each tool output is written to ``tool_calls/NNN_tool.txt`` as it is produced (the shell tools
  stream it there while the command runs, the others save it the moment the call finishes) and
  each message is appended to ``thread.jsonl`` as it happens: a crash or timeout loses nothing
  that was already produced.
- ``status`` is system-determined: ``success`` when the loop ended with a final message,
  ``failed`` on an exception, a critical tool error or exhausted iterations, ``timeout`` when
  the deadline passed, ``cancelled`` when its run was cancelled (or closed) and it was stopped.
  What the model says about success never changes it.
- A cancel stops the work, not just the loop: the running command is ended (its tool waits on the
  cancel signal of :mod:`zerg.workers.cancellation`) before the job is recorded, and a job
  cancelled before it started never starts (the claim in ``jobs.mark_started`` is conditional).
- ``result.txt`` is never empty: an empty final message, a failure or a timeout yields a result
  synthesised from the last tool outputs, marked as such.
- A job runs at most once: re-invoking a finished job returns its outcome; re-invoking one that
  was interrupted mid-run (a Lambda retry) marks it failed and keeps its partial artifacts.
- The run's deadline bounds every worker (:mod:`zerg.runs.deadline`): a worker still running at
  the run's answer-by time stops and its job is ``cancelled`` with that reason (in the index and in
  ``metadata.json``); a job that had not started by then never starts.
- The owner's worker configuration (:mod:`zerg.agents.settings`) decides the model when the job
  names none, the temperature, max tokens, tools (a removed one is refused by the loop, never run)
  and the standing instructions after the worker's rules.
- The database is bookkeeping, not the work: a worker keeps working through an outage (its cancel
  watcher asks again at its next poll), and its start and final bookkeeping retry with back-off for
  ``ZERG_DB_RETRY_S`` (:func:`zerg.db.retry_unavailable`). What still cannot be written is
  reconciled from ``metadata.json`` later (:mod:`zerg.workers.reconcile`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from psycopg import OperationalError

from zerg import observability
from zerg.agents import settings as agent_settings
from zerg.alerts.budget import SpendingCapReached
from zerg.approvals import requests as approvals
from zerg.approvals import wait as approval_wait
from zerg.approvals.policy import too_many_asks_text
from zerg.artifacts.store import SYNTHESISED_MARK
from zerg.config import Settings
from zerg.db import retry_unavailable
from zerg.llm import CallTag, LLMError, ToolCall, Usage
from zerg.llm.untrusted import PROMPT_RULE
from zerg.loop.agent_loop import AgentLoop, AgentUsage, LoopHooks, Stop
from zerg.loop.tool import CancelSignal, Tool, ToolContext, ToolOutcome, gate_failed, parse_args
from zerg.runs import deadline as run_deadline
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.runtime import Runtime
from zerg.statuses import JOB_FINISHED, RUN_FINAL
from zerg.timestamps import iso, utcnow
from zerg.tools.approval_gate import Gate, approval_gate
from zerg.tools.catalog import worker_tools
from zerg.workers import cancellation

WORKER_SYSTEM_PROMPT = """\
You are a Zerg worker: a disposable agent that completes exactly one task and reports back.
You have a real terminal. Use ssh_exec to run commands on the user's servers (by alias),
container_exec for a local sandbox shell, http_request for HTTP APIs, get_current_time for the date.
Prefer ordinary shell commands (df -h, free -m, uptime, docker ps, journalctl, ss -tlnp, grep, jq).
Investigate, then answer with a concise final message stating what you found, with the key numbers
and any errors you hit. Never claim something you did not observe in a tool output.

""" + PROMPT_RULE

log = logging.getLogger(__name__)


class JobNotFound(LookupError):
    pass


@dataclass
class WorkerOutcome:
    job_id: int
    worker_id: str | None
    status: str
    duration_ms: int | None = None
    error: str | None = None
    approval_id: int | None = None  # status "awaiting_approval": the approval its held call waits on
    approval_timeout_s: int | None = None  # ... and how long the run waits for its answer

    def as_payload(self) -> dict[str, Any]:
        # approval_id and approval_timeout_s are always present (null when not waiting): the ASL's
        # ResultSelector reads them, AwaitApproval's TimeoutSecondsPath the timeout.
        return {"job_id": self.job_id, "worker_id": self.worker_id, "status": self.status,
                "approval_id": self.approval_id, "approval_timeout_s": self.approval_timeout_s}


AWAITING_APPROVAL = "awaiting_approval"  # a step's outcome, never a job's status: the job is still running


CALL_LINE_CHARS = 300
# The arguments that say what a call did, most telling first (a shell command, a URL, a query...).
_CALL_KEYS = ("command", "url", "query", "path", "pattern", "name", "host")


def call_line(arguments: str) -> str | None:
    """One line saying what a tool call did (its command, URL, query...), cut to
    ``CALL_LINE_CHARS``; None when its arguments name nothing of the kind. The model's arguments
    are data: this only picks and cuts a string."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    for key in _CALL_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            line = " ".join(value.split())
            prefix = f"[{args['host']}] " if key == "command" and isinstance(args.get("host"), str) else ""
            line = prefix + line
            return line if len(line) <= CALL_LINE_CHARS else line[: CALL_LINE_CHARS - 1] + "…"
    return None


@dataclass
class _Loop:
    status: str = "success"
    error: str | None = None
    final: str = ""
    spent: AgentUsage = field(default_factory=AgentUsage)
    calls: list[dict[str, Any]] = field(default_factory=list)  # derived index of tool calls
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (path, text) for synthesis
    at_run_deadline: bool = False  # stopped (cancelled) because the run's deadline came near
    approval_id: int | None = None  # the loop was held: its call waits on this approval
    approval_timeout_s: int | None = None  # ... this long: the policy's expiry, at most wait_ceiling_s
    wait_ceiling_s: int | None = None  # the execution's longest approval wait (None: the settings')

    def paused_state(self) -> dict[str, Any]:
        """What a held worker resumes with (kept in its metadata while it waits)."""
        usage = self.spent.usage
        return {"tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out, "tokens_cached": usage.tokens_cached,
                "cost_usd": usage.cost_usd, "model_ms": self.spent.model_ms + self.resumed_ms[0],
                "tool_ms": self.spent.tool_ms + self.resumed_ms[1],
                "calls": self.calls, "outputs": [[path, text[-2000:]] for path, text in self.outputs[-3:]],
                "steps": len(self.spent.model_calls) + self.resumed_steps}

    resumed_steps: int = 0  # model calls made before the last resume
    resumed_ms: tuple[float, float] = (0.0, 0.0)  # (model_ms, tool_ms) before the last resume

    @staticmethod
    def resumed(state: dict[str, Any]) -> _Loop:
        loop = _Loop(calls=list(state.get("calls") or []), outputs=[(p, t) for p, t in state.get("outputs") or []])
        loop.spent.usage.add(Usage(tokens_in=state.get("tokens_in", 0), tokens_out=state.get("tokens_out", 0),
                                   cost_usd=state.get("cost_usd", 0.0), tokens_cached=state.get("tokens_cached", 0)))
        loop.resumed_steps = int(state.get("steps", 0))
        loop.resumed_ms = (float(state.get("model_ms", 0.0)), float(state.get("tool_ms", 0.0)))
        return loop


def _load_job(rt: Runtime, job_id: int, owner_id: int, run_id: int) -> dict[str, Any]:
    with rt.pool.connection() as conn:
        job = jobs.get_run_job(conn, job_id, owner_id, run_id)
    if job is None:
        raise JobNotFound(f"job {job_id} not found for owner {owner_id} in run {run_id}")
    return job


def _finished(job: dict[str, Any]) -> WorkerOutcome | None:
    """The recorded outcome of a job that already ended (so re-invoking it changes nothing)."""
    if job["status"] in JOB_FINISHED:
        return WorkerOutcome(job["id"], job["worker_id"], job["status"], job["duration_ms"], job["error"])
    return None


@dataclass(frozen=True)
class _Deadline:
    """When this worker must stop (monotonic clock) and why: its own timeout or the run's deadline."""

    at: float
    stop: Stop
    run_bound: bool = False  # the run's answer-by time comes before the worker's own timeout

    @staticmethod
    def of(settings: Settings, run_started_at: datetime | None) -> "_Deadline":
        own = settings.worker_timeout_s
        left = own if run_started_at is None else run_deadline.seconds_left(
            run_deadline.answer_by(run_started_at, settings))
        if left < own:
            return _Deadline(time.monotonic() + left, Stop(_deadline_reason(settings), status="cancelled"), True)
        return _Deadline(time.monotonic() + own, Stop(f"worker timed out after {own:g}s", status="timeout"))


def _deadline_reason(settings: Settings) -> str:
    return f"cancelled at {run_deadline.describe(settings)}: the supervisor answers with what exists"


def run_worker_job(rt: Runtime, job_id: int, owner_id: int, run_id: int,
                   approval_timeout_s: int | None = None) -> WorkerOutcome:
    job = _load_job(rt, job_id, owner_id, run_id)
    if done := _finished(job):
        return done
    if job["worker_id"]:
        return mark_job_failed(rt, job_id, owner_id, run_id, "worker was interrupted before it finished (retried invocation); partial artifacts kept")

    store, settings = rt.store, rt.settings
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
        config = agent_settings.resolve(conn, settings, owner_id, "worker")
    deadline = _Deadline.of(settings, run_deadline.clock_start(run) if run else None)
    if deadline.at <= time.monotonic():  # the run's time is up: this worker never starts
        return _cancel_unstarted(rt, job_id, owner_id, run_id, deadline.stop.reason)
    model = job["model"] or config.model
    started = utcnow()
    worker_id = store.create_worker(job["task"], owner_id, job_id=job_id, run_id=run_id, model=model, now=started)

    def record_start() -> bool:
        with rt.pool.connection() as conn:
            claimed = jobs.mark_started(conn, job_id, worker_id, started)
            if claimed:
                events.emit(conn, run_id, owner_id, "worker_started", {"job_id": job_id, "worker_id": worker_id})
        return claimed

    try:
        claimed = retry_unavailable(record_start, budget_s=settings.db_retry_s, what=f"the start of job {job_id}")
    except OperationalError as exc:  # the index never learnt this worker: its metadata must not say running
        store.save_result(worker_id, f"[Worker failed: the database was unreachable at its start: {exc}]")
        store.complete_worker(worker_id, "failed", error="the database was unreachable at the worker's start")
        raise
    if not claimed:
        current = _load_job(rt, job_id, owner_id, run_id)
        if current["worker_id"] != worker_id:  # cancelled (or claimed elsewhere) since we read it: it never starts here
            store.delete_worker(worker_id)
            return _finished(current) or WorkerOutcome(job_id, None, "cancelled")
        # else ours after all: a retried claim whose first commit had landed

    loop = _Loop(wait_ceiling_s=approval_timeout_s)
    messages: list[dict[str, Any]] = []
    for message in ({"role": "system", "content": config.system_prompt(WORKER_SYSTEM_PROMPT)},
                    {"role": "user", "content": job["task"]}):
        messages.append(message)
        store.append_thread(worker_id, message)
    return _run_loop(rt, job, worker_id, model, config, deadline, loop, messages)


def _run_loop(rt: Runtime, job: dict[str, Any], worker_id: str, model: str, config: agent_settings.AgentSettings,
              deadline: _Deadline, loop: _Loop, messages: list[dict[str, Any]],
              pending: list[ToolCall] | None = None, approved: str | None = None) -> WorkerOutcome:
    job_id, owner_id, run_id = job["id"], job["owner_id"], job["run_id"]
    with cancellation.watch(rt, job_id, owner_id, run_id) as cancel:
        try:
            _agent_loop(rt, job, worker_id, model, config, deadline, loop, cancel, messages, pending, approved)
        except SpendingCapReached as exc:  # the owner's cap, not the model: fails as is, never retried
            loop.status, loop.error = "failed", str(exc)
        except LLMError as exc:
            if time.monotonic() >= deadline.at:
                loop.status, loop.error = deadline.stop.status, f"{deadline.stop.reason} (waiting for the model)"
                loop.at_run_deadline = deadline.run_bound
            else:
                loop.status, loop.error = "failed", str(exc)
        except Exception as exc:  # the system decides: an exception is a failure, whatever was said
            loop.status, loop.error = "failed", f"{type(exc).__name__}: {exc}"
    if loop.status == AWAITING_APPROVAL:  # the step ends, the job does not: the run's workflow waits
        rt.store.set_paused(worker_id, loop.paused_state())
        return WorkerOutcome(job_id, worker_id, AWAITING_APPROVAL, approval_id=loop.approval_id,
                             approval_timeout_s=loop.approval_timeout_s)
    return _finish(rt, job_id, owner_id, run_id, worker_id, loop)


def resume_worker_job(rt: Runtime, job_id: int, owner_id: int, run_id: int, approval_id: int,
                      approval_timeout_s: int | None = None) -> WorkerOutcome:
    """Go on with a worker held for ``approval_id`` once its wait ended (the ASL's ResumeWorker):
    approved, the held call runs, exactly as stored; otherwise the model reads why it did not
    (denied by the owner, no answer in time, run cancelled) and carries on. A wait that ended
    without an answer (its timeout) expires the approval first. Used once: a replayed resume
    (a retried invocation) changes nothing and runs nothing."""
    job = _load_job(rt, job_id, owner_id, run_id)
    if done := _finished(job):
        return done
    with rt.pool.connection() as conn, conn.transaction():
        row = approvals.get(conn, owner_id, approval_id)
        if row is None or row["job_id"] != job_id:
            raise JobNotFound(f"approval {approval_id} is not job {job_id}'s")
        if row["status"] == "pending":  # the wait ended unanswered: its timeout (or its task failed)
            approvals.decide(conn, owner_id, approval_id, "expired")
        row = approvals.take(conn, owner_id, approval_id, job_id)
        if row is not None:
            events.emit(conn, run_id, owner_id, "approval_answered",
                        {"job_id": job_id, "approval_id": approval_id, "status": row["status"]})
            if not approvals.pending(conn, owner_id, run_id):
                runs.mark_resumed(conn, owner_id, run_id)
        run = runs.get_run(conn, owner_id, run_id)
        config = agent_settings.resolve(conn, rt.settings, owner_id, "worker")
    worker_id = job["worker_id"]
    if row is None and run is not None and run["status"] in RUN_FINAL:
        # The run was closed while it waited: end_approval_waits took the approval and records the
        # job cancelled (it may still be doing so); this resume (the ASL's, racing it) leaves that to it.
        return WorkerOutcome(job_id, worker_id, "cancelled", None, "the run was closed while the call waited")
    if row is None:  # used already: this is a replay of a resume that ran (or was interrupted)
        return mark_job_failed(rt, job_id, owner_id, run_id,
                               "worker was interrupted after its approval was used (retried invocation); "
                               "partial artifacts kept")
    meta = rt.store.read_metadata(worker_id)
    loop = _Loop.resumed(meta.get("paused") or {})
    loop.wait_ceiling_s = approval_timeout_s
    rt.store.set_paused(worker_id, None)
    thread = rt.store.read_file(worker_id, "thread.jsonl")
    messages = [json.loads(line) for line in thread.splitlines() if line.strip()]
    pending = _unanswered(messages)
    if not pending or pending[0].id != row["tool_call_id"]:
        loop.status, loop.error = "failed", "the held call is not the worker's next call (its thread changed)"
        return _finish(rt, job_id, owner_id, run_id, worker_id, loop)
    approved = None
    if row["status"] == "approved":  # exactly the call the owner approved, as stored with the approval
        pending[0] = ToolCall(row["tool_call_id"], row["tool"], json.dumps(row["arguments"]))
        approved = row["tool_call_id"]
    else:
        message = {"role": "tool", "tool_call_id": row["tool_call_id"], "content": approval_wait.outcome_text(row)}
        messages.append(message)
        rt.store.append_thread(worker_id, message)
        pending = pending[1:]
    if reason := cancellation.stop_requested(rt, job_id, owner_id, run_id):  # closed while it waited
        loop.status, loop.error = "cancelled", reason
        return _finish(rt, job_id, owner_id, run_id, worker_id, loop)
    deadline = _Deadline.of(rt.settings, run_deadline.clock_start(run) if run else None)
    model = job["model"] or config.model
    return _run_loop(rt, job, worker_id, model, config, deadline, loop, messages, pending, approved)


def _unanswered(messages: list[dict[str, Any]]) -> list[ToolCall]:
    """The calls of the last assistant message that have no tool result yet, in order."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last is None:
        return []
    answered = {m.get("tool_call_id") for m in messages[last + 1:] if m.get("role") == "tool"}
    return [ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in messages[last].get("tool_calls") or [] if c["id"] not in answered]


def _cancel_unstarted(rt: Runtime, job_id: int, owner_id: int, run_id: int, reason: str) -> WorkerOutcome:
    with rt.pool.connection() as conn:
        runs.mark_deadline_reached(conn, run_id)
        if jobs.cancel_job(conn, job_id, reason):
            events.emit(conn, run_id, owner_id, "worker_complete",
                        {"job_id": job_id, "worker_id": None, "status": "cancelled", "duration_ms": None})
    return WorkerOutcome(job_id, None, "cancelled", None, reason)


class _WorkerHooks(LoopHooks):
    """A worker's loop: persist every message and tool output as it happens; stop when the user
    cancelled, the deadline passed or a tool failed critically; hold a call the owner's policy asks
    about until the owner answers."""

    def __init__(self, rt: Runtime, worker_id: str, deadline: _Deadline, loop: _Loop, cancel: CancelSignal,
                 job: dict[str, Any], approved: str | None = None) -> None:
        self.rt, self.worker_id, self.deadline, self.loop, self.cancel = rt, worker_id, deadline, loop, cancel
        self.job, self.approved = job, approved
        self.tools: dict[str, Tool] = {}
        self.policy: Gate = approval_gate(rt, job["owner_id"], job["run_id"])
        self._verdict: tuple[str, ToolOutcome | None] | None = None  # hold's decision for the call about to run
        self._call_started: tuple[str, float] | None = None  # (started_at ISO, monotonic) of the running call

    def hold(self, call: ToolCall) -> Stop | None:
        """The owner's policy decides each call here, once, before it runs: ``ask`` holds it (a pending
        approval, and the loop ends: the run's workflow waits for the answer); ``allow`` and ``deny``
        are handed to the call's gate (:meth:`gate`). The call the owner approved runs on resume."""
        self._verdict = None
        if call.id == self.approved:  # exactly the call the owner approved: it runs
            self._verdict = (call.name, None)
            return None
        tool = self.tools.get(call.name)
        args = parse_args(tool, call.arguments) if tool is not None else None
        if args is None or isinstance(args, ToolOutcome):
            return None  # unknown tool or bad arguments: the tool call refuses it with a precise error
        try:
            outcome = self.policy(call.name, args)
        except Exception as exc:  # fail closed: a policy that cannot be checked lets nothing through
            outcome = gate_failed(call.name, exc)
        if outcome is None or outcome.approval is None:
            self._verdict = (call.name, outcome)
            return None
        needed, job = outcome.approval, self.job
        with self.rt.pool.connection() as conn:
            # Two workers of one run asking at the same instant may both pass the count: the cap may
            # be passed by the run's concurrent workers, never by one worker.
            asked = approvals.asked_in_run(conn, job["owner_id"], job["run_id"])
            if asked >= needed.max_asks:
                self._verdict = (call.name, ToolOutcome(text=too_many_asks_text(call.name, asked), ok=False))
                return None
            row = approvals.create(conn, job["owner_id"], job["run_id"], job["id"], call.name, needed.arguments,
                                   call.id, self._stated_reason(call), asked_because=needed.reason)
        self.loop.approval_id = row["id"]
        self.loop.approval_timeout_s = min(needed.expires_in_s, self.loop.wait_ceiling_s or
                                           self.rt.settings.approval_timeout_s)
        return Stop(f"waiting for the owner's approval of {call.name} (approval {row['id']})",
                    status=AWAITING_APPROVAL)

    def _stated_reason(self, call: ToolCall) -> str:
        """The model's own words with ``call``: the text of the reply that made it (already in the
        worker's thread), else the task the worker was given (the supervisor model's words). Data for
        the owner to judge, shown fenced; never Zerg's."""
        thread = self.rt.store.read_file(self.worker_id, "thread.jsonl")
        for line in reversed(thread.splitlines()):
            message = json.loads(line) if line.strip() else {}
            if message.get("role") == "assistant" and any(c.get("id") == call.id for c in message.get("tool_calls") or ()):
                said = (message.get("content") or "").strip()
                if said:
                    return said
                break
        return f"(no words with the call; the worker's task:) {self.job['task']}"

    def gate(self, name: str, args: Any) -> ToolOutcome | None:
        """The worker's :attr:`ToolContext.gate`: the decision :meth:`hold` took for this very call."""
        verdict, self._verdict = self._verdict, None
        if verdict is None or verdict[0] != name:  # the loop holds every call first: never happens
            return gate_failed(name, RuntimeError("the call reached its tool without the policy's decision"))
        return verdict[1]

    def _cancelled(self) -> Stop | None:
        return Stop(self.cancel.reason or "cancelled", status="cancelled") if self.cancel.is_set() else None

    def check(self) -> Stop | None:
        # The signal, not the database: the watcher keeps it current (at once for a cancel taken in
        # this process, within its poll otherwise), so a model call costs no query.
        if stop := self._cancelled():
            return stop
        return self.deadline.stop if self.deadline.at - time.monotonic() <= 0 else None

    def timeout(self) -> float | None:
        return min(self.deadline.at - time.monotonic(), self.rt.settings.llm_timeout_s)

    def message(self, message: dict[str, Any]) -> None:
        self.rt.store.append_thread(self.worker_id, message)

    def tool_started(self, call: ToolCall) -> None:
        self._call_started = (iso(utcnow()), time.monotonic())

    def tool_done(self, call: ToolCall, outcome: ToolOutcome) -> Stop | None:
        path = outcome.artifact_path or self.rt.store.save_tool_output(self.worker_id, call.name, outcome.saved)
        started = self._call_started
        self._call_started = None
        # What the call did in one line (the shell command, the URL...) and when: the evidence under
        # an answer and the run's waterfall show it without reading the artifacts (issue 29).
        self.loop.calls.append({"path": path, "tool": call.name, "ok": outcome.ok, "exit_code": outcome.exit_code,
                                "exit_signal": outcome.exit_signal, "command": call_line(call.arguments),
                                "started_at": started[0] if started else None,
                                "duration_ms": round((time.monotonic() - started[1]) * 1000) if started else None})
        self.loop.outputs.append((path, outcome.text))
        if stop := self._cancelled():  # its command was ended: no further call
            return stop
        return Stop(outcome.critical, status="failed") if outcome.critical else None

    def step_done(self, messages: list[dict[str, Any]]) -> Stop | None:
        return self.deadline.stop if time.monotonic() >= self.deadline.at else None


def _agent_loop(rt: Runtime, job: dict[str, Any], worker_id: str, model: str, config: agent_settings.AgentSettings,
                deadline: _Deadline, loop: _Loop, cancel: CancelSignal, messages: list[dict[str, Any]],
                pending: list[ToolCall] | None = None, approved: str | None = None) -> None:
    settings = rt.settings
    hooks = _WorkerHooks(rt, worker_id, deadline, loop, cancel, job, approved)
    tools, refused = config.tools(worker_tools())
    tools.update(_mcp_tools(rt, job["owner_id"]))  # the owner's MCP servers' tools (issue 30), by their own names
    hooks.tools = tools
    agent = AgentLoop(
        llm=rt.llm, model=model, tools=tools, refused=refused, hooks=hooks, max_steps=settings.worker_max_iterations,
        temperature=config.temperature, max_tokens=config.max_tokens,
        ctx=ToolContext(settings=settings, deadline=deadline.at, owner_id=job["owner_id"], run_id=job["run_id"],
                        runtime=rt, open_output=partial(rt.store.open_tool_output, worker_id), cancel=cancel,
                        agent="worker", gate=hooks.gate),
        tag=CallTag("worker", job["owner_id"], job["run_id"], job["id"]),
    )
    result = agent.run(messages, loop.spent, pending, steps_taken=loop.resumed_steps)
    if result.held is not None:
        loop.status = AWAITING_APPROVAL
    elif result.stop:
        loop.status, loop.error = result.stop.status or "failed", result.stop.reason
        loop.at_run_deadline = result.stop is deadline.stop and deadline.run_bound
    elif result.exhausted:
        loop.status = "failed"
        loop.error = f"stopped after {settings.worker_max_iterations} iterations without a final answer"
    else:
        loop.final = result.answer or ""


def _mcp_tools(rt: Runtime, owner_id: int) -> dict[str, Tool]:
    """The owner's MCP tools (from their cached listings, a server never listed listed first: on AWS only a
    worker can open a server's secret); none when they cannot be read (said in the log)."""
    from zerg.tools.mcp_tools import owner_tools

    try:
        return owner_tools(rt, owner_id, list_pending=True)
    except Exception as exc:  # the worker goes on with its built-in tools
        log.warning("the owner's MCP tools could not be read: %s: %s", type(exc).__name__, exc)
        return {}


def _synthesise(loop: _Loop) -> str:
    if loop.status == "success":
        lines = [SYNTHESISED_MARK]
    else:
        lines = [f"[Worker {loop.status}: {loop.error}]", SYNTHESISED_MARK if loop.outputs else "No tool output was produced."]
    for path, text in loop.outputs[-3:]:
        lines += ["", f"== {path} ==", text[-2000:]]
    return "\n".join(lines)


def _finish(rt: Runtime, job_id: int, owner_id: int, run_id: int, worker_id: str, loop: _Loop) -> WorkerOutcome:
    store = rt.store
    result = loop.final if (loop.status == "success" and loop.final) else _synthesise(loop)
    store.save_result(worker_id, result)
    usage = loop.spent.usage
    meta = store.complete_worker(
        worker_id,
        loop.status,
        error=loop.error,
        extra={
            "tokens_in": usage.tokens_in,
            "tokens_out": usage.tokens_out,
            "cost_usd": usage.cost_usd,
            "model_ms": round(loop.spent.model_ms + loop.resumed_ms[0]),
            "tool_ms": round(loop.spent.tool_ms + loop.resumed_ms[1]),
            "tool_calls": loop.calls,
        },
    )

    def record() -> None:
        with rt.pool.connection() as conn:
            if loop.at_run_deadline:  # stopped for the run's deadline: the supervisor answers next
                runs.mark_deadline_reached(conn, run_id)
            if jobs.mark_finished(conn, job_id, meta):  # False: a retry whose first commit had landed
                events.emit(conn, run_id, owner_id, "worker_complete", {
                    "job_id": job_id, "worker_id": worker_id, "status": loop.status, "duration_ms": meta["duration_ms"],
                })
            runs.finish_cancel(conn, owner_id, run_id)  # the last worker of a cancelled run closes its events

    retry_unavailable(record, budget_s=rt.settings.db_retry_s, what=f"the outcome of job {job_id}")
    observability.metric("WorkerDuration", meta["duration_ms"] or 0, "Milliseconds", status=loop.status)
    return WorkerOutcome(job_id, worker_id, loop.status, meta["duration_ms"], loop.error)


def mark_job_failed(rt: Runtime, job_id: int, owner_id: int, run_id: int, error: str) -> WorkerOutcome:
    """Fail a job whose worker crashed or was interrupted (the state machine's Catch path).

    Idempotent: a job that already finished keeps its status. Partial artifacts stay; the
    worker gets a result.txt explaining the failure if it had none. Retried while the database
    is unreachable (being idempotent, a retry after a landed commit changes nothing).
    """
    return retry_unavailable(lambda: _mark_job_failed(rt, job_id, owner_id, run_id, error),
                             budget_s=rt.settings.db_retry_s, what=f"the failure of job {job_id}")


def _mark_job_failed(rt: Runtime, job_id: int, owner_id: int, run_id: int, error: str) -> WorkerOutcome:
    job = _load_job(rt, job_id, owner_id, run_id)
    if done := _finished(job):
        return done
    worker_id = job["worker_id"]
    duration_ms = None
    if worker_id is None:
        with rt.pool.connection() as conn:
            jobs.mark_failed_unstarted(conn, job_id, error)
            events.emit(conn, run_id, owner_id, "worker_complete", {
                "job_id": job_id, "worker_id": None, "status": "failed", "duration_ms": None,
            })
            runs.finish_cancel(conn, owner_id, run_id)
        return WorkerOutcome(job_id, None, "failed", None, error)
    store = rt.store
    if not any(f.path == "result.txt" for f in store.list_files(worker_id)):
        store.save_result(worker_id, f"[Worker failed: {error}]")
    meta = store.read_metadata(worker_id)
    if meta.get("status") not in JOB_FINISHED:
        meta = store.complete_worker(worker_id, "failed", error=error)
    duration_ms = meta.get("duration_ms")
    with rt.pool.connection() as conn:
        if jobs.mark_finished(conn, job_id, meta):
            events.emit(conn, run_id, owner_id, "worker_complete", {
                "job_id": job_id, "worker_id": worker_id, "status": meta["status"], "duration_ms": duration_ms,
            })
        runs.finish_cancel(conn, owner_id, run_id)
    return WorkerOutcome(job_id, worker_id, meta["status"], duration_ms, meta.get("error"))


def end_approval_waits(rt: Runtime, owner_id: int, run_id: int) -> None:
    """The run's workers held for the owner's approval run nowhere: once the run is closed, their
    approvals are cancelled and each such job is resumed here, at once, to record it ``cancelled``
    (its loop stops before any call; the held call never runs). Their execution may be stopped
    already: nothing else would end them. Call it with :func:`zerg.workers.cancellation.stop_run_workers`."""
    with rt.pool.connection() as conn:
        if runs.run_status(conn, owner_id, run_id) not in RUN_FINAL:
            return
    for row in approval_wait.cancel_run_waits(rt, owner_id, run_id):
        try:
            resume_worker_job(rt, row["job_id"], owner_id, run_id, row["id"])
        except Exception as exc:  # the orphan sweep closes what this could not
            observability.logger().warning("could not close a job waiting for approval",
                                           extra={"job_id": row["job_id"], "error": str(exc)})
