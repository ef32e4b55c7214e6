"""The evidence mount: bounded excerpts of this run's worker artifacts, for one inference.

Mount → Reason → Prune: before every supervisor model call of a run, the system packages the
ground-truth evidence its workers produced (tails of raw tool outputs and of ``result.txt``,
plus pointers to everything), so the supervisor can answer from evidence even when a worker's
prose is empty or wrong. The block is ephemeral: it is never saved to ``thread_messages``.

Invariants:
- Pure packaging: no parsing of tool output, no model call. Order is decided from
  system-recorded facts only (a call's exit code / error flag in ``metadata.json``):
  failed calls first, then newest first.
- Only workers of *this* run of *this* owner are mounted.
- The rendered block never exceeds ``budget_bytes``, nor ``per_worker_bytes`` times the number of
  workers when that is given (a 2-worker run does not pay a 10-worker mount); files are read with
  head/tail ranges, so the bytes read stay proportional to the budget, not to the artifacts' size.
- The mount is where a worker's ``result.txt`` and tool outputs reach the supervisor: its outcome
  (the ``spawn_worker`` tool message) carries status, summary and pointers only, so no excerpt is
  shown twice. Each worker gets its result (a third of its room) and its most relevant tool output
  (half of what is left; the next ones share the rest).
- Unstarted workers and missing artifacts degrade to a placeholder line, never an exception.
- Only regular files are mounted: a symbolic link in a worker directory is neither listed as a
  pointer nor read (the store refuses to follow it anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zerg.artifacts import ArtifactError, ArtifactPathError, WorkerArtifactStore
from zerg.runs import jobs

DEFAULT_BUDGET_BYTES = 32_000
HEAD_BYTES = 1_000  # a file's first bytes (the command line, exit code) survive any cut
MIN_FILE_BYTES = 200  # below this a file excerpt is not worth its header: pointer only
TASK_CHARS = 120  # the task is in the spawn_worker call already: a reminder, not a copy
HEADER = "[INTERNAL EVIDENCE - EPHEMERAL]"


@dataclass
class _Worker:
    job_id: int
    worker_id: str | None
    status: str
    task: str


def _excerpt(store: WorkerArtifactStore, worker_id: str, path: str, size: int, allot: int) -> str:
    """The file within ``allot`` bytes: whole, or head + marker + tail."""
    if size <= allot:
        return store.head(worker_id, path, size).decode("utf-8", "replace")
    marker_room = 60
    head_n = min(HEAD_BYTES, allot // 3)
    tail_n = max(0, allot - head_n - marker_room)
    head = store.head(worker_id, path, head_n).decode("utf-8", "ignore")
    tail = store.tail(worker_id, path, tail_n).decode("utf-8", "ignore")
    cut = size - len(head.encode()) - len(tail.encode())
    return f"{head}\n[...truncated {cut} bytes...]\n{tail}"


def _order_tool_files(files: list[str], calls: list[dict[str, Any]]) -> list[str]:
    """Failed calls first (non-zero exit or error), then newest first."""
    failed = {c.get("path") for c in calls if c.get("ok") is False}
    newest_first = sorted(files, reverse=True)
    return [f for f in newest_first if f in failed] + [f for f in newest_first if f not in failed]


def _render_worker(store: WorkerArtifactStore, w: _Worker, budget: int) -> str:
    head = [f"Worker {w.job_id} ({w.worker_id or 'not started'}) [{w.status}]", f"Task: {w.task[:TASK_CHARS]}"]
    if not w.worker_id:
        return "\n".join(head + [f"(no artifacts yet: worker is {w.status})"])
    try:
        listing = {f.path: f.size for f in store.list_files(w.worker_id) if f.is_file}
        calls = store.read_metadata(w.worker_id).get("tool_calls") or [] if "metadata.json" in listing else []
    except Exception as exc:  # a damaged worker must not hide the others' evidence
        return "\n".join(head + [f"(artifacts unavailable: {type(exc).__name__})"])
    tool_files = _order_tool_files([p for p in listing if p.startswith("tool_calls/")], calls)
    pointers = [f"- read_worker_result({w.job_id})"] + [
        f'- read_worker_file({w.job_id}, "{p}")' for p in sorted(tool_files)
    ]
    fixed = "\n".join(head) + "\nPointers:\n" + "\n".join(pointers) + "\n"
    room = budget - len(fixed.encode()) - 2
    sections: list[str] = []
    # result.txt (the worker's own prose) gets a third of the room when tool output exists; the
    # most relevant tool file half of what is left, each next one half again, the last the rest.
    wanted = [("result.txt", room // 3 if tool_files else room)] if "result.txt" in listing else []
    wanted += [(p, 0) for p in tool_files]
    remaining = room
    for index, (path, share) in enumerate(wanted):
        label = f"--- {path} (size {listing[path]} bytes) ---\n"
        if share == 0:
            share = remaining if index == len(wanted) - 1 else remaining // 2
        allot = min(share, remaining) - len(label.encode()) - 1
        if allot < MIN_FILE_BYTES:
            continue
        try:
            text = _excerpt(store, w.worker_id, path, listing[path], allot)
        except (ArtifactError, ArtifactPathError) as exc:  # changed since the listing: say so, go on
            text = f"(unreadable: {exc})"
        block = label + text + "\n"
        block = block.encode()[: min(share, remaining)].decode("utf-8", "ignore")
        sections.append(block)
        remaining -= len(block.encode())
    if not listing.get("result.txt") and not tool_files:
        sections.append(f"(no output yet: worker is {w.status})\n")
    return "\n".join(head) + "\n" + "".join(sections) + "Pointers:\n" + "\n".join(pointers)


def build_evidence_mount(
    conn: Any,
    store: WorkerArtifactStore,
    owner_id: int,
    run_id: int,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    per_worker_bytes: int | None = None,
) -> str | None:
    """The mount text for this run, or None when the run has no workers. With
    ``per_worker_bytes`` the budget is at most that much per worker."""
    rows = jobs.run_jobs(conn, owner_id, run_id)
    if not rows:
        return None
    if per_worker_bytes is not None:
        budget_bytes = min(budget_bytes, per_worker_bytes * len(rows))
    workers = [_Worker(r["id"], r["worker_id"], r["status"], r["task"]) for r in rows]
    intro = f"{HEADER}\nRun: {run_id}\nWorkers: {len(workers)}\n"
    per_worker = max(0, (budget_bytes - len(intro.encode())) // len(workers) - 2)
    parts = [intro]
    for w in workers:
        block = _render_worker(store, w, per_worker)
        parts.append("\n" + block.encode()[:per_worker].decode("utf-8", "ignore") + "\n")
    text = "".join(parts)
    # Safety net: the per-worker budgets already fit; never let the block exceed the budget.
    return text.encode()[:budget_bytes].decode("utf-8", "ignore")
