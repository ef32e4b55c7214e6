"""The supervisor: plans, spawns workers, reasons over their evidence, answers.

Each action is one stateless Lambda invocation; everything is rehydrated from the database:

- ``plan``: build the working conversation (prompt, the thread's recent history, the task) and run
  the tool loop until the model answers or calls ``spawn_worker``.
- ``resume``: give every pending ``spawn_worker`` call its worker's outcome, continue the loop.
- ``finalize``: commit the task and the answer to the thread; ``fail``: record the failure.

Invariants:
- Spawning ends the turn: the state machine fans the new jobs out and calls ``resume``.
- The evidence mount of the run is injected into *every* supervisor inference of the run and is
  never stored (not in the working messages, not in the thread).
- Bounded: spawn rounds, workers per run and model steps per turn come from configuration; past a
  bound the model is told so and must answer with what it has.
- Re-spawning an identical task within a run reuses its job.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from zerg import events, runs
from zerg.evidence import build_evidence_mount
from zerg.llm import Usage
from zerg.runtime import Runtime
from zerg.tools import ToolContext, invoke
from zerg.tools.base import Tool, ToolOutcome, parse_args

SUPERVISOR_PROMPT = """\
You are the Zerg supervisor: the one brain of a personal assistant. You coordinate disposable
workers that have real shells (ssh_exec on the user's servers, a local sandbox, HTTP).

- For anything that needs commands, files, servers or investigation, call spawn_worker(task)
  with one clear, self-contained task per worker; spawn several at once when they are independent.
- Answer simple questions directly. Use list_workers / grep_workers / read_worker_result to reuse
  past work instead of repeating it.
- When workers finish you receive their outcomes, and an INTERNAL EVIDENCE block with the raw tail
  of their tool outputs. Ground every claim in that evidence; say which worker (job id) it came from.
  Trust a worker's status (success/failed/timeout), not its prose. If a worker failed, say so and
  answer with what the others found.
- Be concise: lead with the answer, then the key numbers."""

PENDING = "zerg_pending_job"  # marks a spawn_worker tool message awaiting its worker's outcome
OUTCOME_RESULT_BYTES = 4_000


class SpawnArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=8_000, description="One self-contained task for a worker")
    model: str | None = Field(default=None, min_length=1, max_length=100, description="Worker model id (optional)")


SPAWN_TOOL = Tool(
    "spawn_worker",
    "Start a disposable worker agent (with ssh_exec, container_exec, http_request) on one task. "
    "You receive its outcome when it finishes.",
    SpawnArgs,
    run=lambda args, ctx: ToolOutcome(text="spawn_worker is handled by the supervisor loop"),
)


def supervisor_tools() -> dict[str, Tool]:
    from zerg.tools import clock, http
    from zerg.tools.workers import TOOLS as WORKER_QUERY_TOOLS

    return {t.name: t for t in (SPAWN_TOOL, *WORKER_QUERY_TOOLS, clock.TOOL, http.TOOL)}


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
    if run["status"] in runs.FINAL:  # cancelled meanwhile: nothing more to do
        return {"jobs": [], "done": True}
    with rt.pool.connection() as conn:
        history = runs.thread_history(conn, owner_id, thread_id)
        events.emit(conn, run_id, owner_id, "supervisor_thinking", {"message": "Analyzing your request..."})
    messages = [{"role": "system", "content": SUPERVISOR_PROMPT}, *history, {"role": "user", "content": run["task"]}]
    return _turn(rt, run, messages)


def resume(rt: Runtime, run_id: int, owner_id: int, thread_id: int) -> dict[str, Any]:
    run = _load(rt, run_id, owner_id, thread_id)
    if run["status"] in runs.FINAL:
        return {"jobs": [], "done": True}
    messages = list(run["working_messages"])
    count = _fill_pending(rt, run, messages)
    with rt.pool.connection() as conn:
        events.emit(conn, run_id, owner_id, "supervisor_thinking",
                    {"message": f"Reviewing results from {count} worker(s)..."})
    return _turn(rt, run, messages)


def _fill_pending(rt: Runtime, run: dict[str, Any], messages: list[dict[str, Any]]) -> int:
    """Give every pending spawn_worker call its worker's outcome; return how many workers."""
    pending = {m[PENDING] for m in messages if m.get(PENDING)}
    with rt.pool.connection() as conn:
        rows = conn.execute(
            "SELECT * FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND id = ANY(%s)",
            (run["owner_id"], run["id"], list(pending)),
        ).fetchall()
    outcomes = {r["id"]: _outcome_text(rt, r) for r in rows}
    for m in messages:
        if m.get(PENDING):
            m["content"] = outcomes.get(m[PENDING], f"worker job {m[PENDING]}: no outcome recorded")
            del m[PENDING]
    return len(rows)


def _outcome_text(rt: Runtime, job: dict[str, Any]) -> str:
    duration = "-" if job["duration_ms"] is None else f"{job['duration_ms'] / 1000:.1f}s"
    lines = [f"Worker job {job['id']} finished: status {job['status']} in {duration}."]
    if job["error"]:
        lines.append(f"Error: {job['error']}")
    if job["summary"]:
        lines.append(f"Summary: {job['summary']}")
    result, size = "", 0
    if job["worker_id"]:
        try:  # only the tail is read: a huge result never costs more than the excerpt
            size = rt.store.size(job["worker_id"], "result.txt")
            result = rt.store.tail(job["worker_id"], "result.txt", OUTCOME_RESULT_BYTES).decode("utf-8", "ignore")
        except Exception:
            result = ""
    if result:
        cut = size > OUTCOME_RESULT_BYTES
        lines += [f"Result{f' (last {OUTCOME_RESULT_BYTES:,} of {size:,} bytes)' if cut else ''}:", result]
    lines.append(f"(full text: read_worker_result({job['id']}); raw tool outputs: read_worker_file)")
    return "\n".join(lines)


def _for_model(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if not k.startswith("zerg_")} for m in messages]


