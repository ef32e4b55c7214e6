"""Starting and stopping an escalation's execution (``statemachines/escalation.asl.json``): one
port (:class:`zerg.ports.EscalationStarter`), two implementations, chosen by configuration
(:func:`zerg.wiring.make_escalation_starter`).

- :class:`StepFunctionsEscalationStarter` (AWS, ``ZERG_ESCALATION_STATE_MACHINE_ARN`` set):
  ``StartExecution`` named ``esc-{escalation_id}`` (a duplicate start with the same input returns
  the same execution), ``StopExecution``.
- :class:`LocalEscalationStarter`: the same engine instance that runs this process's runs (the
  run starter's, ``rt.starter.engine()``), which creates the escalation machine on first use. An
  execution lives as long as the process: the local sweep (:func:`zerg.alerts.repeats.resume_orphaned`,
  a ``zerg serve`` housekeeping task) starts a new one for a running escalation nobody repeats.

Why a port of its own rather than methods on the run starter: the run starter's interface is
about runs (claims, heartbeats, interrupting runs on close), and on AWS the two machines are two
settings; the local side still shares the one engine by asking the run starter for it.

Invariants:
- The execution's input is ids and the interval only: ``{owner_id, run_id, escalation_id, interval_s}``.
- Stopping is best effort: the Repeat step checks the escalation's status before every repeat,
  so a stop that is lost (or an arn of another process's engine) sends nothing more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from zerg.config import ConfigError, Settings
from zerg.runs.stepfunctions import StepFunctionsMachine

log = logging.getLogger("zerg.alerts.escalation_starter")


def execution_name(escalation_id: int) -> str:
    return f"esc-{escalation_id}"


def execution_input(escalation_id: int, owner_id: int, run_id: int, interval_s: int) -> dict[str, Any]:
    return {"owner_id": owner_id, "run_id": run_id, "escalation_id": escalation_id, "interval_s": interval_s}


class StepFunctionsEscalationStarter(StepFunctionsMachine):
    def __init__(self, settings: Settings, client: Any = None) -> None:
        super().__init__(settings.escalation_state_machine_arn, client)

    def start(self, escalation_id: int, owner_id: int, run_id: int, interval_s: int, *, resumed: bool = False) -> str:
        # Nothing resumes on AWS (an execution outlives any Lambda); the name is the escalation's.
        return self.start_named(execution_name(escalation_id),
                                execution_input(escalation_id, owner_id, run_id, interval_s))

    def running(self) -> set[int]:
        return set()  # not used on AWS: there is no local sweep


class LocalEscalationStarter:
    """Escalations on the local engine of ``run_starter`` (a ``LocalStarter``), started on first use."""

    def __init__(self, run_starter: Callable[[], Any]) -> None:
        self._run_starter = run_starter
        self._lock = threading.Lock()
        self._started: dict[int, tuple[Any, str]] = {}  # escalation id -> (engine, execution arn)
        self._resumes = 0

    def _engine(self) -> Any:
        starter = self._run_starter()
        if not hasattr(starter, "engine"):
            raise ConfigError("ZERG_ESCALATION_STATE_MACHINE_ARN is not set and runs do not use the local engine")
        return starter.engine()

    def start(self, escalation_id: int, owner_id: int, run_id: int, interval_s: int, *, resumed: bool = False) -> str:
        engine = self._engine()
        name = execution_name(escalation_id)
        with self._lock:
            if resumed:  # a new execution of an escalation another (stopped) engine ran under its name
                self._resumes += 1
                name = f"{name}-resumed-{self._resumes}"
            arn = engine.start_named("escalation", name, execution_input(escalation_id, owner_id, run_id, interval_s))
            self._started[escalation_id] = (engine, arn)
        return arn

    def stop(self, execution_arn: str, cause: str) -> None:
        with self._lock:
            engine = next((e for e, arn in self._started.values() if arn == execution_arn), None)
        if engine is None:
            log.info("escalation execution %s is not this process's; its next Repeat step ends it", execution_arn)
            return
        try:
            engine.stop_execution(execution_arn, cause)
        except Exception as exc:  # already ended, or its engine stopped: nothing more will repeat
            log.info("could not stop escalation execution %s: %s: %s", execution_arn, type(exc).__name__, exc)

    def running(self) -> set[int]:
        """The escalations whose execution is running in this process's current engine."""
        with self._lock:
            started = dict(self._started)
        alive = set()
        for escalation_id, (engine, arn) in started.items():
            try:
                if engine.describe(arn)["status"] == "RUNNING":
                    alive.add(escalation_id)
            except Exception:  # a stopped engine forgets its executions: not running
                pass
        with self._lock:
            for escalation_id in started.keys() - alive:
                if self._started.get(escalation_id) == started[escalation_id]:
                    del self._started[escalation_id]
        return alive
