"""After a run closed: the one hook every closer calls (:func:`after_close`).

The closers are the supervisor's ``finalize``, ``fail`` and its stop at the spending cap
(:mod:`zerg.supervisor.turn`), a start that failed (:mod:`zerg.runs.launch`), the orphan sweep
(:mod:`zerg.runs.orphans`) and the AWS execution-status rule (:mod:`zerg.runs.execution_status`).
What follows a close depends on who started the run:

- a background run (trigger ``schedule``): its inbox item, notifications and escalation
  (:func:`zerg.alerts.background.on_run_end`);
- a reply's run (trigger ``email``/``sms``): its answer back to the contact that wrote, on the same
  channel (:func:`zerg.inbound.replies.answer_reply_run`);
- any other run: its answer (or why it failed) by email when its request asked for it
  (``preferences.notify_on_complete``, :mod:`zerg.runs.completion_mail`); else nothing.

Invariants:
- Called only by the closer that closed the run (the store's conditional close said so), once.
  What it calls is idempotent anyway (one inbox item per run, one answer per run, one answer
  mail per run), so a second caller sends nothing twice.
- Best effort: the run is recorded before; nothing here raises to the closer or changes the run.
  A reply run's answer that a failure here (or a crash before it) lost is sent later by the
  inbound sweep (:func:`zerg.inbound.replies.recover_pending`, within a day of the close).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerg.alerts.severity import Assessment
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)


def after_close(rt: "Runtime", run: dict[str, Any], assessment: "Assessment | None" = None) -> dict[str, Any]:
    """What follows the close of ``run`` (a row of ``runs``: its id, owner and trigger); a report.
    ``assessment``: a background run's, when its closer computed it already. Never raises."""
    from zerg.alerts import background
    from zerg.inbound.replies import REPLY_TRIGGERS, answer_reply_run
    from zerg.runs.completion_mail import mail_answer

    try:
        if background.is_background(run):
            return background.on_run_end(rt, run["owner_id"], run["id"], assessment)
        if run.get("trigger") in REPLY_TRIGGERS:
            return answer_reply_run(rt, run["owner_id"], run["id"])
        # The row a closer holds may lack the preferences (the orphan sweep reads a few columns):
        # mail_answer reads the closed run itself.
        return mail_answer(rt, run["owner_id"], run["id"])
    except Exception as exc:  # both never raise; this guards the closer against what they import
        log.warning("run %s: what follows its close failed", run.get("id"), exc_info=True)
        return {"run_id": run.get("id"), "error": f"{type(exc).__name__}: {exc}"[:300]}
