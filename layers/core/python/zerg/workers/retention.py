"""Artifact retention: workers older than ``ZERG_ARTIFACT_RETENTION_DAYS`` lose their artifacts and
their ``worker_jobs`` rows, unless something still stands on them. ``zerg workers gc`` runs it by
hand; ``zerg serve``'s housekeeping loop and, on AWS, a daily EventBridge rule run it on their own.

Invariants:
- Unset retention keeps every worker forever: :func:`run_retention` then touches nothing.
- Age is the job's ``created_at`` in the index; only finished jobs (``JOB_FINISHED``) are candidates.
- A worker is kept, whatever its age, while it is pinned (:func:`pinned_workers`, the one place
  that says what pins a worker) or while its run is unfinished.
- Artifacts go first (``metadata.json`` last, :meth:`WorkerArtifactStore.delete_worker`), the index
  row after, and the row's DELETE checks again that the job is finished and old. Interrupted
  anywhere, the row (or ``metadata.json``) is still there and the next sweep finishes the worker;
  a row is never gone while its artifacts stay (``zerg workers reindex`` would bring it back).
- One worker that cannot be deleted is reported and skipped; the sweep goes on with the others.
- A dry run only reads (it lists each candidate's files to say what would go).
- ``should_stop`` is asked before each worker (a Lambda's remaining time): a sweep cut short is
  reported ``complete=False`` and the next one continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.artifacts.store import WorkerArtifactStore
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.runs import threads
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

    from zerg.runtime import Runtime

PAGE = 500


@dataclass(frozen=True)
class Pinned:
    """Workers retention keeps whatever their age: by job id and by worker id."""

    job_ids: frozenset[int] = frozenset()
    worker_ids: frozenset[str] = frozenset()

    def holds(self, job: dict[str, Any]) -> bool:
        return job["id"] in self.job_ids or (job["worker_id"] is not None and job["worker_id"] in self.worker_ids)


def pinned_workers(conn: "Connection", owner_id: int) -> Pinned:
    """THE hook for "pinned worker ids": every reference that must keep an owner's old workers
    adds its query here, and nowhere else.

    - thread messages' provenance: the job ids an answer cites (``metadata.job_ids``);
    - memory files citing workers: none yet (the memory tables do not exist); the memory issue
      adds the worker ids its files cite to ``worker_ids`` here.
    """
    return Pinned(job_ids=frozenset(threads.cited_job_ids(conn, owner_id)))


@dataclass(frozen=True)
class ExpiredWorker:
    owner_id: int
    job_id: int
    worker_id: str | None  # None: the job never started, so only its row goes
    status: str
    created_at: datetime
    files: int = 0
    bytes: int = 0


@dataclass
class RetentionReport:
    days: int
    cutoff: datetime
    dry_run: bool
    owner_id: int | None = None  # None: every owner
    expired: list[ExpiredWorker] = field(default_factory=list)  # deleted (or, dry run, would be)
    kept_pinned: int = 0
    kept_unfinished_run: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)  # (job id, why)
    complete: bool = True

    @property
    def files(self) -> int:
        return sum(w.files for w in self.expired)

    @property
    def bytes(self) -> int:
        return sum(w.bytes for w in self.expired)

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        out = [f"{verb} job {w.job_id} {w.worker_id or '(never started)'} of owner {w.owner_id}: {w.status}, "
               f"created {w.created_at:%Y-%m-%d}, {w.files} files, {_human(w.bytes)}" for w in self.expired]
        out += [f"could not delete job {job_id}: {why}" for job_id, why in self.failed]
        out.append(f"retention {self.days} days (created before {self.cutoff:%Y-%m-%d %H:%M} UTC): {verb} "
                   f"{len(self.expired)} workers, {self.files} files, {_human(self.bytes)}; kept "
                   f"{self.kept_pinned} pinned (cited by the thread), {self.kept_unfinished_run} of unfinished runs"
                   + ("" if self.complete else "; stopped early, the next sweep goes on"))
        return out

    def as_payload(self) -> dict[str, Any]:
        """Counts only (no worker ids): the Lambda's answer and the housekeeping log line."""
        return {"retention_days": self.days, "cutoff": self.cutoff.isoformat(), "dry_run": self.dry_run,
                "workers": len(self.expired), "files": self.files, "bytes": self.bytes,
                "kept_pinned": self.kept_pinned, "kept_unfinished_run": self.kept_unfinished_run,
                "failed": len(self.failed), "complete": self.complete}


