"""The runtime: what a process works with (settings, database pool, artifact store, model, embedder,
sealer, notifier, run starter, scheduler, escalation starter), each built on first use.

Everything in the core takes a :class:`Runtime`; none of it builds one. How each part is made is
decided by the one composition root, :mod:`zerg.wiring` (``get_runtime``, ``build_runtime``), which
hands the runtime its factories: this module names no adapter, so it sits at the bottom of the
layers. Nothing here holds request state, so a Lambda container (or the local engine) can serve any
owner's invocations one after another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zerg.config import Settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.artifacts import WorkerArtifactStore
    from zerg.embeddings import Embedder
    from zerg.llm import ChatModel
    from zerg.ports import EscalationStarter, Notifier, RunStarter, Scheduler
    from zerg.sealing import Sealer

Factory = Callable[["Runtime"], Any]


class part:  # noqa: N801 - used as a decorator, like cached_property
    """A runtime part, built once on first use, also when several threads ask at once (``zerg
    serve`` answers requests concurrently; Python 3.12 dropped ``cached_property``'s lock, so two
    requests could each build a part, a second local engine included). Once built, the instance
    attribute answers without the lock (a non-data descriptor)."""

    def __init__(self, build: Callable[["Runtime"], Any]) -> None:
        self.build, self.__doc__ = build, build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, runtime: "Runtime | None", owner: type | None = None) -> Any:
        if runtime is None:
            return self
        with runtime._lock:  # re-entrant: building one part may use another
            if self.name not in runtime.__dict__:
                runtime.__dict__[self.name] = self.build(runtime)
            return runtime.__dict__[self.name]


@dataclass
class Runtime:
    settings: Settings
    factories: Mapping[str, Factory] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False, compare=False)

    def _make(self, part: str) -> Any:
        factory = self.factories.get(part)
        if factory is None:
            raise LookupError(f"this runtime has no {part}: build it with zerg.wiring.build_runtime")
        return factory(self)

    @part
    def pool(self) -> "ConnectionPool":
        return self._make("pool")

    @part
    def store(self) -> "WorkerArtifactStore":
        return self._make("store")

    @part
    def llm(self) -> "ChatModel":
        """The configured provider, metered: every tagged call lands in the usage ledger."""
        return self._make("llm")

    @part
    def embedder(self) -> "Embedder | None":
        """Text to vectors for memory search (ZERG_EMBEDDINGS), with its hard timeout; None: full-text only."""
        return self._make("embedder")

    @part
    def sealer(self) -> "Sealer":
        """Seals owners' connector secrets: KMS on AWS, a local key file otherwise."""
        return self._make("sealer")

    @part
    def notifier(self) -> "Notifier":
        """Email and SMS: SES v2 + SNS on AWS, the outbox under ZERG_DATA_DIR locally (ZERG_NOTIFIER)."""
        return self._make("notifier")

    @part
    def starter(self) -> "RunStarter":
        """Step Functions on AWS, the in-process local engine when hosted locally."""
        return self._make("starter")

    @part
    def scheduler(self) -> "Scheduler":
        """What makes schedules fire: EventBridge Scheduler with ZERG_SCHEDULE_GROUP, else the local ticker's rows."""
        return self._make("scheduler")

    @part
    def escalation_starter(self) -> "EscalationStarter":
        """Critical alerts' repeats: Step Functions on AWS, the run starter's local engine otherwise."""
        return self._make("escalation_starter")

    def close(self) -> None:
        """Stop what this runtime started (the local engine); the shared pools stay (see db)."""
        self.__dict__.pop("escalation_starter", None)  # its executions run on the starter's engine
        starter = self.__dict__.pop("starter", None)
        if starter is not None:
            starter.close()
