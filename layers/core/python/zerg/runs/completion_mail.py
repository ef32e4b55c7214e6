"""``preferences.notify_on_complete``: the answer of a run, emailed to its owner when it ends.

A client that asked ``POST /api/jarvis/supervisor`` with ``notify_on_complete: true`` may be gone
when the run ends (the tab closed, the phone locked): the answer then goes to the owner's verified
email. Called by :func:`zerg.runs.closing.after_close`, the one hook every closer calls.

Invariants:
- Only for a run whose stored preferences ask for it; a background or reply run keeps its own
  behaviour (:mod:`zerg.runs.closing` decides before this is called).
- Once per run: the run's ``answer`` notification is looked for under its lock
  (:func:`zerg.alerts.notifications.lock_and_find_answer`) and sent before the lock is released,
  so a second closer, or a second call, sends nothing.
- Only to the owner's verified email addresses, through :func:`zerg.alerts.deliver.deliver`
  (purpose ``answer``, recorded in ``notifications``); none: one ``suppressed`` row saying why.
- A run that answered (``success``, or ``timeout`` with what existed) mails its answer; any other
  end mails one line: "It failed: <why>" ("It was cancelled: <why>"). Both link the run.
- Called by every closer through :func:`zerg.runs.closing.after_close`, and by the cancel route
  (an owner's cancel is no closer of that hook: a background run cancelled raises no alert).
- Never raises: the run is closed and recorded before; a failure here is a log line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability

if TYPE_CHECKING:
    from zerg.runtime import Runtime

ANSWER_CHARS = 20_000  # an answer longer than this is cut; the run's page has it whole


def wanted(run: dict[str, Any]) -> bool:
    """Whether the run was started with ``notify_on_complete: true``."""
    return (run.get("preferences") or {}).get("notify_on_complete") is True


def mail_answer(rt: "Runtime", owner_id: int, run_id: int) -> dict[str, Any]:
    """Email the closed run's answer (or why it failed) to the owner, once; a report. Never raises."""
    try:
        return _mail(rt, owner_id, run_id)
    except Exception as exc:
        observability.logger().warning("notify_on_complete: the answer could not be mailed", exc_info=True,
                                       extra={"run_id": run_id, "owner_id": owner_id})
        return {"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _mail(rt: "Runtime", owner_id: int, run_id: int) -> dict[str, Any]:
    from zerg.alerts import notifications
    from zerg.alerts.deliver import deliver
    from zerg.runs import store as runs
    from zerg.statuses import RUN_FINAL

    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
    if run is None or not wanted(run):
        return {"run_id": run_id, "skipped": "notify_on_complete was not asked for"}
    if run["status"] not in RUN_FINAL:
        return {"run_id": run_id, "skipped": f"the run is {run['status']}"}
    subject, body = compose(rt.settings, run)
    with rt.pool.connection() as conn, conn.transaction():
        if notifications.lock_and_find_answer(conn, owner_id, run_id):
            return {"run_id": run_id, "skipped": "mailed already"}
        sent = deliver(rt, owner_id, channel="email", purpose="answer", subject=subject, body=body, run_id=run_id)
    return {"run_id": run_id, "answer": [r["status"] for r in sent]}


def compose(settings: Any, run: dict[str, Any]) -> tuple[str, str]:
    """(subject, body) of the mail for a closed ``run``."""
    from zerg.alerts.escalation import base_url, run_link
    from zerg.alerts.severity import one_line

    link = run_link(base_url(settings), run["id"])
    task = one_line(run["task"], 80)
    answer = (run["result"] or "").strip()
    if run["status"] in ("success", "timeout") and answer:
        cut = answer if len(answer) <= ANSWER_CHARS else answer[:ANSWER_CHARS] + "\n[... cut: the run's page has it all]"
        stopped = "\n\n(The run reached its deadline: this is what existed.)" if run["status"] == "timeout" else ""
        return f"Zerg: {task}", f"{cut}{stopped}\n\n--\nYou asked: {task}\nRun: {link}"
    why = one_line(run["error"] or f"the run ended {run['status']}", 300)
    ended = "it was cancelled" if run["status"] == "cancelled" else "it failed"
    return f"Zerg: {ended}: {task}", f"{ended.capitalize()}: {why}\n\n--\nYou asked: {task}\nRun: {link}"
