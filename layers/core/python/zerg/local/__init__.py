"""The one-machine host: the local engine, the HTTP server, ``zerg run`` and the ``zerg ask`` client.

Not in the Lambda layer; the only core code (with ``zerg.cli``) that imports ``functions``.
Loading it gives the composition root its run starter for a process without Step Functions
(:func:`zerg.wiring.use_local_engine`): the local engine, started on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerg import wiring

if TYPE_CHECKING:
    from zerg.config import Settings
    from zerg.ports import RunStarter


def _local_starter(settings: "Settings") -> "RunStarter":
    from zerg.local.engine import LocalStarter

    return LocalStarter(settings)


wiring.use_local_engine(_local_starter)