def sweep(
    pool: "ConnectionPool", store: WorkerArtifactStore, *, days: int, owner_id: int | None = None,
    dry_run: bool = False, now: datetime | None = None, should_stop: Callable[[], bool] | None = None,
) -> RetentionReport:
    """Delete (or, ``dry_run``, list) the workers created more than ``days`` ago that nothing pins,
    for every owner or for ``owner_id`` only."""
    if days < 1:
        raise ValueError("retention must be at least 1 day")
    cutoff = (now or utcnow()) - timedelta(days=days)
    report = RetentionReport(days, cutoff, dry_run, owner_id)
    keep: dict[int, tuple[Pinned, set[int]]] = {}  # per owner: pins and unfinished run ids, read once
    after = 0
    while True:
        with pool.connection() as conn:
            page = jobs.expired_jobs(conn, cutoff, owner_id=owner_id, after_id=after, limit=PAGE)
        for job in page:
            after = job["id"]
            if should_stop is not None and should_stop():
                report.complete = False
                return _finish(report)
            pinned, running = _keep(pool, keep, job["owner_id"])
            if pinned.holds(job):
                report.kept_pinned += 1
            elif job["run_id"] is not None and job["run_id"] in running:
                report.kept_unfinished_run += 1
            else:
                _expire(pool, store, job, cutoff, report)
        if len(page) < PAGE:
            return _finish(report)


def _keep(pool: "ConnectionPool", keep: dict[int, tuple[Pinned, set[int]]], owner_id: int) -> tuple[Pinned, set[int]]:
    if owner_id not in keep:
        with pool.connection() as conn:
            keep[owner_id] = (pinned_workers(conn, owner_id), {r["id"] for r in runs.unfinished_runs(conn, owner_id)})
    return keep[owner_id]


def _expire(pool: "ConnectionPool", store: WorkerArtifactStore, job: dict[str, Any], cutoff: datetime,
            report: RetentionReport) -> None:
    wid = job["worker_id"]
    try:
        if report.dry_run:
            listed = _listing(store, wid)
            files, size = len(listed), sum(f.size or 0 for f in listed)
        else:
            gone = store.delete_worker(wid) if wid else None
            files, size = (gone.files, gone.bytes) if gone else (0, 0)
            with pool.connection() as conn:
                jobs.delete_expired_job(conn, job["owner_id"], job["id"], cutoff)
    except Exception as exc:  # S3, disk or database trouble: this worker stays for the next sweep, the others go on
        report.failed.append((job["id"], f"{type(exc).__name__}: {exc}"))
        observability.logger().warning("retention could not delete a worker", extra={
            "job_id": job["id"], "worker_id": wid, "reason": f"{type(exc).__name__}: {exc}"})
        return
    report.expired.append(ExpiredWorker(job["owner_id"], job["id"], wid, job["status"], job["created_at"], files, size))


def _listing(store: WorkerArtifactStore, worker_id: str | None) -> list:
    if worker_id is None:
        return []
    try:
        return store.list_files(worker_id)
    except LookupError:  # indexed, but its artifacts are already gone
        return []


def _finish(report: RetentionReport) -> RetentionReport:
    if not report.dry_run:
        observability.metrics({"task": "retention"}, ("WorkersExpired", len(report.expired), "Count"),
                              ("ArtifactBytesExpired", report.bytes, "Bytes"),
                              ("WorkersExpiryFailed", len(report.failed), "Count"))
    return report


def run_retention(rt: "Runtime", should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """The scheduled sweep with the configured retention, every owner; its counts (``{"retention":
    "off"}`` when ``ZERG_ARTIFACT_RETENTION_DAYS`` is unset)."""
    days = rt.settings.artifact_retention_days
    if days is None:
        return {"retention": "off"}
    return sweep(rt.pool, rt.store, days=days, should_stop=should_stop).as_payload()


def _human(n: int) -> str:
    from zerg.text import human_bytes

    return human_bytes(n)
