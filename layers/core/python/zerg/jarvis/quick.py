"""Quick mode (seed 2.2 mode A): answer a single-fact utterance directly, without a run.

Three ways to answer, cheapest first: the clock (the owner's time zone, computed, no model), the
owner's memory for "what do you remember about X" (the memory layer, fenced as data, one model
call; nothing found is said without one), otherwise one model call (component ``quick``) that sees
the owner's recent thread.

Invariants:
- One brain: a quick turn is stored on the owner's one thread like any other, the utterance and
  the answer (metadata ``{"mode": "quick"}``, no run), in one transaction after the answer exists;
  so later supervisor runs see it, and a failed model call leaves nothing on the thread.
- Owner-scoped: the thread, the memory, the time zone and ``failed_run_id`` are the owner's only;
  another owner's run is "not found", as a missing one.
- Memory and the thread's compaction summaries reach the model fenced as data, never in the system
  prompt (:mod:`zerg.llm.untrusted`); an answer written from them is marked ``read_untrusted``, so
  later runs see it as data too (:func:`zerg.supervisor.context.replayed`).
- A request the quick model says needs tools (its answer is the word ``HAND-OFF``) is refused with
  409 ``needs_supervisor`` and nothing stored: the client starts a supervisor run instead, and no
  hand-off sentence ever stands in the thread as an answer.
- Seed 8.4: after a run that failed or timed out (``failed_run_id``), the answer starts with a short
  apology that the deeper check failed. Not after a run stopped at its budget (issue 27): 409, no
  model call (a budget stops spending; that run answered with what its workers found).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.jarvis.intent import CLOCK, MEMORY_RECALL, normalise
from zerg.llm import CallTag, LLMError
from zerg.llm.untrusted import PROMPT_RULE, UNTRUSTED, fence_messages, reads_untrusted

if TYPE_CHECKING:
    from zerg.runtime import Runtime

QUICK_MARK = {"mode": "quick"}
FALLBACK_STATUSES = ("failed", "timeout", "interrupted")  # runs whose failure quick mode stands in for
HAND_OFF = "HAND-OFF"  # the quick model's word for "this needs tools": never stored, never shown
NEEDS_TOOLS = ("That needs tools, and the deeper check that had them did not finish; ask again to start a new "
               "check.")
THREAD_BYTES = 8_000  # of recent thread the quick model sees
THREAD_MESSAGES = 20  # at most this many of its newest messages (with the compaction summaries)
MAX_TOKENS = 400
MEMORY_LABEL = "memory recall: what the owner's long-term memory holds on the topic"
TOPIC_CHARS = 200

QUICK_PROMPT = f"""\
You are Jarvis, a personal assistant, answering in quick mode: one short, direct answer (at most a
few sentences), from general knowledge, the conversation so far and any memory given to you. You
have no tools in this mode: if the request needs tools (servers, files, the web, mail, schedules)
or a real investigation, answer with the single word HAND-OFF and nothing else (the request then
goes to a run with tools), and do not make anything up.

{PROMPT_RULE}"""


class QuickRefused(Exception):
    """The quick answer cannot be given; ``status``/``error``/``message`` are what the API answers."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


@dataclass(frozen=True)
class QuickAnswer:
    answer: str
    thread_id: int
    message_ids: list[int]  # [the user's message, the answer]
    source: str  # clock, memory or model

    def as_dict(self) -> dict[str, Any]:
        return {"mode": "quick", "answer": self.answer, "thread_id": self.thread_id, "message_ids": self.message_ids}


def is_hand_off(reply: str) -> bool:
    """Whether the quick model answered with its hand-off word (case, quotes and a full stop ignored)."""
    return reply.strip().strip("\"'`*.").upper() == HAND_OFF


def apology(run_id: int, status: str) -> str:
    what = "timed out" if status == "timeout" else "failed"
    return f"Sorry, the deeper check (run {run_id}) {what}, so here is a quick answer instead."


def clock_answer(now: datetime, tz_name: str) -> str:
    """The time and date in the owner's zone, in words."""
    from zerg import timezones

    try:
        zone = timezones.check_timezone(tz_name)
    except ValueError:  # the policy validates its zone; a row older than the check falls back to UTC
        zone, tz_name = timezones.check_timezone("UTC"), "UTC"
    local = now.astimezone(zone)
    return f"It's {local:%H:%M} on {local:%A}, {local.day} {local:%B %Y} ({tz_name} time)."


def memory_topic(text: str) -> str:
    """What a "what do you remember about X" question is about: X (or the whole question)."""
    topic = MEMORY_RECALL.sub("", text, count=1).strip(" ?.!,")
    return (topic or text)[:TOPIC_CHARS]


OFFLINE_ANSWER = ("(Offline: no model is configured.) In quick mode I can tell the time and what I remember; "
                  "ask the supervisor for anything else.")


