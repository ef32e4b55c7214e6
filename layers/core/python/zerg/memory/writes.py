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
- Safe to repeat: a re-delivered event finds the run's episode and writes no second one; facts are
  add-only with dedup; compaction and embedding only do what is still pending.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.runs import store as runs

if TYPE_CHECKING:
    from zerg.runtime import Runtime


def remember_run(rt: "Runtime", run_id: int, owner_id: int, thread_id: int | None) -> dict[str, Any]:
    """Write the run's memories; a report of each part (what it did, skipped or why it failed)."""
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, owner_id, run_id)
    if run is None or (thread_id is not None and run["thread_id"] != thread_id):
        return {"run_id": run_id, "skipped": "run not found"}
    if run["status"] != "success":
        return {"run_id": run_id, "skipped": f"the run ended {run['status']}"}
    from zerg.memory import compaction, indexer, org

    parts: dict[str, Callable[[], Any]] = {
        "episode": lambda: write_episode(rt, run),
        "facts": lambda: org.extract_facts(rt, run),
        "compacted": lambda: compaction.compact(rt, owner_id, run["thread_id"], run_id=run_id),
        # Last: the new episode (and notes) get their vectors now; on Lambda nothing else would.
        "embedded": lambda: indexer.embed_pending(rt, owner_id=owner_id),
    }
    report: dict[str, Any] = {"run_id": run_id}
    for name, part in parts.items():
        report[name] = _best_effort(name, run_id, part)
    return report


def _best_effort(name: str, run_id: int, part: Callable[[], Any]) -> Any:
    try:
        return part()
    except Exception as exc:
        observability.logger().warning(f"remember: {name} failed", exc_info=True, extra={"run_id": run_id})
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def write_episode(rt: "Runtime", run: dict[str, Any]) -> dict[str, Any]:
    """The run's episode file (see :mod:`zerg.memory.episodic`): its path, or why none was written."""
    from zerg.memory import episodic, filesystem

    why_not = episodic.should_write(run)
    if why_not:
        return {"skipped": why_not}
    prefix = f"{episodic.folder(run)}{run['id']}-"
    existing = filesystem.ls(rt, run["owner_id"], prefix, limit=1).files
    if existing:  # a re-delivered event: the run has its episode
        return {"path": existing[0].path, "written": False}
    draft, meta = episodic.draft_episode(rt, run)
    tags = [*draft.tags, "episode"] if "episode" not in draft.tags else draft.tags
    path = episodic.path_for(run, draft.title)
    filesystem.write(rt, run["owner_id"], path, episodic.render(run, draft, tags), title=draft.title[:255],
                     tags=tags, metadata={"episode": meta}, writer="system", run_id=run["id"])
    return {"path": path, "written": True, "model": meta["model"], "error": meta["error"]}
