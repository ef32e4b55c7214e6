"""The assessment of a background run: ``{severity, headline, details}``, from the supervisor's
final answer, checked, then raised (never lowered) by the system's own rules.

A run started by a schedule is unattended: its supervisor is told to end with exactly one JSON
object (:data:`zerg.supervisor.prompts.BACKGROUND_RULES`). :func:`assess` reads it.

Invariants:
- The answer is parsed, never evaluated: every JSON object in it (a ```json fence and prose
  around it are tolerated) is validated by :class:`ModelAssessment`. The answer may quote mail,
  tool output or a worker's text, and text a model reads is data, never instructions: a quoted
  ``{"severity": "info", ...}`` must not stand in for the real assessment. So when several objects
  are valid assessments the highest severity wins (ties: the one that ends last, where the model
  was told to put it); quoted text can raise an alert, never lower one.
- A valid severity is never lost to the form of the other fields: a headline of any length is cut
  to one line, ``details`` null is empty and a non-string ``details`` is kept as JSON text (cut).
- Anything else is a *fallback*: severity ``warning``, the answer's first line as headline, the answer as details,
  ``assessed_by`` ``fallback``. Warning, because a check whose result cannot be read is in an
  unknown state: ``info`` would bury a possible problem in the digest, ``critical`` would page the
  owner (at night, repeatedly) for a formatting slip. A warning is seen today, by email, and its
  SMS waits for the end of quiet hours.
- System rules only raise: a worker that ended ``failed`` or ``timeout`` makes it at least
  ``warning``; so does a run that itself ended ``failed``, ``timeout`` or ``interrupted``, with a
  system headline ("Scheduled check 'NAME' failed: reason"). ``assessed_by`` is ``system`` when a
  rule raised the severity (or wrote the headline). Nothing here lowers a severity the model gave.
- Statuses come from the system (worker_jobs, runs), never from the model's prose.
- Bounded: the headline fits 120 characters (one line), details 20,000 (the inbox's limits).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zerg.notify.policy import SEVERITIES  # in rising order
from zerg.text import one_line

Severity = Literal["info", "warning", "critical"]
HEADLINE_CHARS = 120
DETAILS_CHARS = 20_000
FAILED_JOBS = ("failed", "timeout")  # worker outcomes that make a check at least a warning
FAILED_RUNS = ("failed", "timeout", "interrupted")
# '{' positions tried (bounded work on a long answer): the first few and the last many, because
# the model ends with its assessment, and quoted text with many braces before it must not push it
# out of reach (that would turn a critical into the fallback's warning).
_HEAD_STARTS, _TAIL_STARTS = 16, 48


def rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def at_least(severity: str, floor: str) -> str:
    return severity if rank(severity) >= rank(floor) else floor


@dataclass(frozen=True)
class Assessment:
    severity: str  # one of SEVERITIES
    headline: str
    details: str
    assessed_by: str  # model | fallback | system

    @property
    def on_thread(self) -> bool:
        """Warning and above join the owner's thread; info results stay in the inbox and the digest."""
        return rank(self.severity) >= rank("warning")