def _ask(rt: "Runtime", owner_id: int, messages: list[dict[str, Any]]) -> str:
    """One quick-model call; QuickRefused (nothing stored) when the model cannot answer."""
    if rt.settings.offline:  # the offline playbook plans runs; it has nothing to say here
        return OFFLINE_ANSWER
    from zerg.alerts.budget import SpendingCapReached

    model = rt.settings.quick_model or rt.settings.supervisor_model
    try:
        result = rt.llm.complete(fence_messages(messages), model=model, max_tokens=MAX_TOKENS,
                                 timeout=rt.settings.quick_timeout_s, tag=CallTag("quick", owner_id, None))
    except SpendingCapReached as exc:
        raise QuickRefused(429, "spending_cap_reached", exc.state.message("no quick answer was made")) from None
    except LLMError as exc:
        observability.logger().warning("quick answer: the model failed", extra={"owner_id": owner_id,
                                                                                  "reason": str(exc)[:300]})
        raise QuickRefused(503, "unavailable", f"the quick answer could not be made: {str(exc)[:300]}; "
                                               "nothing was stored, try again") from None
    answer = result.content.strip()
    if not answer:
        raise QuickRefused(503, "unavailable", f"the quick model {model} gave an empty answer; nothing was stored, "
                                               "try again")
    return answer


def _context(rt: "Runtime", owner_id: int, now: datetime, tz_name: str) -> list[dict[str, Any]]:
    """The system prompt (with the owner's clock) and the owner's recent thread: its summaries and
    newest messages, a short view (a quick answer needs the last turns, not the whole story)."""
    from dataclasses import replace

    from zerg.runs import threads
    from zerg.supervisor.context import load_thread, thread_view

    system = {"role": "system", "content": f"{QUICK_PROMPT}\n\nNow: {clock_answer(now, tz_name)}"}
    with rt.pool.connection() as conn:
        thread = threads.get_thread(conn, owner_id)
        loaded = load_thread(conn, owner_id, thread["id"]) if thread else None
    if loaded is None:
        return [system]
    older = max(0, len(loaded.messages) - THREAD_MESSAGES)
    recent = replace(loaded, messages=loaded.messages[older:], unloaded=loaded.unloaded + older)
    return [system, *thread_view(recent, THREAD_BYTES)]


def _answer(rt: "Runtime", owner_id: int, text: str, now: datetime, tz_name: str) -> tuple[str, str, bool]:
    """(answer, source, whether it was written from untrusted text) for ``text``."""
    if CLOCK.search(text):
        return clock_answer(now, tz_name), "clock", False
    messages = _context(rt, owner_id, now, tz_name)
    if MEMORY_RECALL.search(text):
        from zerg.memory.recall import memory_layer

        topic = memory_topic(text)
        layer = memory_layer(rt, owner_id, topic)
        if layer is None:
            return f"I don't remember anything about {topic}.", "memory", False
        if rt.settings.offline:  # no model to phrase it: what memory holds, as it is
            found = layer.split("\n", 2)[-1]  # without the layer's header lines, which speak to the model
            return f"Here is what I remember about {topic}:\n{found}", "memory", True
        messages.append({"role": "user", "content": layer, UNTRUSTED: MEMORY_LABEL})
        messages.append({"role": "user", "content": text})
        return _ask(rt, owner_id, messages), "memory", True
    messages.append({"role": "user", "content": text})
    return _ask(rt, owner_id, messages), "model", reads_untrusted(messages)


def answer(rt: "Runtime", owner_id: int, utterance: str, failed_run_id: int | None = None) -> QuickAnswer:
    """Answer ``utterance`` in quick mode and store the turn on the owner's thread."""
    from zerg.notify.policy import timezone_of
    from zerg.runs import store as runs
    from zerg.runs import threads
    from zerg.timestamps import utcnow

    text = normalise(utterance)
    sorry = None
    with rt.pool.connection() as conn:
        if failed_run_id is not None:
            run = runs.get_run(conn, owner_id, failed_run_id)
            if run is None:
                raise QuickRefused(404, "not_found", f"run {failed_run_id} not found")
            if run["status"] not in FALLBACK_STATUSES:
                raise QuickRefused(409, "conflict", f"run {failed_run_id} is {run['status']}: quick mode stands in "
                                                    f"only for a run that is {', '.join(FALLBACK_STATUSES)}")
            if run["budget_stopped_at"] is not None:  # a budget stops spending: no model call stands in for it
                raise QuickRefused(409, "budget_reached", f"run {failed_run_id} stopped at its budget: quick mode "
                                                          "does not spend past it; the run's answer is what its "
                                                          "finished workers found")
            sorry = apology(failed_run_id, run["status"])
        tz_name = timezone_of(conn, owner_id) or "UTC"
    reply, source, untrusted = _answer(rt, owner_id, text, utcnow(), tz_name)
    if is_hand_off(reply):  # the quick model cannot answer it: a run with tools must (nothing stored)
        if sorry is None:
            raise QuickRefused(409, "needs_supervisor", "this needs tools or an investigation: start a supervisor "
                                                        "run (POST /api/jarvis/supervisor); nothing was stored")
        reply = NEEDS_TOOLS  # standing in for a failed run: no second hand-off to loop on
    if sorry:
        reply = f"{sorry}\n\n{reply}"
    meta = {**QUICK_MARK, **({"failed_run_id": failed_run_id} if failed_run_id is not None else {}),
            **({"read_untrusted": True} if untrusted else {})}
    with rt.pool.connection() as conn, conn.transaction():
        thread_id = threads.find_or_create_thread(conn, owner_id)
        ids = threads.append_messages(conn, owner_id, thread_id, None,
                                      [("user", utterance.strip(), dict(QUICK_MARK)), ("assistant", reply, meta)])
    observability.metric("QuickAnswers", 1, "Count", source=source)
    return QuickAnswer(reply, thread_id, ids, source)
