"""The sandbox ``container_exec`` runs its commands in: one per call.

- :mod:`~zerg.sandbox.detect`: which mechanism this host gives (bwrap, unshare, best effort),
  probed once, announced once.
- :mod:`~zerg.sandbox.launch`: one command in one sandbox, torn down before it returns.
- :mod:`~zerg.sandbox.nsinit`: a call's first process: the in-namespace init of the ``unshare``
  mechanism, or the subreaper of a best-effort call; it sets the command's limits.
- :mod:`~zerg.sandbox.reaper`: call directories, per-call uids, killing and removing leftovers.
- :mod:`~zerg.sandbox.invocation`: the end-of-invocation sweep (a worker job; on Lambda, all of it).
"""

from __future__ import annotations

import shutil

from zerg.config import Settings
from zerg.sandbox.detect import Level, announce, level
from zerg.sandbox.invocation import invocation
from zerg.sandbox.launch import BEST_EFFORT, BWRAP, UNSHARE, Cancel, Limits, OutputSink, SandboxResult, run

__all__ = ["BEST_EFFORT", "BWRAP", "UNSHARE", "Level", "Limits", "OutputSink", "SandboxResult", "announce", "execute",
           "invocation", "level"]


def execute(command: str, timeout_s: float, settings: Settings, *, output_cap: int,
            mechanism: str | None = None, sink: OutputSink | None = None,
            cancel: Cancel | None = None) -> SandboxResult:
    """Run ``command`` in a fresh sandbox of this host's level (or of ``mechanism``, if given),
    within the settings' limits; its output goes to ``sink`` as it arrives, when one is given;
    killed early if ``cancel`` fires."""
    current = level(settings)
    if mechanism is None or mechanism == current.mechanism:
        mechanism, binary = current.mechanism, current.binary
    else:
        binary = shutil.which(mechanism) if mechanism != BEST_EFFORT else None
    return run(command, timeout_s, mechanism=mechanism, binary=binary, network=settings.sandbox_network,
               output_cap=output_cap, sink=sink, cancel=cancel, limits=Limits.of(settings))
