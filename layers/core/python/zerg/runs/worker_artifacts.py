"""Ownership of worker artifacts, decided in one place.

Invariants:
- A worker belongs to the owner recorded on its ``worker_jobs`` row; nothing else decides.
- Another owner's worker and a worker that does not exist give the *same* "not found" answer,
  so ids cannot be probed.
- Every read that names a worker (a job id or worker id from a model or an HTTP client:
  read_worker_result/file, get_worker_metadata, the HTTP worker browser) goes through
  :func:`open_worker`, which hands out a handle bound to one worker id. Reads that select workers
  by run or by search (evidence mount, grep_workers, list_workers, summaries, spawn outcomes) take
  their worker ids from a ``worker_jobs`` query filtered by the owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection

from zerg.artifacts.store import FileInfo, WorkerArtifactStore
from zerg.runs.jobs import get_owned_job


class NotFound(LookupError):
    """Not found for this owner (whether it exists for someone else is never said)."""


class NotStarted(LookupError):
    """The job exists for this owner but its worker has produced no artifacts yet."""


@dataclass(frozen=True)
class WorkerRef:
    job_id: int
    owner_id: int
    run_id: int | None
    worker_id: str | None
    status: str
    task: str
    row: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the whole index row


def resolve_worker(
    conn: Connection,
    owner_id: int,
    *,
    job_id: int | None = None,
    worker_id: str | None = None,
) -> WorkerRef:
    """The owner's worker by job id or worker id, or :class:`NotFound`."""
    if (job_id is None) == (worker_id is None):
        raise ValueError("give exactly one of job_id or worker_id")
    if not isinstance(owner_id, int) or owner_id <= 0:
        raise NotFound("no owner, no data")
    handle = job_id if job_id is not None else worker_id
    row = get_owned_job(conn, owner_id, job_id=job_id, worker_id=worker_id)
    if row is None:
        raise NotFound(f"worker {handle} not found")
    return WorkerRef(
        job_id=row["id"],
        owner_id=row["owner_id"],
        run_id=row["run_id"],
        worker_id=row["worker_id"],
        status=row["status"],
        task=row["task"],
        row=row,
    )


@dataclass(frozen=True)
class WorkerArtifacts:
    """Read access to one owned worker's artifacts (obtain it from :func:`open_worker`)."""

    ref: WorkerRef
    store: WorkerArtifactStore

    @property
    def worker_id(self) -> str:
        if self.ref.worker_id is None:
            raise NotStarted(f"worker {self.ref.job_id} has not started yet (status {self.ref.status})")
        return self.ref.worker_id

    def metadata(self) -> dict[str, Any]:
        return self.store.read_metadata(self.worker_id)

    def read_file(self, path: str) -> str:
        return self.store.read_file(self.worker_id, path)

    def list_files(self) -> list[FileInfo]:
        return self.store.list_files(self.worker_id)

    def size(self, path: str) -> int:
        return self.store.size(self.worker_id, path)

    def tail(self, path: str, nbytes: int) -> bytes:
        return self.store.tail(self.worker_id, path, nbytes)

    def head(self, path: str, nbytes: int) -> bytes:
        return self.store.head(self.worker_id, path, nbytes)

    def read_range(self, path: str, start: int, nbytes: int) -> bytes:
        return self.store.read_range(self.worker_id, path, start, nbytes)


def open_worker(
    conn: Connection,
    store: WorkerArtifactStore,
    owner_id: int,
    *,
    job_id: int | None = None,
    worker_id: str | None = None,
) -> WorkerArtifacts:
    return WorkerArtifacts(resolve_worker(conn, owner_id, job_id=job_id, worker_id=worker_id), store)
