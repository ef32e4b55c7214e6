"""``preferences.notify_on_complete``: the answer of a run, emailed to its owner when it ends.

A client that asked ``POST /api/jarvis/supervisor`` with ``notify_on_complete: true`` may be gone
when the run ends (the tab closed, the phone locked): the answer then goes to the owner's verified
email. Called by :func:`zerg.runs.closing.after_close`, the one hook every closer calls.

Invariants:
- Only for a run whose stored preferences ask for it; a background or reply run keeps its own
  behaviour: this is subscribed for the runs of every other trigger (:mod:`zerg.wiring`).
- Once per run, through the one answer path (:func:`zerg.notify.answers.send_answer`): a second
  closer, or a second call, sends nothing.
- Only to the owner's verified email addresses, through :func:`zerg.notify.deliver.deliver`
  (purpose ``answer``, recorded in ``notifications``); none: one ``suppressed`` row saying why.
- A run that answered (``success``, or ``timeout`` with what existed) mails its answer; any other
  end mails one line: "It failed: <why>" ("It was cancelled: <why>"). Both link the run.
- Called by every closer through :func:`zerg.runs.closing.after_close`, and by the cancel route
  (an owner's cancel is no closer of that hook: a background run cancelled raises no alert).
- Never raises: the run is closed and recorded before; a failure here is a log line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg.notify.answers import Send, send_answer
from zerg.notify.deliver import deliver
from zerg.statuses import RUN_FINAL

if TYPE_CHECKING:
    from zerg.runtime import Runtime

ANSWER_CHARS = 20_000  # an answer longer than this is cut; the run's page has it whole


def wanted(run: dict[str, Any]) -> bool:
    """Whether the run was started with ``notify_on_complete: true``."""
    return (run.get("preferences") or {}).get("notify_on_complete") is True


def mail_answer(rt: "Runtime", owner_id: int, run_id: int) -> dict[str, Any]:
    """Email the closed run's answer (or why it failed) to the owner, once; a report. Never raises."""
    return send_answer(rt, owner_id, run_id, lambda conn, run: _prepare(rt, run), what="notify_on_complete")


def on_close(rt: "Runtime", run: dict[str, Any], assessment: Any = None) -> dict[str, Any]:
    """The run-close subscriber for the runs of every other trigger (registered by :mod:`zerg.wiring`).
    The row a closer holds may lack the preferences (the orphan sweep reads a few columns): the
    closed run is read again."""
    return mail_answer(rt, run["owner_id"], run["id"])


def _prepare(rt: "Runtime", run: dict[str, Any]) -> "Send | str":
    if not wanted(run):
        return "notify_on_complete was not asked for"
    if run["status"] not in RUN_FINAL:
        return f"the run is {run['status']}"
    subject, body = compose(rt.settings, run)
    return lambda: deliver(rt, run["owner_id"], channel="email", purpose="answer", subject=subject, body=body,
                           run_id=run["id"])


def compose(settings: Any, run: dict[str, Any]) -> tuple[str, str]:
    """(subject, body) of the mail for a closed ``run``."""
    from zerg.alerts.messages import base_url, run_link
    from zerg.text import one_line

    link = run_link(base_url(settings), run["id"])
    task = one_line(run["task"], 80)
    answer = (run["result"] or "").strip()
    if run["status"] in ("success", "timeout") and answer:
        from zerg.approvals.question import split_question

        text, question = split_question(answer)  # Zerg's question stays whole, word for word
        cut = text if len(text) <= ANSWER_CHARS else text[:ANSWER_CHARS] + "\n[... cut: the run's page has it all]"
        cut += f"\n\n{question}" if question else ""
        stopped = "\n\n(The run reached its deadline: this is what existed.)" if run["status"] == "timeout" else ""
        return f"Zerg: {task}", f"{cut}{stopped}\n\n--\nYou asked: {task}\nRun: {link}"
    why = one_line(run["error"] or f"the run ended {run['status']}", 300)
    ended = "it was cancelled" if run["status"] == "cancelled" else "it failed"
    return f"Zerg: {ended}: {task}", f"{ended.capitalize()}: {why}\n\n--\nYou asked: {task}\nRun: {link}"
