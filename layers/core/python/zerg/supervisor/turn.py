"""The supervisor: plans, spawns workers, reasons over their evidence, answers.

Each action is one stateless Lambda invocation; everything is rehydrated from the database:

- ``plan``: run the tool loop on the task until the model answers or calls ``spawn_worker``.
- ``resume``: give every pending ``spawn_worker`` call its worker's outcome, continue the loop.
- What the model is shown at each inference (the prompt, the thread, the task, the run's working
  messages, the memory layer, the evidence mount) is assembled in one place, within one budget:
  :mod:`zerg.supervisor.context`. The run stores only its working messages.
- ``finalize``: commit the task and the answer to the thread, the question the run asked (what
  only the owner decides, :mod:`zerg.inbound.directives`) appended in Zerg's words; ``fail``:
  record the failure (a question never shown is never confirmed).
- ``plan`` of a run that is the owner's yes to that question does it in code and answers with the
  confirmation, before any memory, tool or model is involved.
- Every inference that shows the model untrusted text marks the run ``read_untrusted``: its answer
  is replayed to later runs as data (:func:`zerg.supervisor.context.replayed`).
- A run started by a schedule is unattended (background mode): its prompt says so and asks for a
  final ``{severity, headline, details}`` object; ``finalize`` assesses it before closing (an
  ``info`` result stays off the thread). Every closer here (``finalize``, ``fail``, the stop at the
  spending cap) then hands the closed run to :func:`zerg.runs.closing.after_close` (a background
  run's inbox item, notifications and escalation; a reply's run's answer back on its channel).
- A run started by an email or SMS reply shows its supervisor what the reply answers, the fenced
  ``[REPLY CONTEXT]`` layer (:mod:`zerg.inbound.reply_context`), computed once per turn, never stored.

Invariants:
- Spawning ends the turn: the state machine fans the new jobs out and calls ``resume``.
- The evidence mount of the run is injected into *every* supervisor inference of the run and is
  never stored (not in the working messages, not in the thread). It is raw tool output, so it is a
  user-role message fenced as untrusted data, never a system message; so are worker outcomes
  (tool messages). An outcome carries status, duration, error, summary and pointers; the worker's
  result and tool output reach the model through the mount only (no excerpt twice).
- The memory layer (``[MEMORY CONTEXT]``, :mod:`zerg.memory.recall`) is computed once per plan or
  resume and handed to the assembler, which shows it fenced in a user-role message, never stored.
  "Remember that ..." notes are written at plan time before the first model call
  (:mod:`zerg.memory.notes`); the model is told in a Zerg-written working message.
- Bounded: spawn rounds, workers per run and model steps per turn come from configuration; past a
  bound the model is told so and must answer with what it has.
- Re-spawning an identical task within a run reuses its job.
- The run's deadline (:mod:`zerg.runs.deadline`): past its answer-by time nothing more is spawned
  and the supervisor gets one last inference, without tools, told which workers did not finish; the
  answer (followed by a system-written line naming them) ends the run ``timeout`` on the thread.
- Past the owner's daily spending cap (:mod:`zerg.alerts.budget`) the model port refuses the call:
  the run ends ``failed`` with the cap's message at once (no answer, no retry). So does a budgeted
  run that asks for a model of unknown price (the message names the setting).
- Past the run's own budget (:class:`~zerg.alerts.budget.RunBudgetReached`, raised in the
  supervisor's or a worker's model call; a worker fails with it and the supervisor's next call
  stops) no model writes the answer: Zerg builds a partial one from the workers that finished
  (their summaries or result excerpts, the others named) and the run ends ``failed`` with the
  budget's message and that answer as its result (``budget_stopped``), on the thread as well.
- The owner's agent configuration (:mod:`zerg.agents.settings`), read once per turn, decides the
  supervisor's model, temperature, max tokens, tools and standing instructions, and the default
  model of the workers it spawns. A tool the configuration removed is refused by the loop.
- The answer streams: every supervisor inference of a run someone watches (not a background run) is
  a streamed model call whose text becomes ``answer_delta`` events as it is written
  (:mod:`zerg.supervisor.answer_stream`); a reply of tool calls withdraws its text. A run that closes
  meanwhile (cancelled) ends the call and the turn with no answer. The stored answer is unchanged.
- ``resume`` and ``finalize`` first reconcile the run's jobs with their workers' ``metadata.json``;
  ``finalize`` also fails a job left with no outcome, so a run never ends ``success`` while a job
  of it stays ``running`` in the index.
"""