def _spawn(rt: Runtime, run: dict[str, Any], args: SpawnArgs, rounds_left: bool) -> tuple[str | None, int | None, bool]:
    """(error text, job id, is new). Reuses an identical task's job within the run."""
    settings = rt.settings
    with rt.pool.connection() as conn:
        existing = conn.execute(
            "SELECT id, status FROM worker_jobs WHERE owner_id = %s AND run_id = %s AND task = %s ORDER BY id LIMIT 1",
            (run["owner_id"], run["id"], args.task),
        ).fetchone()
        if existing:
            return None, existing["id"], False
        if not rounds_left:
            return (f"ERROR: spawn limit reached ({settings.supervisor_max_rounds} rounds per run): "
                    "answer with the evidence you have"), None, False
        count = conn.execute("SELECT count(*) AS n FROM worker_jobs WHERE run_id = %s", (run["id"],)).fetchone()["n"]
        if count >= settings.supervisor_max_workers:
            return (f"ERROR: worker limit reached ({settings.supervisor_max_workers} per run): "
                    "answer with the evidence you have"), None, False
        from zerg.jobs import create_job

        model = args.model or settings.worker_model
        job_id = create_job(conn, run["owner_id"], args.task, model=model, run_id=run["id"])
        events.emit(conn, run["id"], run["owner_id"], "worker_spawned", {"job_id": job_id, "task": args.task, "model": model})
    return None, job_id, True


def _turn(rt: Runtime, run: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    settings = rt.settings
    tools = supervisor_tools()
    schemas = [t.schema() for t in tools.values()]
    ctx = ToolContext(settings=settings, owner_id=run["owner_id"], run_id=run["id"], runtime=rt)
    usage = Usage()
    rounds = run["spawn_rounds"]
    new_jobs: list[int] = []
    answer: str | None = None
    try:
        for step in range(settings.supervisor_max_steps):
            last = step == settings.supervisor_max_steps - 1
            with rt.pool.connection() as conn:
                mount = build_evidence_mount(conn, rt.store, run["owner_id"], run["id"], settings.evidence_budget_bytes)
            request = _for_model(messages) + ([{"role": "system", "content": mount}] if mount else [])
            reply = rt.llm.complete(request, model=settings.supervisor_model, tools=schemas,
                                    tool_choice="none" if last else None)
            usage.add(reply.usage)
            messages.append(reply.as_message())
            if not reply.tool_calls:
                answer = reply.content.strip() or "I could not produce an answer from the evidence."
                return {"jobs": [], "done": True}
            rounds_left = rounds < settings.supervisor_max_rounds
            for call in reply.tool_calls:
                if call.name == SPAWN_TOOL.name:
                    args = parse_args(SPAWN_TOOL, call.arguments)
                    if isinstance(args, ToolOutcome):  # invalid arguments: told as text, like any tool
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": args.text})
                        continue
                    err, job_id, is_new = _spawn(rt, run, args, rounds_left)
                    if err:
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": err})
                        continue
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": None, PENDING: job_id})
                    if is_new:
                        new_jobs.append(job_id)
                    continue
                with rt.pool.connection() as conn:
                    events.emit(conn, run["id"], run["owner_id"], "supervisor_thinking", {"message": f"Using {call.name}..."})
                outcome = invoke(tools, call.name, call.arguments, ctx)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
            if new_jobs:  # the turn ends: the state machine fans out, resume fills the calls
                rounds += 1
                return {"jobs": new_jobs, "done": False}
            if any(m.get(PENDING) for m in messages):
                # Only reuses of finished jobs: their outcomes are known, so answer the calls now
                # and keep going (within max_steps) instead of ending a turn with nothing to run.
                _fill_pending(rt, run, messages)
        answer = "I stopped before reaching an answer (step limit)."
        return {"jobs": [], "done": True}
    finally:
        with rt.pool.connection() as conn:
            runs.save_working(conn, run["id"], messages, usage, rounds=rounds, answer=answer)


def finalize(rt: Runtime, run_id: int, owner_id: int, thread_id: int) -> dict[str, Any]:
    run = _load(rt, run_id, owner_id, thread_id)
    if run["status"] in runs.FINAL:
        return {"run_id": run_id, "status": run["status"]}
    answer = run["result"] or "The run ended without an answer."
    with rt.pool.connection() as conn:
        closed = runs.complete_run(conn, run, answer)
        status = "success" if closed else runs.get_run(conn, owner_id, run_id)["status"]
    return {"run_id": run_id, "status": status}


def fail(rt: Runtime, run_id: int, owner_id: int, error: Any) -> dict[str, Any]:
    from zerg.lambda_events import describe_step_error

    run = _load(rt, run_id, owner_id)
    if run["status"] in runs.FINAL:
        return {"run_id": run_id, "status": run["status"]}
    # States.Timeout: a state's TimeoutSeconds; Sandbox.Timedout: a Lambda hit its own timeout.
    timed_out = isinstance(error, dict) and error.get("Error") in ("States.Timeout", "Sandbox.Timedout")
    status = "timeout" if timed_out else "failed"
    message = describe_step_error(error, "run timed out" if timed_out else "run failed")
    with rt.pool.connection() as conn:
        if runs.fail_run(conn, run, status, message) is None:
            status = runs.get_run(conn, owner_id, run_id)["status"]
    return {"run_id": run_id, "status": status}
