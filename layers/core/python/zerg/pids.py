"""Is a process id in use? The one ``kill(pid, 0)`` check (the embedded database's holders, a run's
executor without /proc, a sandbox call's marker)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while ``pid`` names a live process, another user's included (``EPERM`` means it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
