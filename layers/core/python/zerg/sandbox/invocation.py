"""One invocation (a worker job) and what its sandbox calls left, swept when it ends.

Invariants:
- Each call already cleans up after itself (:mod:`zerg.sandbox.launch`: at best effort its
  launcher kills the command's whole tree); this is the second line, for best effort, where a
  command running as the launcher's uid can kill the launcher, then escape its process group and
  its marker.
- Locally the sweep touches only this invocation's calls (their markers): other workers of the
  same process run their own sandboxes at the same time.
- On Lambda (no namespaces; one invocation per environment at a time, and the function's
  process tree is all there is) the sweep kills every process but this one and Lambda's init in
  one ``kill(-1)``, checks over several looks that none is left, removes the function uid's
  System V IPC objects, and deletes every entry of the
  temp directory created during the invocation and every call directory of this process, so
  nothing of one invocation survives into the next one the warm environment serves, of any
  owner. Should a process survive (one we may not signal), the runtime process exits
  (:data:`TAINTED_EXIT`) instead of serving another invocation: Lambda then starts a fresh
  environment, and the state machine's Catch marks the job failed only if it had not finished.
- "On Lambda" is :func:`zerg.hosting.lambda_runtime`: the runtime's variables *and* this process
  right under Lambda's init, never a process hosting the local engine. The kill runs only when
  the invocation made at least one sandbox call: without one, nothing of ours was started.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from zerg.config import Settings
from zerg.sandbox import processes, reaper, uids

TAINTED_EXIT = 75  # EX_TEMPFAIL: this environment must not serve another invocation

_markers: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("zerg_sandbox_calls", default=None)


def record(marker: str) -> None:
    """Called by every sandbox call: remember it for the current invocation, if any."""
    markers = _markers.get()
    if markers is not None:
        markers.append(marker)


@dataclass
class Sweep:
    calls: int = 0
    killed: int = 0
    removed: list[str] = field(default_factory=list)


def _entries(tmp: Path) -> set[str]:
    try:
        return set(os.listdir(tmp))
    except OSError:
        return set()


@contextlib.contextmanager
def invocation(settings: Settings, tmp_root: Path | None = None) -> Iterator[Sweep]:
    """Scope one worker invocation; on the way out, kill and delete what its calls left."""
    from zerg import hosting

    on_lambda = hosting.lambda_runtime(settings)
    tmp = tmp_root or Path(tempfile.gettempdir())
    before = _entries(tmp) if on_lambda else set()
    markers: list[str] = []
    sweep = Sweep()
    token = _markers.set(markers)
    try:
        yield sweep
    finally:
        _markers.reset(token)
        sweep.calls = len(markers)
        survivors: list[int] = []
        if on_lambda:
            if markers:
                sweep.killed = processes.kill_all_but_us()
                survivors = processes.others_alive()
                uids.remove_ipc(os.getuid())  # one uid for every invocation: its IPC objects too
            for name in sorted(_entries(tmp) - before):
                reaper.remove_tree(tmp / name)
                sweep.removed.append(name)
            sandboxes = tmp / reaper.sandboxes_root().name
            for name in sorted(_entries(sandboxes)):
                if name.startswith(f"{os.getpid()}-"):
                    reaper.remove_tree(sandboxes / name)
                    sweep.removed.append(f"{sandboxes.name}/{name}")
        elif markers:
            sweep.killed = processes.kill_marked(markers)
            if hosting.lambda_environment(settings):  # e.g. a container image with a wrapper process
                from zerg import observability

                observability.logger().warning(
                    "Lambda runtime not directly under Lambda's init: only marked processes were killed",
                    extra={"ppid": os.getppid(), "calls": len(markers)})
        if sweep.killed or survivors:  # a command escaped its own call's teardown: worth a line
            from zerg import observability

            observability.logger().warning("sandbox sweep at the end of the invocation", extra={
                "killed": sweep.killed, "calls": sweep.calls, "removed": len(sweep.removed)})
        if survivors:
            _end_runtime(survivors)


def _end_runtime(survivors: list[int]) -> None:
    """A process outlived the Lambda sweep: this environment must serve no other invocation, of
    any owner. Exiting the runtime makes Lambda replace it (this invocation fails; the job keeps
    whatever status it reached, and the state machine's Catch fails it only if unfinished)."""
    import sys

    from zerg import observability

    observability.logger().error("sandbox sweep could not kill every process: ending this Lambda environment",
                                 extra={"survivors": survivors[:20]})
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(TAINTED_EXIT)
