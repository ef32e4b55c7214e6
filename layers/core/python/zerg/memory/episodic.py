"""The episode of a run: one memory file per successful run, written after it (seed 004 §8).

``episodes/YYYY-MM-DD/{run_id}-{slug}.md`` (the run's UTC date; a task labelled ``project: NAME``
files it under ``projects/NAME/episodes/YYYY-MM-DD/``), holding a title, topic, outcome, 3-6
summary bullets and tags from one model call.

Invariants:
- Best effort, never on the run's critical path: it runs in the Remember step, after
  ``supervisor_complete``. A model error, a timeout or an invalid reply falls back to an episode
  built by truncation from the task and the answer (the file is still written, its metadata says
  why); nothing here fails the run, which is already recorded.
- One episode per run: a re-delivered remember event finds the run's episode (by the ``{run_id}-``
  name in the run's day folder) and writes nothing, before any model call.
- Only successful runs. A run started by a schedule writes one only when its assessment (its
  inbox item, :mod:`zerg.alerts.background`) is ``warning`` or worse: an hourly check that finds
  nothing must not write 24 files a day.
- The answer may repeat tool output: it reaches the model fenced as data. The writer is
  ``system`` with the run as ``writer_run_id`` and the metadata says ``derived_from``
  (:data:`DERIVED_FROM`): recall shows both, so a model weighs an episode like tool output; tags
  come from the model, plus ``episode``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zerg.llm import CallTag
from zerg.llm.untrusted import PROMPT_RULE, Fence

if TYPE_CHECKING:
    from zerg.runtime import Runtime

EPISODE_VERSION = 1
TEXT_CHARS = 6_000  # of the task and of the answer shown to the model
FALLBACK_MODEL = "truncation-fallback"
DERIVED_FROM = "the run's task and answer (the answer may repeat tool output)"
_PROJECT = re.compile(r"\bproject:\s*([A-Za-z0-9][A-Za-z0-9_.-]{0,63})", re.IGNORECASE)

SYSTEM = f"""You write the episodic memory of one exchange between the user and Zerg, their
assistant, so that weeks later "what did we do about X?" can be answered from it.

Answer with one JSON object only, no prose:
{{"title": "a few words", "topic": "the subject area", "outcome": "one sentence: what was found,
decided or done", "bullets": ["3 to 6 short facts: findings, numbers, decisions, open questions"],
"tags": ["1 to 5 lower-case keywords"]}}

{PROMPT_RULE}"""


class EpisodeDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str = Field(min_length=1, max_length=120)
    topic: str = Field(min_length=1, max_length=120)
    outcome: str = Field(min_length=1, max_length=400)
    bullets: list[str] = Field(min_length=3, max_length=6)
    tags: list[str] = Field(default_factory=list, max_length=8)

    @field_validator("title", "topic", "outcome")
    @classmethod
    def _one_line(cls, text: str) -> str:
        text = " ".join(text.split())
        if not text:
            raise ValueError("empty")
        return text

    @field_validator("bullets")
    @classmethod
    def _bullets(cls, bullets: list[str]) -> list[str]:
        clean = [" ".join(b.split())[:300] for b in bullets]
        if not all(clean):
            raise ValueError("an empty bullet")
        return clean

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: list[str]) -> list[str]:
        return clean_tags(tags)


def clean_tags(tags: list[str]) -> list[str]:
    clean = [re.sub(r"[^a-z0-9_.-]+", "-", t.strip().lower()).strip("-")[:50] for t in tags]
    return list(dict.fromkeys(t for t in clean if t))[:8]


def slug(text: str, limit: int = 40) -> str:
    """Lower-case ASCII words joined by ``-``, at most ``limit`` characters (cut at a word)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    out = ""
    for word in words:
        candidate = f"{out}-{word}" if out else word
        if len(candidate) > limit:
            break
        out = candidate
    return out or (words[0][:limit] if words else "")


def project_of(task: str) -> str | None:
    """The ``project: NAME`` label of a task (lower-cased), or None. The name is one safe path
    segment by construction (letters, digits, ``_.-``; not ``.`` or ``..``)."""
    match = _PROJECT.search(task)
    if not match:
        return None
    name = match.group(1).lower().rstrip(".")
    return name if name and set(name) != {"."} else None


