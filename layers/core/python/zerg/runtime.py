"""The runtime: what a process works with (settings, database pool, artifact store, model, embedder,
sealer, notifier, run starter, scheduler, escalation starter), each built on first use.

Everything in the core takes a :class:`Runtime`; none of it builds one. How each part is made is
decided by the one composition root, :mod:`zerg.wiring` (``get_runtime``, ``build_runtime``), which
hands the runtime its factories: this module names no adapter, so it sits at the bottom of the
layers. Nothing here holds request state, so a Lambda container (or the local engine) can serve any
owner's invocations one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
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


@dataclass
class Runtime:
    settings: Settings
    factories: Mapping[str, Factory] = field(default_factory=dict, repr=False)

    def _make(self, part: str) -> Any:
        factory = self.factories.get(part)
        if factory is None:
            raise LookupError(f"this runtime has no {part}: build it with zerg.wiring.build_runtime")
        return factory(self)

    @cached_property
    def pool(self) -> "ConnectionPool":
        return self._make("pool")

    @cached_property
    def store(self) -> "WorkerArtifactStore":
        return self._make("store")

    @cached_property
    def llm(self) -> "ChatModel":
        """The configured provider, metered: every tagged call lands in the usage ledger."""
        return self._make("llm")

    @cached_property
    def embedder(self) -> "Embedder | None":
        """Text to vectors for memory search (ZERG_EMBEDDINGS), with its hard timeout; None: full-text only."""
        return self._make("embedder")

    @cached_property
    def sealer(self) -> "Sealer":
        """Seals owners' connector secrets: KMS on AWS, a local key file otherwise."""
        return self._make("sealer")

    @cached_property
    def notifier(self) -> "Notifier":
        """Email and SMS: SES v2 + SNS on AWS, the outbox under ZERG_DATA_DIR locally (ZERG_NOTIFIER)."""
        return self._make("notifier")

    @cached_property
    def starter(self) -> "RunStarter":
        """Step Functions on AWS, the in-process local engine when hosted locally."""
        return self._make("starter")

    @cached_property
    def scheduler(self) -> "Scheduler":
        """What makes schedules fire: EventBridge Scheduler with ZERG_SCHEDULE_GROUP, else the local ticker's rows."""
        return self._make("scheduler")

    @cached_property
    def escalation_starter(self) -> "EscalationStarter":
        """Critical alerts' repeats: Step Functions on AWS, the run starter's local engine otherwise."""
        return self._make("escalation_starter")

    def close(self) -> None:
        """Stop what this runtime started (the local engine); the shared pools stay (see db)."""
        self.__dict__.pop("escalation_starter", None)  # its executions run on the starter's engine
        starter = self.__dict__.pop("starter", None)
        if starter is not None:
            starter.close()