from __future__ import annotations

import time
from typing import Any

from zerg import observability, tracing
from zerg.agents import settings as agent_settings
from zerg.alerts import background, budget
from zerg.alerts.budget import ModelPriceUnknown, RunBudgetReached, SpendingCapReached
from zerg.alerts.severity import render as render_assessment
from zerg.llm import CallTag, LLMError, ToolCall
from zerg.llm.port import StreamStopped
from zerg.llm.untrusted import reads_untrusted
from zerg.loop.agent_loop import AgentLoop, AgentUsage, LoopHooks, Stop
from zerg.loop.tool import ToolContext, ToolOutcome, parse_args
from zerg.memory import notes, recall
from zerg.runs import deadline as run_deadline
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.runs.closing import after_close
from zerg.runtime import Runtime
from zerg.statuses import JOB_UNFINISHED, RUN_FINAL, is_background
from zerg.supervisor.answer_stream import AnswerDeltas
from zerg.supervisor.context import SupervisorContext, load_thread, own_messages
from zerg.supervisor.evidence import build_evidence_mount
from zerg.tools.approval_gate import approval_gate
from zerg.tools.catalog import SPAWN_TOOL, SpawnArgs, supervisor_tools
from zerg.workers.reconcile import reconcile_run

PENDING = "zerg_pending_job"  # marks a spawn_worker tool message awaiting its worker's outcome


class RunNotFound(LookupError):
    pass


def _load(rt: Runtime, run_id: int, owner_id: int, thread_id: int | None = None) -> dict[str, Any]:
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
    if run is None or (thread_id is not None and run["thread_id"] != thread_id):
        raise RunNotFound(f"run {run_id} not found for owner {owner_id}")
    return run


def plan(rt: Runtime, run_id: int, owner_id: int, thread_id: int) -> dict[str, Any]:
    run = _load(rt, run_id, owner_id, thread_id)
    if run["status"] in RUN_FINAL:  # cancelled meanwhile: nothing more to do
        return {"jobs": [], "done": True}
    from zerg.inbound import directives  # the replies pipeline: only on a turn, not a cold start

    # The owner's yes to Zerg's question: done in code before any model reads anything.
    confirmed = directives.confirm(rt, run)
    if confirmed is not None:
        with rt.pool.connection() as conn:
            runs.save_working(conn, run_id, [], AgentUsage().usage, rounds=0, answer=confirmed)
        return {"jobs": [], "done": True}
    with rt.pool.connection() as conn:
        events.emit(conn, run_id, owner_id, "supervisor_thinking", {"message": "Planning what to check..."})
    memory = recall.memory_layer(rt, owner_id, run["task"])  # once per invocation, never stored
    saved = notes.remember_explicit(rt, run)  # "remember that ...": written before any model call
    return _turn(rt, run, [{"role": "user", "content": notes.saved_line(saved)}] if saved else [], memory)


def resume(rt: Runtime, run_id: int, owner_id: int, thread_id: int) -> dict[str, Any]:
    run = _load(rt, run_id, owner_id, thread_id)
    if run["status"] in RUN_FINAL:
        return {"jobs": [], "done": True}
    reconcile_run(rt, owner_id, run_id)  # a worker that could not record its outcome: metadata.json says it
    messages = own_messages(run["working_messages"])
    count = _fill_pending(rt, run, messages)
    with rt.pool.connection() as conn:
        events.emit(conn, run_id, owner_id, "supervisor_thinking",
                    {"message": f"Reviewing results from {count} worker(s)..."})
    return _turn(rt, run, messages, recall.memory_layer(rt, owner_id, run["task"]))


def _fill_pending(rt: Runtime, run: dict[str, Any], messages: list[dict[str, Any]]) -> int:
    """Give every pending spawn_worker call its worker's outcome; return how many workers."""
    pending = {m[PENDING] for m in messages if m.get(PENDING)}
    with rt.pool.connection() as conn:
        rows = jobs.run_jobs(conn, run["owner_id"], run["id"], list(pending))
    outcomes = {r["id"]: _outcome_text(rt, r) for r in rows}
    for m in messages:
        if m.get(PENDING):
            m["content"] = outcomes.get(m[PENDING], f"worker job {m[PENDING]}: no outcome recorded")
            del m[PENDING]
    return len(rows)


