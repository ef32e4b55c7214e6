"""What approving an approval of a kind that nothing waits on does: the registry (:func:`register`),
filled by the composition root (:mod:`zerg.wiring`), read by :mod:`zerg.approvals.wait`.

A ``call`` approval needs none (its run's execution waits on the token and runs the call itself). A
``directive`` approval is a change only the owner may decide, made by :mod:`zerg.inbound.directives`,
a layer above: the approvals know it only by the dotted path registered here, so an approval from any
channel (API, CLI, SMS code, email, web, the owner's "yes") is dispatched without an upward import.

Invariants:
- An applier is ``function(rt, owner_id, row) -> str``: it makes the change of an approval already
  decided ``approved`` (the claim) and says what was done, or why not; it never raises for a change
  that could not be made (that is said), so the approval's outcome is always recorded.
- Named by its dotted path and imported on the first approval that needs it: no cold start pays for it.
- A kind with no applier registered is never decided (:func:`applier` raises before the claim).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerg.runtime import Runtime

Applier = Callable[["Runtime", int, dict[str, Any]], str]

_targets: dict[str, str] = {}
_lock = threading.Lock()


class NoApplier(LookupError):
    """Nothing is registered to make an approval of this kind (the composition root was not loaded)."""


def register(kind: str, target: str) -> None:
    """Approving an approval of ``kind`` calls ``target`` ("package.module:function")."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"an applier is 'package.module:function', not {target!r}")
    with _lock:
        _targets[kind] = target


def applier(kind: str) -> Applier:
    """The applier of ``kind`` (its module imported on first use); NoApplier when none is registered."""
    with _lock:
        target = _targets.get(kind)
    if target is None:
        raise NoApplier(f"no applier is registered for {kind!r} approvals (zerg.wiring registers them)")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