class ModelAssessment(BaseModel):
    """What the supervisor of a background run must answer with."""

    model_config = ConfigDict(extra="ignore")
    severity: Severity
    # No upper bounds: a long headline or details is cut below; refusing it would replace a
    # model's critical with the fallback's warning.
    headline: str = Field(min_length=1)
    details: str = ""

    @field_validator("severity", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("headline")
    @classmethod
    def _headline(cls, value: str) -> str:
        line = one_line(value)
        if not line:
            raise ValueError("blank")
        return line

    @field_validator("details", mode="before")
    @classmethod
    def _details_text(cls, value: Any) -> Any:
        """null is no details; any other JSON value is kept as its JSON text (the facts survive)."""
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @field_validator("details")
    @classmethod
    def _details(cls, value: str) -> str:
        value = value.strip()
        return value if len(value) <= DETAILS_CHARS else value[: DETAILS_CHARS - 1] + "…"


def _objects(text: str) -> Iterator[tuple[int, Any]]:
    """(end, value) of the JSON values that start at a ``{`` of ``text`` (nested ones too: a fence
    or prose around an object is no obstacle, since each is decoded from its own brace)."""
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{"]
    if len(starts) > _HEAD_STARTS + _TAIL_STARTS:
        starts = starts[:_HEAD_STARTS] + starts[-_TAIL_STARTS:]
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        yield end, value


def parse(answer: str | None) -> ModelAssessment | None:
    """The assessment of ``answer``: of its JSON objects that are valid assessments, the most
    severe; among equals the one that ends last (see module). None when there is none."""
    best: tuple[int, int, ModelAssessment] | None = None
    for end, value in _objects(answer or ""):
        if not isinstance(value, dict):
            continue
        try:
            found = ModelAssessment.model_validate(value)
        except ValidationError:
            continue  # e.g. an object around the real one, or a stray {"port": 443}
        key = (rank(found.severity), end)
        if best is None or key >= best[:2]:
            best = (*key, found)
    return None if best is None else best[2]


def fallback(answer: str | None) -> Assessment:
    """The answer could not be read as an assessment: a warning carrying the answer (see module)."""
    text = (answer or "").strip()
    first = next((line for line in text.splitlines() if line.strip()), "")
    headline = one_line(first) or "The check ended without an answer"
    details = text if len(text) <= DETAILS_CHARS else text[: DETAILS_CHARS - 1] + "…"
    return Assessment("warning", headline, details, "fallback")


def _job_line(job: dict[str, Any]) -> str:
    why = f": {one_line(job['error'], 200)}" if job.get("error") else ""
    return f"- worker #{job['id']} {job['status']} ({one_line(job.get('task') or '', 80)}){why}"


def assess(answer_text: str | None, jobs: list[dict[str, Any]], run: dict[str, Any], *,
           schedule_name: str | None = None) -> Assessment:
    """The run's assessment: the model's (or the fallback), then the system rules (see module).

    ``run`` needs ``status`` (its final one) and ``error``; ``jobs`` are its ``worker_jobs`` rows."""
    parsed = parse(answer_text)
    result = (Assessment(parsed.severity, parsed.headline, parsed.details, "model") if parsed
              else fallback(answer_text))
    name = f"Scheduled check '{schedule_name}'" if schedule_name else "Scheduled check"
    notes: list[str] = []
    headline = None
    failed = [j for j in jobs if j.get("status") in FAILED_JOBS]
    if failed:
        notes.append(f"Zerg: {len(failed)} of {len(jobs)} worker(s) did not succeed:\n"
                     + "\n".join(_job_line(j) for j in failed))
        headline = f"{name}: {len(failed)} worker(s) failed or timed out"
    status = run.get("status")
    if status in FAILED_RUNS:
        reason = one_line(run.get("error") or status, 300)
        notes.append(f"Zerg: the run ended {status}: {reason}")
        verb = {"failed": "failed", "timeout": "timed out", "interrupted": "was interrupted"}[status]
        headline = f"{name} {verb}: {reason}"
    if not notes:
        return result
    raised = rank(result.severity) < rank("warning")
    details = "\n\n".join(p for p in (result.details, *notes) if p)
    if len(details) > DETAILS_CHARS:
        details = details[: DETAILS_CHARS - 1] + "…"
    if raised:  # the model's (too low) headline moves into the details, the system's replaces it
        details = f"The check itself said: {result.headline}\n\n{details}"[:DETAILS_CHARS]
        return Assessment("warning", one_line(headline), details, "system")
    if status in FAILED_RUNS and result.assessed_by == "fallback":  # no readable answer: say what happened
        return Assessment(result.severity, one_line(headline), details, "system")
    return replace(result, details=details)


def render(assessment: Assessment) -> str:
    """The assessment as the owner's thread shows it (the run keeps the model's raw answer)."""
    head = f"[{assessment.severity.upper()}] {assessment.headline}"
    return f"{head}\n\n{assessment.details}" if assessment.details else head
