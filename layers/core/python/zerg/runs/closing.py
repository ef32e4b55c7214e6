"""After a run closed: the one hook every closer calls (:func:`after_close`), and the registry of
what follows a close (:func:`subscribe`).

The closers are the supervisor's ``finalize``, ``fail`` and its stop at the spending cap
(:mod:`zerg.supervisor.turn`), a start that failed (:mod:`zerg.runs.launch`), the orphan sweep
(:mod:`zerg.runs.orphans`) and the AWS execution-status rule (:mod:`zerg.runs.execution_status`).
What follows a close depends on who started the run (its trigger) and is registered by the
composition root (:mod:`zerg.wiring`), never imported from here: the run lifecycle knows nothing
of its consumers.

Invariants:
- Called only by the closer that closed the run (the store's conditional close said so), once.
  What a subscriber does is idempotent anyway (one inbox item per run, one answer per run), so a
  second caller sends nothing twice.
- A run's subscribers are those registered for its trigger; a run whose trigger none names gets
  the subscribers registered for every other trigger (``triggers=None``).
- Best effort: the run is recorded before; nothing here raises to the closer or changes the run.
  A failing subscriber is a log line and an ``error`` in the report; the others still run.
- A subscriber is named by its dotted path (``"package.module:function"``) and imported on the
  first close that needs it, so registering costs a cold start nothing.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerg.runtime import Runtime

log = logging.getLogger(__name__)

# subscriber(rt, run, assessment) -> a report (a dict); ``assessment``: a background run's, when
# its closer computed it already (None otherwise).
Subscriber = Callable[["Runtime", dict[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class Subscription:
    triggers: tuple[str, ...] | None  # None: every trigger no other subscription names
    target: str  # "package.module:function"


_subscriptions: list[Subscription] = []
_lock = threading.Lock()


def subscribe(target: str, *, triggers: tuple[str, ...] | None) -> None:
    """Call ``target`` after the close of every run started by one of ``triggers`` (None: by any
    trigger no subscription names). Registering the same pair again changes nothing."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"a subscriber is 'package.module:function', not {target!r}")
    subscription = Subscription(tuple(triggers) if triggers is not None else None, target)
    with _lock:
        if subscription not in _subscriptions:
            _subscriptions.append(subscription)


def subscribers(trigger: str | None) -> list[str]:
    """The targets a run started by ``trigger`` is handed to, in registration order."""
    with _lock:
        named = [s.target for s in _subscriptions if s.triggers is not None and trigger in s.triggers]
        return named or [s.target for s in _subscriptions if s.triggers is None]


def _resolve(target: str) -> Subscriber:
    """The subscriber ``target`` names (its module imported on first use; then Python's own cache)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def after_close(rt: "Runtime", run: dict[str, Any], assessment: Any = None) -> dict[str, Any]:
    """What follows the close of ``run`` (a row of ``runs``: its id, owner and trigger); a report
    (a subscriber's own, or ``{"run_id", "reports": [...]}`` when several ran). Never raises."""
    _end_trace(rt, run)
    reports = []
    for target in subscribers(run.get("trigger")):
        try:
            reports.append(_resolve(target)(rt, run, assessment))
        except Exception as exc:  # each subscriber never raises; this guards the closer against what they import
            log.warning("run %s: what follows its close failed (%s)", run.get("id"), target, exc_info=True)
            reports.append({"run_id": run.get("id"), "error": f"{type(exc).__name__}: {exc}"[:300]})
    if len(reports) == 1:
        return reports[0]
    return {"run_id": run.get("id"), "reports": reports}


def _end_trace(rt: "Runtime", run: dict[str, Any]) -> None:
    """The run's root span (docs/tracing.md), with the status and end the close gave it."""
    from zerg import tracing

    if not tracing.active():
        return
    try:
        from zerg.runs import store as runs

        with rt.pool.connection() as conn:
            closed = runs.get_run(conn, run["owner_id"], run["id"]) or run
    except Exception:  # the database is away: the span still has the run's start
        log.warning("run %s: its closed row could not be read for its trace", run.get("id"), exc_info=True)
        closed = run
    tracing.end_run(closed)
