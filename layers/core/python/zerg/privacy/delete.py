"""``zerg owners delete``: remove everything an owner has — artifacts first, then the owner row.

Invariants:
- Refused while the owner has unfinished runs or worker jobs, unless ``force``: then they are
  cancelled first (workers stop at their next check; the caller stops Step Functions executions).
- Artifacts go first, the owner row last, in one transaction that locks it. Every table hangs off
  ``owners`` with ON DELETE CASCADE (``tests/test_owner_data.py`` checks the schema), so the rows
  go all at once or not at all.
- Idempotent: interrupted anywhere, running it again finds what is left and finishes. A worker
  keeps its ``metadata.json`` until its other files are gone, so it is found by its owner id even
  when the index rows are gone; once the owner row is deleted, only workers written concurrently
  (a run started meanwhile, or cancelled with ``force``) could remain, and those are swept then.
- What fires the owner's schedules outside the database (EventBridge Scheduler, through
  ``delete_schedule``) goes first, before anything else is touched: when it cannot be deleted the
  delete is refused and nothing is gone, so no Scheduler schedule is left firing for an owner who
  no longer exists. Schedules created while the delete runs are caught under the owner's row lock.
- The local owner is deleted like any other; it is created again on next use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from psycopg import errors

from zerg import observability, owners
from zerg.artifacts.store import WorkerArtifactStore
from zerg.privacy import scope
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.schedules import store as schedules
from zerg.text import human_bytes

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool


class DeleteRefused(RuntimeError):
    """The owner cannot be deleted now; the message says why and what to do."""


@dataclass
class DeletePlan:
    """What a delete would remove, shown before the confirmation."""

    owner_id: int
    name: str
    rows: dict[str, int]
    workers: int
    artifact_files: int
    artifact_bytes: int
    unfinished_runs: list[int]
    unfinished_jobs: list[int]

    def summary(self) -> str:
        rows = ", ".join(f"{name} {n}" for name, n in self.rows.items() if n)
        return (f"owner {self.owner_id} ({self.name}): rows {rows}; artifacts: {self.artifact_files} files of "
                f"{self.workers} workers, {human_bytes(self.artifact_bytes)}")

    def busy(self) -> str | None:
        """Why the delete would be refused without ``force``, or None."""
        if not (self.unfinished_runs or self.unfinished_jobs):
            return None
        return _busy([{"id": r} for r in self.unfinished_runs], self.unfinished_jobs)


@dataclass
class DeleteReport:
    owner_id: int
    rows: dict[str, int] = field(default_factory=dict)  # empty: the owner row was already gone
    workers: int = 0
    artifact_files: int = 0
    artifact_bytes: int = 0
    cancelled_runs: list[int] = field(default_factory=list)
    cancelled_jobs: int = 0
    unattributed_workers: int = 0
    scheduler_schedules: set[int] = field(default_factory=set)  # schedule ids whose Scheduler schedule was deleted

    def lines(self) -> list[str]:
        out = []
        if self.cancelled_runs or self.cancelled_jobs:
            out.append(f"cancelled {len(self.cancelled_runs)} run(s) {self.cancelled_runs} and "
                       f"{self.cancelled_jobs} worker job(s)")
        rows = ", ".join(f"{name} {n}" for name, n in self.rows.items() if n) or "none (already deleted)"
        out.append(f"deleted owner {self.owner_id}: rows {rows}; artifacts: {self.artifact_files} files of "
                   f"{self.workers} workers, {human_bytes(self.artifact_bytes)}")
        if self.scheduler_schedules:
            out.append(f"deleted {len(self.scheduler_schedules)} EventBridge Scheduler schedule(s)")
        if self.unattributed_workers:
            out.append(f"note: {self.unattributed_workers} worker(s) in the store have an unreadable metadata.json "
                       "and are in no owner's index: not deleted (whose they are is unknown)")
        return out


def count_rows(conn: "Connection", owner_id: int) -> dict[str, int]:
    """Rows per table of the owner (each table's export function, counted as it streams)."""
    return {t.name: sum(1 for _ in t.rows(conn, owner_id)) for t in scope.OWNER_TABLES}


def plan_delete(pool: "ConnectionPool", store: WorkerArtifactStore, owner_id: int) -> DeletePlan:
    with pool.connection() as conn:
        rows = count_rows(conn, owner_id)
        workers = scope.owner_workers(conn, store, owner_id)
        name = next(iter(owners.export_owners(conn, owner_id)), {}).get("name", "")
        unfinished_runs = [r["id"] for r in runs.unfinished_runs(conn, owner_id)]
        unfinished_jobs = jobs.unfinished_jobs(conn, owner_id)
    files = [f for w in workers.worker_ids for f in _files(store, w)]
    return DeletePlan(owner_id, name, rows, len(workers.worker_ids), len(files), sum(f.size or 0 for f in files),
                      unfinished_runs, unfinished_jobs)


def _files(store: WorkerArtifactStore, worker_id: str) -> list:
    try:
        return store.list_files(worker_id)
    except LookupError:  # indexed, but no artifacts (never started, or already deleted)
        return []


def delete_owner(
    pool: "ConnectionPool", store: WorkerArtifactStore, owner_id: int, *, force: bool = False,
    stop_execution: Callable[[str], None] | None = None, delete_schedule: Callable[[int], None] | None = None,
) -> DeleteReport:
    """Delete the owner's artifacts, then its rows; :class:`DeleteRefused` while it has work in
    flight (unless ``force``). ``stop_execution`` stops a cancelled run's execution (Step Functions);
    ``delete_schedule`` removes what fires a schedule (the scheduler port's ``delete``)."""
    report = DeleteReport(owner_id)
    with pool.connection() as conn:
        unfinished_runs = runs.unfinished_runs(conn, owner_id)
        unfinished_jobs = jobs.unfinished_jobs(conn, owner_id)
        if (unfinished_runs or unfinished_jobs) and not force:
            raise DeleteRefused(_busy(unfinished_runs, unfinished_jobs))
        _delete_schedules(conn, owner_id, report, delete_schedule)
        if force:
            _cancel(conn, owner_id, unfinished_runs, report, stop_execution)
    _delete_artifacts(pool, store, owner_id, report)
    with pool.connection() as conn, conn.transaction():
        if owners.lock_owner(conn, owner_id) is None:
            return report  # deleted before: the artifacts above were what an interruption left
        raced = runs.unfinished_runs(conn, owner_id)  # started while the artifacts went: confirmed, so cancel
        _cancel(conn, owner_id, raced, report, stop_execution)
        _delete_schedules(conn, owner_id, report, delete_schedule)  # created meanwhile: the lock stops any more
        report.rows = count_rows(conn, owner_id)
        try:
            owners.delete_owner(conn, owner_id)
        except errors.ForeignKeyViolation as exc:  # a table that does not cascade: nothing was deleted
            raise DeleteRefused(f"table {exc.diag.table_name} refers to the owner without ON DELETE CASCADE: "
                                "fix its migration; the owner's rows are untouched") from None
    if force or raced:  # a worker of a cancelled run may have written since: sweep once more
        _delete_artifacts(pool, store, owner_id, report)
    return report


def _busy(unfinished_runs: list, unfinished_jobs: list[int]) -> str:
    parts = []
    if unfinished_runs:
        parts.append(f"{len(unfinished_runs)} unfinished run(s) ({', '.join(str(r['id']) for r in unfinished_runs)})")
    if unfinished_jobs:
        parts.append(f"{len(unfinished_jobs)} unfinished worker job(s) ({', '.join(map(str, unfinished_jobs))})")
    return (f"the owner has {' and '.join(parts)}: wait for them to finish, cancel them "
            "(POST /api/jarvis/runs/{id}/cancel), or pass --force to cancel them first")


def _delete_schedules(conn: "Connection", owner_id: int, report: DeleteReport,
                      delete_schedule: Callable[[int], None] | None) -> None:
    """Remove what fires each of the owner's schedules not removed yet; DeleteRefused on a failure."""
    if delete_schedule is None:
        return
    for row in schedules.list_for_owner(conn, owner_id):
        if row["id"] in report.scheduler_schedules:
            continue
        try:
            delete_schedule(row["id"])
        except Exception as exc:  # its rows would go while Scheduler keeps firing it: refuse instead
            observability.logger().warning("could not delete a deleted owner's Scheduler schedule", extra={
                "owner_id": owner_id, "schedule_id": row["id"], "reason": f"{type(exc).__name__}: {exc}"})
            raise DeleteRefused(f"could not delete the EventBridge Scheduler schedule of schedule {row['id']} "
                                f"({type(exc).__name__}: {exc}); the owner's rows are untouched: try again "
                                "shortly") from None
        report.scheduler_schedules.add(row["id"])


def _cancel(conn: "Connection", owner_id: int, unfinished: list, report: DeleteReport,
            stop_execution: Callable[[str], None] | None) -> None:
    for run in unfinished:
        runs.cancel_run(conn, owner_id, run["id"])
        report.cancelled_runs.append(run["id"])
        if run["execution_arn"] and stop_execution is not None:
            try:
                stop_execution(run["execution_arn"])
            except Exception as exc:  # the run is marked cancelled: its next step ends it anyway
                observability.logger().warning("could not stop a cancelled run's execution", extra={
                    "run_id": run["id"], "reason": f"{type(exc).__name__}: {exc}"})
    report.cancelled_jobs += jobs.cancel_owner_jobs(conn, owner_id)


def _delete_artifacts(pool: "ConnectionPool", store: WorkerArtifactStore, owner_id: int,
                      report: DeleteReport) -> None:
    with pool.connection() as conn:
        workers = scope.owner_workers(conn, store, owner_id)
    report.unattributed_workers = workers.unattributed
    for worker_id in workers.worker_ids:
        gone = store.delete_worker(worker_id)
        if gone.files:
            report.workers += 1
            report.artifact_files += gone.files
            report.artifact_bytes += gone.bytes
