"""A closed run's answer, sent once: the one "load the closed run, compose, deliver" path behind the
answer mail of ``notify_on_complete`` (:mod:`zerg.alerts.completion_mail`) and a reply's answer
back to the contact that wrote (:mod:`zerg.inbound.replies`).

Invariants:
- Once per run: the run's ``answer`` notification is looked for under its lock
  (:func:`zerg.notify.notifications.lock_and_find_answer`) and the answer is sent before the lock
  is released, so a second closer, or a second call, sends nothing ("answered already").
- Scoped by owner: the run is read as ``owner_id``'s; another owner's run is "no such run".
- Never raises: the run is closed and recorded before; a failure is a log line and an ``error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.notify import notifications
from zerg.runs import store as runs

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

# What to send, as a callable that delivers it (inside the answer's lock) and returns the
# notifications rows; or why nothing is sent (a string).
Send = Callable[[], list[dict[str, Any]]]
Prepare = Callable[["Connection", dict[str, Any]], "Send | str"]


def send_answer(rt: "Runtime", owner_id: int, run_id: int, prepare: Prepare, *, what: str) -> dict[str, Any]:
    """Send the answer of the closed run ``run_id`` that ``prepare`` composes from the run (read
    here, with the connection it was read on), once; a report. ``what`` names it in the log."""
    try:
        with rt.pool.connection() as conn:
            run = runs.get_run(conn, owner_id, run_id)
            plan = "no such run" if run is None else prepare(conn, run)
        if isinstance(plan, str):
            return {"run_id": run_id, "skipped": plan}
        with rt.pool.connection() as conn, conn.transaction():
            if notifications.lock_and_find_answer(conn, owner_id, run_id):
                return {"run_id": run_id, "skipped": "answered already"}
            sent = plan()
        return {"run_id": run_id, "answer": [r["status"] for r in sent]}
    except Exception as exc:
        observability.logger().warning(f"{what}: the answer could not be sent", exc_info=True,
                                       extra={"run_id": run_id, "owner_id": owner_id})
        return {"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"[:300]}