def _outcome_text(rt: Runtime, job: dict[str, Any]) -> str:
    """The worker's outcome for its spawn_worker call: status, duration, error, summary, pointers.
    Its result.txt and tool outputs reach the model through the evidence mount, not here."""
    duration = "-" if job["duration_ms"] is None else f"{job['duration_ms'] / 1000:.1f}s"
    lines = [f"Worker job {job['id']} finished: status {job['status']} in {duration}."]
    if job["error"]:
        lines.append(f"Error: {job['error']}")
    if job["summary"]:
        lines.append(f"Summary: {job['summary']}")
    size = None
    if job["worker_id"]:
        try:
            size = rt.store.size(job["worker_id"], "result.txt")
        except Exception:  # no result written: the pointers below still say where to look
            size = None
    excerpt = f"result.txt ({size:,} bytes): excerpt in the evidence block; " if size else ""
    lines.append(f"({excerpt}full text: read_worker_result({job['id']}); raw tool outputs: read_worker_file)")
    return "\n".join(lines)


def _spawn(rt: Runtime, run: dict[str, Any], args: SpawnArgs, rounds_left: bool,
           worker_model: str) -> tuple[str | None, int | None, bool]:
    """(error text, job id, is new). Reuses an identical task's job within the run. A worker runs
    ``args.model`` when the supervisor named one, else ``worker_model`` (the owner's worker config)."""
    settings = rt.settings
    with rt.pool.connection() as conn:
        existing = jobs.find_run_job_by_task(conn, run["owner_id"], run["id"], args.task)
        if existing:
            return None, existing["id"], False
        if not rounds_left:
            return (f"ERROR: spawn limit reached ({settings.supervisor_max_rounds} rounds per run): "
                    "answer with the evidence you have"), None, False
        if jobs.count_run_jobs(conn, run["id"]) >= settings.supervisor_max_workers:
            return (f"ERROR: worker limit reached ({settings.supervisor_max_workers} per run): "
                    "answer with the evidence you have"), None, False
        model = args.model or worker_model
        job_id = jobs.create_job(conn, run["owner_id"], args.task, model=model, run_id=run["id"])
        events.emit(conn, run["id"], run["owner_id"], "worker_spawned", {"job_id": job_id, "task": args.task, "model": model})
    return None, job_id, True


