"""Which sandbox this host gives ``container_exec``: probed once per process, said once, loudly.

Invariants:
- Order: bubblewrap where installed and working, else util-linux ``unshare`` with unprivileged
  user namespaces, else best effort. "Working" means a real probe sandbox ran ``echo`` and
  printed it: an installed tool that the kernel or a container runtime refuses does not count.
- On Lambda (:func:`zerg.hosting.lambda_environment`) there are no namespaces: best effort, no probe.
- The probe runs once per process (under a lock); what it found, with the reason each stronger
  mechanism was passed over, is what ``zerg doctor`` prints. Where it falls to best effort,
  ``zerg run``/``zerg serve`` say so in one line with the one command that fixes it (:func:`fix`).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from dataclasses import dataclass

from zerg.config import Settings
from zerg.sandbox.launch import BEST_EFFORT, BWRAP, UNSHARE, run
from zerg.sandbox.reaper import SandboxError, reap_leftovers

PROBE_OUTPUT = "zerg-sandbox-probe"


@dataclass(frozen=True)
class Level:
    mechanism: str  # bwrap | unshare | best-effort
    binary: str | None  # the launcher's path (None: best effort)
    network: bool  # True: the host's network (ZERG_SANDBOX_NETWORK=on)
    per_call_uid: bool  # each call runs as its own unprivileged host uid (we are root)
    notes: tuple[str, ...] = ()  # why each stronger mechanism was passed over

    @property
    def isolated(self) -> bool:
        return self.mechanism != BEST_EFFORT

    def describe(self) -> str:
        net = "network on (the host's network)" if self.network else "network off (only lo)"
        if not self.isolated:
            net = "the host's network (no network namespace)"
        uid = "a per-call host uid" if self.per_call_uid else f"this process's uid ({os.geteuid()})"
        return f"{self.mechanism}, {net}, commands run as {uid}"


_lock = threading.Lock()
_found: tuple[str, str | None, tuple[str, ...]] | None = None
_announced = False


def _probe(mechanism: str, binary: str) -> str | None:
    """None when a sandbox of ``mechanism`` runs a command here, else why not (one line)."""
    try:
        result = run(f"echo {PROBE_OUTPUT}", 20, mechanism=mechanism, binary=binary, output_cap=65536)
    except (OSError, SandboxError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if result.exit_code == 0 and result.stdout.strip() == PROBE_OUTPUT:
        return None
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else f"probe exited with {result.exit_code}"


def fix(notes: tuple[str, ...]) -> str:
    """The one command that gives this host a namespace sandbox, judged from why each was passed over."""
    sudo = "" if os.geteuid() == 0 else "sudo "
    if any(note.startswith("bwrap: not installed") for note in notes):
        return f"{sudo}apt-get install bubblewrap"
    if any(note.startswith("bwrap:") and "prlimit" in note for note in notes):
        return f"{sudo}apt-get install util-linux"
    for knob, value in (("kernel/apparmor_restrict_unprivileged_userns", "0"),
                        ("kernel/unprivileged_userns_clone", "1")):
        if os.path.exists(f"/proc/sys/{knob}"):
            return f"{sudo}sysctl -w {knob.replace('/', '.')}={value}"
    return f"{sudo}sysctl -w user.max_user_namespaces=16384"


def _detect() -> tuple[str, str | None, tuple[str, ...]]:
    notes = []
    for mechanism, name in ((BWRAP, "bwrap"), (UNSHARE, "unshare")):
        binary = shutil.which(name)
        if binary is None:
            notes.append(f"{name}: not installed")
            continue
        why = _probe(mechanism, binary)
        if why is None:
            return mechanism, binary, tuple(notes)
        notes.append(f"{name}: {why}")
    return BEST_EFFORT, None, tuple(notes)


def level(settings: Settings) -> Level:
    """The sandbox every ``container_exec`` of this process gets (probing on first use)."""
    global _found
    from zerg.hosting import lambda_environment

    if lambda_environment(settings):
        found: tuple[str, str | None, tuple[str, ...]] = (BEST_EFFORT, None, ("AWS Lambda: no namespaces",))
    else:
        with _lock:
            if _found is None:
                reap_leftovers()  # a crash's sandboxes go before the first new one
                _found = _detect()
            found = _found
    mechanism, binary, notes = found
    return Level(mechanism, binary, settings.sandbox_network, os.geteuid() == 0, notes)


def announce(settings: Settings) -> Level:
    """At the start of ``zerg run`` / ``zerg serve``: remove a crash's leftovers, and say once,
    loudly, on stderr when commands will run without a sandbox."""
    global _announced

    reap_leftovers()
    current = level(settings)
    if not current.isolated and not _announced:
        _announced = True
        print(f"zerg: WARNING: container_exec has NO sandbox on this host ({'; '.join(current.notes)});"
              f" commands run at best effort and see this host's processes, network and readable files."
              f" Fix: {fix(current.notes)}", file=sys.stderr, flush=True)
    return current


def forget() -> None:
    """Probe again on next use (after installing bubblewrap, say)."""
    global _found, _announced
    with _lock:
        _found, _announced = None, False
