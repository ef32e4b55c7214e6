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
- Best effort: a note that cannot be written is logged and the run goes on (it says so to the model).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.memory.episodic import slug

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


def explicit_notes(task: str) -> list[tuple[str, str]]:
    """``(sentence, what to remember)`` for each sentence of ``task`` that asks to remember something."""
    found = []
    for sentence in _SENTENCES.split(task or ""):
        sentence = sentence.strip()
        match = _TRIGGER.match(sentence)
        if match and match.group("rest").strip(" .!?") and not sentence.endswith("?"):  # a question asks, not tells
            found.append((sentence, match.group("rest").strip()))
    return found[:MAX_NOTES]


def remember_explicit(rt: "Runtime", run: dict[str, Any]) -> list[str]:
    """Write the run's "remember that" notes; the paths written (or already there)."""
    from zerg.memory import filesystem

    day = (run.get("started_at") or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%d")
    saved = []
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
            filesystem.write(rt, run["owner_id"], path, sentence, title=rest[:255].rstrip(" .!?") or name,
                             tags=TAGS, writer="user", run_id=run["id"])
            saved.append(path)
        except Exception as exc:  # a note is never worth failing the run
            observability.logger().warning("could not save a remembered note", extra={
                "run_id": run["id"], "reason": f"{type(exc).__name__}: {exc}"[:300]})
    return saved


def saved_line(paths: list[str]) -> str:
    """What the supervisor is told (a Zerg-written line after the task) once the notes are saved."""
    where = ", ".join(paths)
    return (f"[Zerg] Saved to the owner's memory as {where}, as the user asked. Nothing more is needed "
            "for that part: acknowledge it briefly.")