class _SupervisorHooks(LoopHooks):
    """A supervisor turn: every inference is assembled by the turn's :class:`SupervisorContext`
    (the evidence mount and the memory layer join it, never stored); spawn_worker calls become jobs
    and end the turn; every other tool says so on the event stream; past the run's answer-by time
    the turn stops so the supervisor answers with what exists."""

    def __init__(self, rt: Runtime, run: dict[str, Any], memory: str | None = None) -> None:
        from zerg.inbound.reply_context import reply_layer  # the replies pipeline: only on a turn, not a cold start

        self.rt, self.run = rt, run
        settings = rt.settings
        with rt.pool.connection() as conn:  # the thread does not change during a turn: read it once
            thread = load_thread(conn, run["owner_id"], run["thread_id"])
            self.agents = agent_settings.resolve_all(conn, settings, run["owner_id"])  # so is the config
        self.context = SupervisorContext(
            budget=settings.context_budget_bytes, thread=thread, task=run["task"], memory=memory,
            mount=self._mount, evidence_cap=settings.evidence_budget_bytes, background=is_background(run),
            reply=reply_layer(rt, run), instructions=self.agents["supervisor"].instructions,
            # The request's own context and preferences (POST /api/jarvis/supervisor): this run's only.
            previous_messages=(run.get("context") or {}).get("previous_messages"),
            verbosity=(run.get("preferences") or {}).get("verbosity"),
        )
        self.rounds = run["spawn_rounds"]
        self.new_jobs: list[int] = []
        left = run_deadline.seconds_left(run_deadline.answer_by(run_deadline.clock_start(run), settings))
        self.answer_by = time.monotonic() + left
        self.hard_deadline = self.answer_by + run_deadline.reserve_s(settings)
        self.answering = False  # the last inference at the deadline: no stop, a bounded wait
        self.read_untrusted = False  # any inference of this turn showed the model untrusted text

    def out_of_time(self) -> bool:
        return self.run["deadline_reached_at"] is not None or time.monotonic() >= self.answer_by

    def check(self) -> Stop | None:
        if not self.answering and time.monotonic() >= self.answer_by:
            return Stop("the run's deadline is near", status="timeout")
        return None

    def timeout(self) -> float | None:
        if not self.answering:
            return None
        return max(1.0, min(self.rt.settings.llm_timeout_s, self.hard_deadline - time.monotonic()))

    def answer_stream(self) -> AnswerDeltas | None:
        if is_background(self.run):  # nobody watches it write: its answer is an assessment object
            return None
        run_id, owner_id = self.run["id"], self.run["owner_id"]

        def emit(payload: dict[str, Any]) -> int | None:
            with self.rt.pool.connection() as conn:
                return events.emit(conn, run_id, owner_id, "answer_delta", payload)

        return AnswerDeltas(emit)

    def request(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        view = self.context.messages(messages)
        self.read_untrusted = self.read_untrusted or reads_untrusted(view)
        return view

    def _mount(self, budget_bytes: int, per_worker_bytes: int) -> str | None:
        with tracing.span("evidence_mount", {"zerg.evidence.budget_bytes": budget_bytes}) as span, \
                self.rt.pool.connection() as conn:  # rebuilt for every inference: it is never kept
            mount = build_evidence_mount(conn, self.rt.store, self.run["owner_id"], self.run["id"],
                                         budget_bytes, per_worker_bytes)
            if span is not None:
                span.set_attribute("zerg.evidence.bytes", len(mount.encode()) if mount else 0)
            return mount

    def handle(self, call: ToolCall) -> dict[str, Any] | None:
        if call.name != SPAWN_TOOL.name:
            return None
        args = parse_args(SPAWN_TOOL, call.arguments)
        if isinstance(args, ToolOutcome):  # invalid arguments: told as text, like any tool
            return {"role": "tool", "tool_call_id": call.id, "content": args.text}
        if self.answering or self.out_of_time():
            return {"role": "tool", "tool_call_id": call.id,
                    "content": "ERROR: the run's deadline is near: answer with the evidence you have"}
        err, job_id, is_new = _spawn(self.rt, self.run, args, self.rounds < self.rt.settings.supervisor_max_rounds,
                                     self.agents["worker"].model)
        if err:
            return {"role": "tool", "tool_call_id": call.id, "content": err}
        if is_new:
            self.new_jobs.append(job_id)
        return {"role": "tool", "tool_call_id": call.id, "content": None, PENDING: job_id}

    def tool_started(self, call: ToolCall) -> None:
        with self.rt.pool.connection() as conn:
            events.emit(conn, self.run["id"], self.run["owner_id"], "supervisor_thinking", {"message": f"Using {call.name}..."})

    def step_done(self, messages: list[dict[str, Any]]) -> Stop | None:
        if self.new_jobs:  # the turn ends: the state machine fans out, resume fills the calls
            self.rounds += 1
            return Stop("spawned")
        if any(m.get(PENDING) for m in messages):
            # Only reuses of finished jobs: their outcomes are known, so answer the calls now
            # and keep going (within max_steps) instead of ending a turn with nothing to run.
            _fill_pending(self.rt, self.run, messages)
        return None


def _turn(rt: Runtime, run: dict[str, Any], messages: list[dict[str, Any]],
          memory: str | None = None) -> dict[str, Any]:
    """One turn of the loop over the run's working ``messages`` (saved after, whatever happens);
    ``memory`` is the memory layer's text for every inference of the turn (None: no layer)."""
    settings = rt.settings
    hooks = _SupervisorHooks(rt, run, memory)
    agent = _agent(rt, run, hooks, settings.supervisor_max_steps)
    spent = AgentUsage()
    answer: str | None = None
    capped: SpendingCapReached | None = None
    try:
        result = None if hooks.out_of_time() else agent.run(messages, spent)
        if result is not None and result.stop and result.stop.status != "timeout":
            return {"jobs": hooks.new_jobs, "done": False}
        if result is None or result.stop:  # the deadline: answer with what exists
            answer = _answer_at_deadline(rt, run, messages, hooks, spent)
        elif result.exhausted:
            answer = "I stopped before reaching an answer (step limit)."
        else:
            answer = result.answer or "I could not produce an answer from the evidence."
        return {"jobs": [], "done": True}
    except SpendingCapReached as exc:  # not a model failure: no retry, no answer; the run ends failed
        capped = exc
        return {"jobs": [], "done": True}
    except StreamStopped:  # the run closed (cancelled) while the model wrote: nothing more to do
        return {"jobs": [], "done": True}
    finally:
        with rt.pool.connection() as conn:
            runs.save_working(conn, run["id"], messages, spent.usage, rounds=hooks.rounds, answer=answer,
                              read_untrusted=hooks.read_untrusted)
        if capped is not None:
            _stop_at_cap(rt, run, capped)


def _stop_at_cap(rt: Runtime, run: dict[str, Any], capped: SpendingCapReached) -> None:
    """The owner's daily spending cap is spent: the run ends ``failed`` with the cap's message (its
    ``error`` event says it), and the owner is told (once a day). The run's own budget: it ends with
    the partial answer of its finished workers; an unknown price: ``failed`` with the message."""
    if isinstance(capped, RunBudgetReached):
        _stop_at_budget(rt, run, capped)
        return
    with rt.pool.connection() as conn:
        closed = runs.fail_run(conn, run, "failed", str(capped)) is not None
    if closed:  # a background run's inbox item says so; a reply gets told
        after_close(rt, run)
    if not isinstance(capped, ModelPriceUnknown):
        budget.tell_owner(rt, run["owner_id"], capped.state, run_id=run["id"])


PARTIAL_EXCERPT = 600  # characters of a finished worker's result in a partial answer (no summary)


def _stop_at_budget(rt: Runtime, run: dict[str, Any], stopped: RunBudgetReached) -> None:
    """The run's budget is spent: the partial answer, built by Zerg (no model call left) from the
    workers that finished, becomes the run's result; the run ends ``failed`` with the budget's message."""
    reconcile_run(rt, run["owner_id"], run["id"])  # a worker that finished but could not record it
    with rt.pool.connection() as conn:
        rows = jobs.run_jobs(conn, run["owner_id"], run["id"])
    answer = partial_answer(rt, rows, str(stopped))
    with rt.pool.connection() as conn:
        closed = runs.stop_at_budget(conn, run, answer, str(stopped), to_thread=not is_background(run))
    if closed:
        after_close(rt, run)


def partial_answer(rt: Runtime, rows: list[dict[str, Any]], reason: str) -> str:
    """What the finished workers found (summary, else an excerpt of result.txt), the others named."""
    finished = [j for j in rows if j["status"] == "success"]
    lines = [f"{reason}", ""]
    if finished:
        lines.append("What the finished workers found:")
    for j in finished:
        text = j["summary"]
        if not text and j["worker_id"]:
            try:
                text = rt.store.read_range(j["worker_id"], "result.txt", 0, PARTIAL_EXCERPT * 4).decode(
                    "utf-8", "replace")[:PARTIAL_EXCERPT]
            except Exception:  # no result written: the task still says what it was
                text = None
        lines.append(f"- worker #{j['id']} ({j['task'][:80]}): {text or 'finished, no result written'}")
    others = [j for j in rows if j["status"] != "success"]
    if others:
        lines.append("Not finished: " + ", ".join(f"#{j['id']} ({j['status']})" for j in others) + ".")
    if not rows:
        lines.append("No worker had started.")
    return "\n".join(lines).strip()


def _agent(rt: Runtime, run: dict[str, Any], hooks: _SupervisorHooks, max_steps: int) -> AgentLoop:
    config = hooks.agents["supervisor"]
    # This run's own tool set first (a scheduled run has no person-only tools), then the owner's filter.
    tools, refused = config.tools(supervisor_tools(background=is_background(run)))
    return AgentLoop(
        llm=rt.llm, model=config.model, tools=tools, refused=refused, hooks=hooks,
        temperature=config.temperature, max_tokens=config.max_tokens,
        ctx=ToolContext(settings=rt.settings, owner_id=run["owner_id"], run_id=run["id"], runtime=rt,
                        agent="supervisor", gate=approval_gate(rt, run["owner_id"], run["id"])),
        tag=CallTag("supervisor", run["owner_id"], run["id"]),
        max_steps=max_steps, answer_on_last_step=True,
    )


def _answer_at_deadline(rt: Runtime, run: dict[str, Any], messages: list[dict[str, Any]],
                        hooks: _SupervisorHooks, spent: AgentUsage) -> str:
    """One last inference, no tools, told which workers did not finish; a system-written line
    naming them follows whatever the model says (or a listing of what exists, if it says nothing)."""
    with rt.pool.connection() as conn:
        runs.mark_deadline_reached(conn, run["id"])
        rows = jobs.run_jobs(conn, run["owner_id"], run["id"])
        events.emit(conn, run["id"], run["owner_id"], "supervisor_thinking",
                    {"message": "Time is nearly up: answering with what exists..."})
    unfinished = [j for j in rows if j["status"] in (*JOB_UNFINISHED, "cancelled")]  # did not finish their task
    named = ", ".join(f"#{j['id']} ({j['task'][:80]})" for j in unfinished)
    messages.append({"role": "user", "content": (
        f"[Zerg] {run_deadline.describe(rt.settings).capitalize()} is near: answer now with what the workers "
        "found, without tools. " + (f"These workers did not finish (cancelled): {named}. Say so in your answer."
                                    if unfinished else "Every worker finished.")
        + (" Answer with the JSON assessment object only." if is_background(run) else ""))})
    hooks.answering = True
    answer = None
    try:
        answer = _agent(rt, run, hooks, 1).run(messages, spent).answer
    except LLMError as exc:  # out of time or the model is down: the listing below still answers
        messages.append({"role": "assistant", "content": f"(no answer from the model: {exc})"})
    if not answer:
        answer = "I ran out of time before I could write an answer. What exists:\n" + "\n".join(
            f"- worker #{j['id']} {j['status']}: {j['summary'] or j['task'][:120]}" for j in rows)
    ids = ", ".join("#%d" % j["id"] for j in unfinished)
    note = f"worker(s) {ids} did not finish" if unfinished else "every worker had finished"
    return f"{answer}\n\n(Stopped at {run_deadline.describe(rt.settings)}: {note}.)"


def finalize(rt: Runtime, run_id: int, owner_id: int, thread_id: int) -> dict[str, Any]:
    from zerg.approvals import question as pending
    from zerg.approvals import requests as approvals
    from zerg.inbound import directives

    run = _load(rt, run_id, owner_id, thread_id)
    if run["status"] in RUN_FINAL:
        return {"run_id": run_id, "status": run["status"]}
    answer = run["result"] or "The run ended without an answer."
    # Never "success" while a job of the run is still running in the index (its metadata may say failed).
    reconcile_run(rt, owner_id, run_id, close_unfinished=True)
    at_deadline = run["deadline_reached_at"] is not None
    status = "timeout" if at_deadline else "success"
    message = f"run timed out: {run_deadline.describe(rt.settings)}; answered with what existed" if at_deadline else None
    # A background run is assessed before it closes: its severity decides whether it joins the thread.
    assessment = background.assess_closing(rt, run, status, answer, message) if is_background(run) else None
    shown = {"to_thread": assessment.on_thread, "thread_answer": render_assessment(assessment)} if assessment else {}
    with rt.pool.connection() as conn:
        question = directives.questions_of(conn, run)  # what only the owner decides, in Zerg's words
        conn.commit()  # the close below is its own transaction
        answer = pending.disarm(answer)
        if question:
            answer = f"{answer}\n\n{question}"
        if at_deadline:
            closed = runs.complete_at_deadline(conn, run, answer, message, **shown)
        else:
            closed = runs.complete_run(conn, run, answer, **shown)
        if closed and question:
            approvals.mark_directives_shown(conn, owner_id, run_id)
            conn.commit()
        if not closed:
            status = runs.get_run(conn, owner_id, run_id)["status"]
    if closed:  # the inbox item and the notifications, or a reply's answer (best effort)
        after_close(rt, run, assessment)
    return {"run_id": run_id, "status": status}


def fail(rt: Runtime, run_id: int, owner_id: int, error: Any) -> dict[str, Any]:
    from zerg.handler_input import describe_step_error

    run = _load(rt, run_id, owner_id)
    if run["status"] in RUN_FINAL:
        return {"run_id": run_id, "status": run["status"]}
    # States.Timeout: a state's TimeoutSeconds; Sandbox.Timedout: a Lambda hit its own timeout.
    timed_out = isinstance(error, dict) and error.get("Error") in ("States.Timeout", "Sandbox.Timedout")
    status = "timeout" if timed_out else "failed"
    message = describe_step_error(error, "run timed out" if timed_out else "run failed")
    try:  # the error event's partial results then show what the workers' metadata.json says
        reconcile_run(rt, owner_id, run_id)
    except Exception:  # best effort: recording the failure matters more
        observability.logger().warning("jobs not reconciled before failing the run", exc_info=True,
                                       extra={"run_id": run_id})
    with rt.pool.connection() as conn:
        closed = runs.fail_run(conn, run, status, message) is not None
        if not closed:
            status = runs.get_run(conn, owner_id, run_id)["status"]
    if closed:
        after_close(rt, run)
    return {"run_id": run_id, "status": status}
