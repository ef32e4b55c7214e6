"""Thread compaction: past 50 unsummarised messages, the oldest 30 become one summary.

The owner's thread grows forever; the supervisor's prompt must not. :func:`compact` turns the
oldest :data:`BATCH` messages that no summary covers into one ``conversation_summaries`` row, with
one model call (``ZERG_SUMMARY_MODEL``, usage-ledger component ``memory``), once more than
:data:`THRESHOLD` of them are waiting. The context assembler (:mod:`zerg.supervisor.context`) then
shows the summaries and only the messages after them.

Invariants:
- Nothing is deleted or edited: every thread message stays (the thread's identity too); a summary
  replaces its messages in the prompt only.
- Best effort: a model error, a timeout, an empty answer or a database error writes nothing (the
  next call tries again) and never raises into the caller.
- Concurrent compactions of a thread never write overlapping summaries
  (:func:`zerg.memory.summaries.add_summary` settles it in the database).
- Trust: the thread holds the owner's messages and Zerg's answers, and the answers quote tool
  output and fetched text. The transcript is therefore always fenced as data for the summary
  model, and the assembler shows the summary (a model's rewording of that text) fenced as data too.
- No database connection is held during the model call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.llm import CallTag
from zerg.llm.untrusted import PROMPT_RULE, Fence
from zerg.memory import summaries
from zerg.runs import threads

if TYPE_CHECKING:
    from zerg.runtime import Runtime

THRESHOLD = 50  # more unsummarised messages than this: compact
BATCH = 30  # the oldest this many become one summary
MESSAGE_BYTES = 2_000  # of each message in the transcript (head and tail)
SUMMARY_MAX_CHARS = 4_000
MAX_TOKENS = 700
TIMEOUT_S = 30.0

SYSTEM = """\
You compact the oldest part of a long conversation between a user and Zerg, their personal
assistant, into a summary that replaces those messages in Zerg's context from now on.
Keep what later questions may need: facts about the user and their systems (names, hosts, paths,
numbers), decisions, preferences, requests still open, and what Zerg found or did. Drop greetings
and repetition. Write at most 250 words, plain text or short bullets, in the third person
("The user asked…", "Zerg found…").

""" + PROMPT_RULE

PROMPT = "Summarise these {count} messages (ids {first}-{last}), oldest first:\n\n{transcript}"


def _clip(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    head, tail = data[: limit // 3].decode("utf-8", "ignore"), data[-(limit - limit // 3):].decode("utf-8", "ignore")
    return f"{head}\n[... {len(data) - limit:,} bytes not shown ...]\n{tail}"


def transcript(rows: list[dict[str, Any]]) -> str:
    """The messages as one text: ``[user #12]`` / ``[Zerg #13]`` then the (clipped) content."""
    who = {"user": "user", "assistant": "Zerg"}
    return "\n\n".join(f"[{who.get(r['role'], r['role'])} #{r['id']}]\n{_clip(r['content'], MESSAGE_BYTES)}"
                       for r in rows)


def compact(rt: "Runtime", owner_id: int, thread_id: int, *, run_id: int | None = None) -> bool:
    """Summarise the oldest :data:`BATCH` unsummarised messages of the owner's thread when more
    than :data:`THRESHOLD` are waiting. True when a summary was written; never raises."""
    log_extra = {"owner_id": owner_id, "thread_id": thread_id, "run_id": run_id}
    try:
        with rt.pool.connection() as conn:
            after = summaries.last_summarised_id(conn, owner_id, thread_id)
            if threads.count_messages_after(conn, owner_id, thread_id, after) <= THRESHOLD:
                return False
            rows = threads.messages_after(conn, owner_id, thread_id, after, limit=BATCH)
        text = _summarise(rt, owner_id, run_id, rows)
        if not text:
            observability.logger().warning("compaction: the model returned an empty summary", extra=log_extra)
            return False
        with rt.pool.connection() as conn:
            written = summaries.add_summary(conn, owner_id, thread_id, rows[0]["id"], rows[-1]["id"], len(rows),
                                            text, run_id)
        return written is not None
    except Exception:  # best effort by contract: the next compaction tries again
        observability.logger().warning("compaction failed: nothing written", exc_info=True, extra=log_extra)
        return False


def _summarise(rt: "Runtime", owner_id: int, run_id: int | None, rows: list[dict[str, Any]]) -> str:
    body = transcript(rows)
    fenced = Fence([body]).wrap(body, "messages of the conversation")
    reply = rt.llm.complete(
        [{"role": "system", "content": SYSTEM},
         {"role": "user", "content": PROMPT.format(count=len(rows), first=rows[0]["id"], last=rows[-1]["id"],
                                                   transcript=fenced)}],
        model=rt.settings.summary_model, max_tokens=MAX_TOKENS,
        timeout=min(TIMEOUT_S, rt.settings.llm_timeout_s), tag=CallTag("memory", owner_id, run_id),
    )
    return reply.content.strip()[:SUMMARY_MAX_CHARS]
