"""Worker summaries: a ≤150-character, outcome-focused compression of ``result.txt``.

Invariants:
- A summary is derived data: it never changes a job's status, and its failure never fails
  anything else. Any error (model down, timeout, missing result) falls back to truncation of
  ``result.txt`` and is recorded in ``summary_meta.error``.
- ``summary_meta`` = ``{version, model, generated_at, error}``; ``model`` is
  ``"truncation-fallback"`` when the model was not used.
- The worker's result is untrusted text (it may repeat anything a tool printed): the model gets it
  fenced as data in the user message (:mod:`zerg.llm.untrusted`), with the rule in the system message.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zerg.llm import CallTag, ChatModel, Usage
from zerg.llm.untrusted import PROMPT_RULE, Fence
from zerg.runs import events, jobs
from zerg.timestamps import iso

if TYPE_CHECKING:
    from zerg.runtime import Runtime

SUMMARY_VERSION = 1
MAX_CHARS = 150
SUMMARY_TIMEOUT_S = 5.0
FALLBACK_MODEL = "truncation-fallback"

SYSTEM = "You summarise the result of a worker agent's task for a list of past work.\n\n" + PROMPT_RULE

PROMPT = """Task: {task}
Result:
{result}

Write a summary of at most {limit} characters focusing on outcomes, not actions.
Be factual and concise. Do NOT add status judgments.
Example: "Backup completed 157GB in 17s, no errors found\""""


def _clip(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def extract_summary(
    llm: ChatModel | None, model: str, task: str, result: str, tag: CallTag | None = None
) -> tuple[str, dict[str, Any], Usage]:
    """(summary, summary_meta, usage); never raises."""
    now = iso(datetime.now(timezone.utc))
    try:
        if llm is None:
            raise RuntimeError("no summary model available")
        excerpt = result[:1000]
        fenced = Fence([excerpt]).wrap(excerpt, "the worker's result")  # fresh marker per call
        reply = llm.complete(
            [{"role": "system", "content": SYSTEM},
             {"role": "user", "content": PROMPT.format(task=task[:500], result=fenced, limit=MAX_CHARS)}],
            model=model,
            max_tokens=60,
            timeout=SUMMARY_TIMEOUT_S,
            tag=tag,
        )
        summary = _clip(reply.content.strip().strip('"'))
        if not summary:
            raise RuntimeError("the model returned an empty summary")
        return summary, {"version": SUMMARY_VERSION, "model": model, "generated_at": now, "error": None}, reply.usage
    except Exception as exc:  # best-effort by contract: fall back, record why
        meta = {"version": SUMMARY_VERSION, "model": FALLBACK_MODEL, "generated_at": now,
                "error": f"{type(exc).__name__}: {exc}"[:500]}
        return _clip(result) or _clip(task), meta, Usage()


def summarize_job(rt: "Runtime", job_id: int, owner_id: int, run_id: int) -> dict[str, Any]:
    """Summarise a finished job, write metadata + index, emit ``worker_summary_ready``.

    Returns ``{job_id, worker_id, summary}`` (summary None when there is nothing to summarise).
    """
    with rt.pool.connection() as conn:
        job = jobs.get_run_job(conn, job_id, owner_id, run_id)
    if job is None:
        return {"job_id": job_id, "worker_id": None, "summary": None}
    worker_id = job["worker_id"]
    result = ""
    if worker_id:
        try:
            result = rt.store.read_file(worker_id, "result.txt")
        except Exception:
            result = ""
    if not result:
        result = f"[{job['status']}] {job['error'] or 'no result'}"
    try:  # a cancelled worker (e.g. at the run's deadline) is summarised by truncation: no model call
        llm = None if job["status"] == "cancelled" else rt.llm
    except Exception:  # no model configured: still a summary, by truncation
        llm = None
    summary, meta, usage = extract_summary(llm, rt.settings.summary_model, job["task"], result,
                                           CallTag("summary", owner_id, run_id, job_id))
    if worker_id:
        rt.store.update_summary(worker_id, summary, meta)  # best-effort by its own contract
    with rt.pool.connection() as conn:
        jobs.set_summary(conn, job_id, summary, meta, usage)
        events.emit(conn, run_id, owner_id, "worker_summary_ready",
                    {"job_id": job_id, "worker_id": worker_id, "summary": summary})
    return {"job_id": job_id, "worker_id": worker_id, "summary": summary}
