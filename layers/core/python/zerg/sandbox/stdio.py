"""A process in a sandbox of its own that we talk to over its stdin and stdout (an owner's MCP server
run over stdio, :mod:`zerg.mcp_servers.client`): the same sandbox as ``container_exec``'s, kept open
for one conversation instead of one command.

Invariants:
- One sandbox per :func:`prepare`, never reused: its own call directory and, as root, its own host
  uid, the same limits (``ZERG_SANDBOX_*``), the same network rule (``ZERG_SANDBOX_NETWORK``) and the
  same scrubbed environment (``PATH``, ``HOME``, ``TMPDIR``, ``LANG``, ``TERM``: no secret of ours).
- ``binds`` are host directories the command sees read-only besides the system ones (bwrap; the
  ``unshare`` level sees only the system directories; best effort sees the host as the command's
  uid may): the installation that holds the server's program.
- :func:`kill` then :func:`teardown` leave nothing running and nothing on disk: the namespace's init
  is killed (the kernel then kills everything in it, a process that forked and left its parent
  included), then the launcher's process group, every process of the call's uid (as root), and the
  call directory is removed. :func:`teardown` runs once, however often it is called.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass, field

from zerg.config import Settings
from zerg.sandbox import invocation, processes, reaper, uids
from zerg.sandbox.detect import level
from zerg.sandbox.launch import BEST_EFFORT, SAFE_PATH, UNSHARE, Limits, _command, harden_parent


@dataclass
class Prepared:
    """What to start (``argv`` with ``env`` in ``cwd``) and what :func:`teardown` cleans up."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    mechanism: str
    call: reaper.CallDir
    _done: bool = field(default=False, repr=False)


def prepare(command: str, settings: Settings, *, binds: tuple[str, ...] = ()) -> Prepared:
    """A fresh sandbox for ``command`` (run by ``/bin/sh -c``), not started yet. The directories of
    ``binds`` that exist are bound read-only, and their ``bin`` subdirectories lead PATH."""
    harden_parent()
    current = level(settings)
    binds = tuple(dict.fromkeys(os.path.realpath(b) for b in binds if os.path.isdir(b)))
    bins = [f"{b}/bin" for b in binds if os.path.isdir(f"{b}/bin")]
    path = ":".join([*bins, SAFE_PATH])
    call = reaper.new_call_dir()
    try:
        argv, env, cwd = _command(current.mechanism, call, settings.sandbox_network, command, Limits.of(settings),
                                  current.binary, binds, path)
        if current.mechanism == BEST_EFFORT:
            pass  # nsinit: as root it stays root, the command becomes the call's uid
        elif current.mechanism == UNSHARE and call.uid is not None:
            uids.kill_uid(call.uid)
            argv, _ = uids.as_user(argv, None, die_with_parent=True)
        else:
            argv, extra = uids.as_user(argv, call.uid, die_with_parent=current.mechanism == UNSHARE)
            if extra:  # no setpriv: Popen keywords we cannot pass through an async spawn
                raise reaper.SandboxError("util-linux setpriv is needed to run an MCP server in the sandbox")
    except BaseException:
        call.release()
        raise
    return Prepared(argv, env, cwd, current.mechanism, call)


def kill(prepared: Prepared, pid: int) -> None:
    """Stop the sandbox whose launcher is ``pid``: its namespace's init is killed (the kernel then
    kills everything in the namespace and the launcher exits); at best effort the launcher is told to
    stop (it kills its whole tree). The caller then waits for the launcher and calls :func:`teardown`."""
    if prepared.mechanism == BEST_EFFORT:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        return
    for child in processes.children(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)


def teardown(prepared: Prepared, pid: int | None) -> None:
    """After the launcher ``pid`` exited (or was never started: None): kill what may be left of the
    call (its process group, its uid's processes) and remove its directory. Runs once."""
    if prepared._done:
        return
    prepared._done = True
    call = prepared.call
    try:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        if call.uid is not None:
            uids.kill_uid(call.uid)  # nothing else on the host has this uid
            if prepared.mechanism == BEST_EFFORT:
                reaper.remove_owned_by(call.uid)
                uids.remove_ipc(call.uid)
        elif prepared.mechanism == BEST_EFFORT:
            processes.kill_marked([call.marker])
    finally:
        if prepared.mechanism == BEST_EFFORT:
            invocation.record(call.marker)
        call.release()
