"""What a run leaves in long-term memory, after it: the Remember step.

:func:`remember_run` is the supervisor's ``remember`` action, invoked asynchronously by the state
machine's Remember state once Finalize has recorded the run (``supervisor_complete`` is already
out). Locally the engine runs it on a background thread; ``zerg run`` waits for it (bounded)
before exiting.

Invariants:
- Never on the run's critical path and never able to change the run: the run is read, not written.
- Only a successful run is remembered (another status: nothing is done).
- Each part runs on its own — the episode, organisational-memory extraction, thread compaction,
  re-embedding — so one failing (logged with its reason) never stops the others; nothing raises.
- Safe to repeat, and to run twice at once: the whole step holds a transaction-scoped advisory lock
  keyed by the run id; a second delivery arriving meanwhile finds it taken and does nothing. Under
  the lock, extraction comes first and the episode last, so a run that has its episode (found by
  the ``{run_id}-`` name in the run's folder, whatever title the model chose) was extracted
  already: a re-delivery writes no second episode and bumps no importance again. Extraction also
  skips a run that already has memories sourced from it. Compaction and embedding only do what is
  still pending. (A delivery that dies between extraction and the episode leaves no marker: the
  retry may bump a duplicate's importance once more. Nothing else repeats.)
- Provenance: the episode and the extracted memories are derived from the run's task and answer
  (the answer may repeat tool output), so they are written by ``system`` with the run id, and the
  episode's metadata says ``derived_from``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.runs import store as runs

if TYPE_CHECKING:
    from zerg.runtime import Runtime


_LOCK_SPACE = 0x5A52454D  # advisory-lock namespace for "the Remember step of run N"


def remember_run(rt: "Runtime", run_id: int, owner_id: int, thread_id: int | None) -> dict[str, Any]:
    """Write the run's memories; a report of each part (what it did, skipped or why it failed)."""
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
    if run is None or (thread_id is not None and run["thread_id"] != thread_id):
        return {"run_id": run_id, "skipped": "run not found"}
    if run["status"] != "success":
        return {"run_id": run_id, "skipped": f"the run ended {run['status']}"}
    with rt.pool.connection() as lock_conn, lock_conn.transaction():
        got = lock_conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s) AS got",
                                (_LOCK_SPACE, run_id % 2**31)).fetchone()["got"]
        if not got:  # a concurrent delivery of the same event is doing it
            return {"run_id": run_id, "skipped": "another delivery is remembering this run"}
        return _remember(rt, run)


def _remember(rt: "Runtime", run: dict[str, Any]) -> dict[str, Any]:
    from zerg.memory import compaction, indexer, org

    run_id, owner_id = run["id"], run["owner_id"]
    found = _best_effort("episode", run_id, lambda: existing_episode(rt, run))
    episode = found if isinstance(found, str) else None  # a failed look-up: each part checks again
    parts: dict[str, Callable[[], Any]] = {
        # First: the episode, written last, is the marker that this run was remembered.
        "facts": (lambda: {"skipped": "already remembered (the run has its episode)"}) if episode
        else (lambda: org.extract_facts(rt, run)),
        "episode": (lambda: {"path": episode, "written": False}) if episode else (lambda: write_episode(rt, run)),
        "compacted": lambda: compaction.compact(rt, owner_id, run["thread_id"], run_id=run_id),
        # Last: the new episode (and notes) get their vectors now; on Lambda nothing else would.
        "embedded": lambda: indexer.embed_pending(rt, owner_id=owner_id),
    }
    report: dict[str, Any] = {"run_id": run_id}
    for name, part in parts.items():
        report[name] = _best_effort(name, run_id, part)
    return report


def existing_episode(rt: "Runtime", run: dict[str, Any]) -> str | None:
    """The path of the run's episode, if it has one (by its ``{run_id}-`` name, not its title)."""
    from zerg.memory import episodic, filesystem

    found = filesystem.ls(rt, run["owner_id"], f"{episodic.folder(run)}{run['id']}-", limit=1).files
    return found[0].path if found else None


def _best_effort(name: str, run_id: int, part: Callable[[], Any]) -> Any:
    try:
        return part()
    except Exception as exc:
        observability.logger().warning(f"remember: {name} failed", exc_info=True, extra={"run_id": run_id})
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def write_episode(rt: "Runtime", run: dict[str, Any]) -> dict[str, Any]:
    """The run's episode file (see :mod:`zerg.memory.episodic`): its path, or why none was written."""
    from zerg.memory import episodic, filesystem

    why_not = episodic.should_write(run, _severity(rt, run))
    if why_not:
        return {"skipped": why_not}
    existing = existing_episode(rt, run)
    if existing:  # a re-delivered event: the run has its episode
        return {"path": existing, "written": False}
    draft, meta = episodic.draft_episode(rt, run)
    tags = [*draft.tags, "episode"] if "episode" not in draft.tags else draft.tags
    path = episodic.path_for(run, draft.title)
    filesystem.write(rt, run["owner_id"], path, episodic.render(run, draft, tags), title=draft.title[:255],
                     tags=tags, metadata={"episode": meta, "derived_from": episodic.DERIVED_FROM},
                     writer="system", run_id=run["id"])
    return {"path": path, "written": True, "model": meta["model"], "error": meta["error"]}


def _severity(rt: "Runtime", run: dict[str, Any]) -> str | None:
    """A background run's assessed severity (its inbox item's), else None."""
    if run["trigger"] != "schedule":
        return None
    from zerg.alerts import inbox

    with rt.pool.connection() as conn:
        item = inbox.get(conn, run["owner_id"], run["id"])
    return item["severity"] if item else None
