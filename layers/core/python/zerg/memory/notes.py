"""Notes the user asks Zerg to keep: "Remember that …", "keep in mind …", "save this …".

Invariants:
- Found by a deterministic pattern at the start of the task or of one of its sentences ("remember
  that|this|:", "keep (this) in mind", "save this"; case-insensitive; a leading "please" is allowed;
  not in a question: "remember that time …?" asks), never by a model: no model call is spent on
  it, and it is written at plan time, before the run's first model call.
- Each such sentence becomes ``notes/YYYY-MM-DD-{slug}.md`` holding the sentence as said, tagged
  ``remembered``, writer ``user`` (the owner's own words) with the run as ``writer_run_id``. At most
  :data:`MAX_NOTES` per run.
- Idempotent: a repeated plan of the same run writes the same content (a no-op). A different note
  on the same day with the same slug gets the run id in its name instead of replacing the other.
- The file holds the sentence exactly as said (tabs, zero-width and bidi characters included: the
  content rule refuses only NUL); its title is the sentence made printable (:func:`title_of`:
  control and format characters become spaces, runs of spaces one), so such a character never
  stops a note from being saved.
- Best effort: a note that cannot be written is logged and the run goes on, and the Zerg-written
  line (:func:`saved_line`) tells the model which notes were NOT saved and why, so the answer says
  so instead of claiming they were kept.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.memory.episodic import slug
from zerg.memory.paths import MAX_TITLE_CHARS

if TYPE_CHECKING:
    from zerg.runtime import Runtime

MAX_NOTES = 3
TAGS = ["remembered"]
_TRIGGER = re.compile(
    r"^(?:please[,\s]+)?(?:remember\s+that|remember\s+this|remember\s*:|keep\s+(?:this\s+)?in\s+mind|save\s+this)"
    r"(?:\b|(?<=:))[\s:,-]*(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_UNPRINTABLE = ("Cc", "Cf", "Cs", "Co", "Cn")  # what check_title refuses


@dataclass(frozen=True)
class NoteOutcome:
    """One "remember that" sentence: the ``path`` it was saved as, or why it was not (``error``)."""

    sentence: str
    path: str | None
    error: str | None = None


def title_of(text: str) -> str:
    """``text`` as a one-line printable title: control and format characters (tab, zero-width,
    bidi marks) become spaces, spaces collapse, trailing punctuation goes; at most the title limit."""
    clean = "".join(" " if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in text)
    return " ".join(clean.split())[:MAX_TITLE_CHARS].rstrip(" .!?")


def explicit_notes(task: str) -> list[tuple[str, str]]:
    """``(sentence, what to remember)`` for each sentence of ``task`` that asks to remember something."""
    found = []
    for sentence in _SENTENCES.split(task or ""):
        sentence = sentence.strip()
        match = _TRIGGER.match(sentence)
        if match and match.group("rest").strip(" .!?") and not sentence.endswith("?"):  # a question asks, not tells
            found.append((sentence, match.group("rest").strip()))
    return found[:MAX_NOTES]


def remember_explicit(rt: "Runtime", run: dict[str, Any]) -> list[NoteOutcome]:
    """Write the run's "remember that" notes; one outcome per sentence (saved, or why not)."""
    from zerg.memory import filesystem

    day = (run.get("started_at") or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%d")
    outcomes = []
    for sentence, rest in explicit_notes(run["task"]):
        name = slug(rest) or "note"
        path = f"notes/{day}-{name}.md"
        try:
            try:
                existing = filesystem.read(rt, run["owner_id"], path)
            except filesystem.MemoryNotFound:
                existing = None
            if existing is not None and existing.content != sentence:
                path = f"notes/{day}-{name}-{run['id']}.md"  # another note: keep both
            filesystem.write(rt, run["owner_id"], path, sentence, title=title_of(rest) or name,
                             tags=TAGS, writer="user", run_id=run["id"])
            outcomes.append(NoteOutcome(sentence, path))
        except Exception as exc:  # a note is never worth failing the run; the model is told below
            observability.logger().warning("could not save a remembered note", extra={
                "run_id": run["id"], "reason": f"{type(exc).__name__}: {exc}"[:300]})
            reason = str(exc) if isinstance(exc, (filesystem.MemoryInputError, ValueError)) else type(exc).__name__
            outcomes.append(NoteOutcome(sentence, None, reason[:200]))
    return outcomes


def saved_line(outcomes: list[NoteOutcome]) -> str:
    """What the supervisor is told (a Zerg-written line after the task) once the notes are written;
    a note that could not be saved is named, with why, so the answer does not claim it was."""
    saved = [o.path for o in outcomes if o.path]
    failed = [o for o in outcomes if not o.path]
    parts = []
    if saved:
        parts.append(f"[Zerg] Saved to the owner's memory as {', '.join(saved)}, as the user asked.")
    if failed:
        said = "; ".join(f"{o.sentence[:120]!r} ({o.error})" for o in failed)
        parts.append(f"{'' if saved else '[Zerg] '}NOT saved to memory, though the user asked: {said}. "
                     "Tell the user it was not saved and why.")
    if not failed:
        parts.append("Nothing more is needed for that part: acknowledge it briefly.")
    return " ".join(parts)