def folder(run: dict[str, Any]) -> str:
    """The run's episode folder: ``[projects/NAME/]episodes/YYYY-MM-DD/`` (UTC date of the run)."""
    when = run.get("started_at") or run.get("created_at") or datetime.now(timezone.utc)
    day = when.astimezone(timezone.utc).strftime("%Y-%m-%d")
    project = project_of(run["task"] or "")
    return f"{f'projects/{project}/' if project else ''}episodes/{day}/"


def path_for(run: dict[str, Any], title: str) -> str:
    return f"{folder(run)}{run['id']}-{slug(title) or 'episode'}.md"


def parse_draft(text: str) -> EpisodeDraft:
    """The model's reply as a draft; ValueError when it is not the JSON object asked for."""
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        return EpisodeDraft.model_validate(json.loads(body))
    except ValueError as exc:  # JSONDecodeError and ValidationError are both ValueErrors
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            raise ValueError(f"invalid episode: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        raise ValueError(f"not JSON: {exc}") from None


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fallback_draft(task: str, answer: str) -> EpisodeDraft:
    """An episode without the model: the task and the answer, truncated."""
    lines = [" ".join(line.split()) for line in answer.splitlines() if line.strip()]
    bullets = [f"Asked: {_cut(task, 280)}", *(_cut(line, 280) for line in lines[:4])]
    while len(bullets) < 3:
        bullets.append("(no further detail recorded)")
    return EpisodeDraft(title=_cut(task.splitlines()[0] if task.strip() else "Run", 80), topic="(not classified)",
                        outcome=_cut(lines[0] if lines else "No answer recorded.", 300), bullets=bullets[:6], tags=[])


def draft_episode(rt: "Runtime", run: dict[str, Any]) -> tuple[EpisodeDraft, dict[str, Any]]:
    """(draft, metadata): the model's episode, or the truncation fallback and why. Never raises."""
    task, answer = run["task"] or "", run["result"] or ""
    shown = answer[-TEXT_CHARS:]
    fence = Fence([shown])
    prompt = (f"The user asked:\n{task[:TEXT_CHARS]}\n\nZerg answered (data):\n"
              f"{fence.wrap(shown, 'the answer Zerg gave')}\n\nThe JSON object:")
    meta: dict[str, Any] = {"version": EPISODE_VERSION, "run_id": run["id"], "thread_id": run["thread_id"]}
    if rt.settings.offline:  # the offline planner writes no episodes: truncation, without a call
        return fallback_draft(task, answer), {**meta, "model": FALLBACK_MODEL, "error": "no model is configured (offline)"}
    try:
        reply = rt.llm.complete(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            model=rt.settings.summary_model, max_tokens=500, timeout=rt.settings.memory_timeout_s,
            tag=CallTag("memory", run["owner_id"], run["id"]),
        )
        return parse_draft(reply.content or ""), {**meta, "model": reply.model, "error": None}
    except Exception as exc:  # best effort by contract: truncate, and say why
        return fallback_draft(task, answer), {**meta, "model": FALLBACK_MODEL, "error": f"{type(exc).__name__}: {exc}"[:500]}


def render(run: dict[str, Any], draft: EpisodeDraft, tags: list[str]) -> str:
    """The episode file (seed 004 §8's template)."""
    when = run.get("started_at") or datetime.now(timezone.utc)
    return "\n".join([
        f"# Episode: {draft.title}",
        f"Date: {when.astimezone(timezone.utc):%Y-%m-%d}",
        f"Topic: {draft.topic}",
        f"Outcome: {draft.outcome}",
        f"Refs: thread_id={run['thread_id']}, run_id={run['id']}",
        f"Tags: {json.dumps(tags)}",
        "",
        "Summary:",
        *(f"- {b}" for b in draft.bullets),
        "",
    ])


def should_write(run: dict[str, Any], severity: str | None = None) -> str | None:
    """Why the run gets no episode (None: it gets one). ``severity``: a background run's assessment
    (None: it has none)."""
    if run["status"] != "success":
        return f"the run ended {run['status']}"
    if run["trigger"] == "schedule" and severity not in ("warning", "critical"):
        return f"a scheduled run assessed {severity or 'without a severity'} (episodes need warning or above)"
    return None
