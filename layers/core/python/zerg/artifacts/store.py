"""WorkerArtifactStore: every byte a worker produced, in one layout on S3 or a local directory.

Layout (keys relative to the store root, identical on both backends)::

    workers/{worker_id}/metadata.json          derived view: status, timings, summary
    workers/{worker_id}/result.txt             CANONICAL final answer, written once, never cut
    workers/{worker_id}/thread.jsonl           CANONICAL execution trace, append-only
    workers/{worker_id}/tool_calls/NNN_tool.txt  raw tool outputs, written as each call runs

Invariants:
- ``result.txt`` and ``thread.jsonl`` are canonical. ``result.txt`` is written exactly once and
  never truncated; tool outputs are created exclusively and never overwritten (a streamed one,
  :meth:`open_tool_output`, claims its name at open and only its own stream fills it); the thread
  only grows. System behaviour depends on these, not on derived data.
- ``metadata.json`` summary fields and the ``worker_jobs`` index are derived: rebuildable from the
  artifacts (``zerg workers reindex``) and allowed to fail safely (``update_summary`` never raises).
- ``status`` is system-determined (exit codes, exceptions, timeouts) and set once by
  ``complete_worker``; it never comes from an LLM.
- Callers' paths pass through :func:`clean_relpath`; ownership is decided elsewhere, once
  (:mod:`zerg.runs.worker_artifacts`): a store trusts the worker id it is given.
- A symbolic link in a worker directory is never followed by any read or write; ``list_files``
  shows it as ``kind="symlink"`` without a size (only the local backend can hold one).
- Tails, heads and :meth:`read_range` read only the bytes asked for (file seek / S3 ranged GET);
  ``bytes_read`` counts every byte read back, so callers can prove their reads are bounded.
- Deleting a worker removes ``metadata.json`` last: until it goes, the worker is still found (by
  :meth:`owner_workers`), so an interrupted delete is finished by running it again. On S3 every
  stored version goes too (the bucket is versioned).

Backends implement the small set of ``_primitives`` below; every operation is written once here.
"""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from zerg.artifacts.paths import ArtifactPathError, check_worker_id, clean_relpath, new_worker_id, tool_file_name
from zerg.statuses import JOB_FINISHED
from zerg.timestamps import iso, parse_iso, utcnow

if TYPE_CHECKING:
    from zerg.artifacts.stream import ArtifactStream

log = logging.getLogger(__name__)


class ArtifactError(RuntimeError):
    """A store operation that cannot be done; the message says why."""


class ArtifactNotFound(ArtifactError, LookupError):
    pass


class WorkerExists(ArtifactError):
    pass


FileKind = Literal["file", "symlink", "other"]


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the worker directory
    size: int | None  # None unless kind == "file": a link's target is never looked at
    kind: FileKind = "file"  # "symlink" / "other" (FIFO, device): listed, never read or followed

    @property
    def is_file(self) -> bool:
        return self.kind == "file"


@dataclass
class OwnerWorkers:
    """The workers whose ``metadata.json`` names one owner, and those whose owner is unknown."""

    worker_ids: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (worker_id, why)


@dataclass(frozen=True)
class DeletedFiles:
    files: int
    bytes: int


class WorkerArtifactStore(ABC):
    """One interface, two backends (:class:`LocalArtifactStore`, :class:`S3ArtifactStore`)."""

    def __init__(self) -> None:
        self._bytes_read = 0
        self._stats_lock = threading.Lock()
        self._meta_locks: dict[str, threading.Lock] = {}
        self._next_seq: dict[str, int] = {}  # a hint only: exclusive create is the arbiter

    # --- backend primitives (keys are full store keys: "workers/<id>/...") ----------------
    @abstractmethod
    def _create(self, key: str, data: bytes) -> bool:
        """Write ``data`` only if ``key`` does not exist; False if it does."""

    @abstractmethod
    def _create_stream(self, key: str) -> "ArtifactStream | None":
        """Claim ``key`` as :meth:`_create` would and return a writer for it; None if it exists."""

    @abstractmethod
    def _put(self, key: str, data: bytes) -> None:
        """Replace ``key`` atomically (readers see the old or the new bytes, never a mix)."""

    @abstractmethod
    def _append(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _get(self, key: str) -> bytes:
        """Whole object; :class:`ArtifactNotFound` if missing."""

    @abstractmethod
    def _range(self, key: str, start: int | None, length: int) -> bytes:
        """``length`` bytes from ``start``, or the last ``length`` bytes when ``start`` is None."""

    @abstractmethod
    def _size(self, key: str) -> int: ...

    @abstractmethod
    def _list(self, prefix: str) -> list[FileInfo]:
        """Objects under ``prefix`` (path relative to it), sorted by path."""

    @abstractmethod
    def _worker_ids(self) -> Iterator[str]: ...

    @abstractmethod
    def _is_worker(self, worker_id: str) -> bool: ...

    @abstractmethod
    def _stream(self, key: str) -> BinaryIO:
        """A binary stream of the whole object (``read(n)``, ``close()``); ArtifactNotFound if missing."""

    @abstractmethod
    def _delete(self, keys: list[str]) -> None:
        """Remove these objects (on S3 every version); keys already gone are fine."""

    # --- accounting ------------------------------------------------------------------------
    @property
    def bytes_read(self) -> int:
        """Bytes read back from the store by this instance (content, not metadata calls)."""
        return self._bytes_read

    def _count(self, data: bytes) -> bytes:
        with self._stats_lock:
            self._bytes_read += len(data)
        return data

    # --- keys ----------------------------------------------------------------------------
    @staticmethod
    def _key(worker_id: str, relpath: str = "") -> str:
        base = f"workers/{check_worker_id(worker_id)}/"
        return base + relpath

    def _require_worker(self, worker_id: str) -> None:
        if not self._is_worker(check_worker_id(worker_id)):
            raise ArtifactNotFound(f"worker {worker_id} has no artifacts")

    # --- lifecycle ------------------------------------------------------------------------
    def create_worker(
        self,
        task: str,
        owner_id: int,
        *,
        job_id: int | None = None,
        run_id: int | None = None,
        model: str | None = None,
        worker_id: str | None = None,
        now: datetime | None = None,
    ) -> str:
        """Create the worker directory and its metadata; return the new worker id.

        An explicit ``worker_id`` that already exists is refused (:class:`WorkerExists`); a
        generated one is retried on the (2^-24) chance of a collision.
        """
        if not isinstance(owner_id, int) or owner_id <= 0:
            raise ArtifactError("owner_id is required to create a worker")
        now = now or utcnow()
        for _ in range(5):
            wid = check_worker_id(worker_id) if worker_id else new_worker_id(task, now)
            meta = {
                "worker_id": wid,
                "job_id": job_id,
                "owner_id": owner_id,
                "supervisor_run_id": run_id,
                "task": task,
                "model": model,
                "status": "running",
                "created_at": iso(now),
                "started_at": iso(now),
                "finished_at": None,
                "duration_ms": None,
                "error": None,
                "summary": None,
                "summary_meta": None,
            }
            if self._create(self._key(wid, "metadata.json"), _json(meta)):
                return wid
            if worker_id:
                raise WorkerExists(f"worker {worker_id} already exists")
        raise ArtifactError("could not allocate a unique worker id")

    def save_tool_output(self, worker_id: str, tool_name: str, output: str) -> str:
        """Persist one tool call's raw output now; return its path (``tool_calls/NNN_tool.txt``)."""
        self._require_worker(worker_id)
        data = output.encode("utf-8", errors="replace")
        return self._claim_tool_file(worker_id, tool_name, lambda key: self._create(key, data))[0]

    def open_tool_output(self, worker_id: str, tool_name: str) -> "ArtifactStream":
        """Claim the next ``tool_calls/NNN_tool.txt`` now and return a stream that writes it as the
        output arrives (``stream.path`` is its path); close it, or use it in a ``with`` block."""
        self._require_worker(worker_id)
        return self._claim_tool_file(worker_id, tool_name, self._create_stream)[1]

    def _claim_tool_file(self, worker_id: str, tool_name: str, claim: Any) -> tuple[str, Any]:
        """(path, what ``claim(key)`` returned) for the first free number from the hint on."""
        seq = self._next_seq.get(worker_id)
        if seq is None:  # first call in this process (or a retry elsewhere): ask the store
            existing = self._list(self._key(worker_id, "tool_calls/"))
            seq = 1 + max((_seq(f.path) for f in existing), default=0)
        while True:
            rel = tool_file_name(seq, tool_name)
            if claimed := claim(self._key(worker_id, rel)):
                self._next_seq[worker_id] = seq + 1
                return rel, claimed
            seq += 1  # another writer took this number: never overwrite, take the next

    def append_thread(self, worker_id: str, message: dict[str, Any]) -> None:
        """Append one message to ``thread.jsonl`` (one JSON object per line)."""
        self._require_worker(worker_id)
        line = json.dumps(message, ensure_ascii=False, default=str) + "\n"
        self._append(self._key(worker_id, "thread.jsonl"), line.encode())

    def save_result(self, worker_id: str, text: str) -> None:
        """Write the canonical ``result.txt`` once; a second write is refused, never applied."""
        self._require_worker(worker_id)
        if not self._create(self._key(worker_id, "result.txt"), text.encode("utf-8", "replace")):
            raise ArtifactError(f"worker {worker_id} already has a result.txt; it is canonical")

    def complete_worker(
        self,
        worker_id: str,
        status: str,
        *,
        error: str | None = None,
        finished_at: datetime | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record the system-determined final status and timings; return the metadata.

        ``cancelled``: the worker was stopped from outside (its run was cancelled, reached its
        deadline or was interrupted)."""
        if status not in JOB_FINISHED:
            raise ArtifactError(f"status must be one of {sorted(JOB_FINISHED)}, not {status!r}")
        finished = finished_at or utcnow()

        def apply(meta: dict[str, Any]) -> None:
            if meta.get("status") in JOB_FINISHED:
                raise ArtifactError(f"worker {worker_id} is already complete ({meta['status']})")
            started = parse_iso(meta["started_at"])
            meta.update(extra or {})
            meta.update(
                status=status,
                error=error,
                finished_at=iso(finished),
                duration_ms=max(0, int((finished - started).total_seconds() * 1000)),
            )

        return self._update_metadata(worker_id, apply)

    def set_paused(self, worker_id: str, state: dict[str, Any] | None) -> dict[str, Any]:
        """Record (``state``) or clear (None) what a worker that waits for the owner's approval must
        resume with (its usage so far, its tool-call index): the worker's step ended, its job did not."""

        def apply(meta: dict[str, Any]) -> None:
            if meta.get("status") in JOB_FINISHED:
                raise ArtifactError(f"worker {worker_id} is already complete ({meta['status']})")
            if state is None:
                meta.pop("paused", None)
            else:
                meta["paused"] = state

        return self._update_metadata(worker_id, apply)

    def update_summary(
        self, worker_id: str, summary: str, summary_meta: dict[str, Any]
    ) -> bool:
        """Best-effort: write the derived summary; False (never an exception) on failure."""

        def apply(meta: dict[str, Any]) -> None:
            meta.update(summary=summary, summary_meta=summary_meta)

        try:
            self._update_metadata(worker_id, apply)
            return True
        except Exception:  # derived data may fail safely: the canonical artifacts are untouched
            return False

    def _update_metadata(self, worker_id: str, apply: Any) -> dict[str, Any]:
        key = self._key(worker_id, "metadata.json")
        lock = self._meta_locks.setdefault(worker_id, threading.Lock())
        with lock:
            meta = self.read_metadata(worker_id)
            apply(meta)
            self._put(key, _json(meta))
        return meta

    # --- reads ---------------------------------------------------------------------------
    def read_metadata(self, worker_id: str) -> dict[str, Any]:
        raw = self._count(self._get(self._key(worker_id, "metadata.json")))
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise ArtifactError(f"metadata.json of {worker_id} is not valid JSON: {exc}") from None
        if not isinstance(meta, dict):
            raise ArtifactError(f"metadata.json of {worker_id} is not a JSON object")
        return meta

    def read_file(self, worker_id: str, path: str) -> str:
        """A whole artifact file as text. ``path`` is relative to the worker directory."""
        rel = clean_relpath(path)
        self._require_worker(worker_id)
        return self._count(self._get(self._key(worker_id, rel))).decode("utf-8", "replace")

    def size(self, worker_id: str, path: str) -> int:
        return self._size(self._key(worker_id, clean_relpath(path)))

    def tail(self, worker_id: str, path: str, nbytes: int) -> bytes:
        """The last ``nbytes`` of a file, reading only those bytes."""
        if nbytes <= 0:
            return b""
        return self._count(self._range(self._key(worker_id, clean_relpath(path)), None, nbytes))

    def head(self, worker_id: str, path: str, nbytes: int) -> bytes:
        """The first ``nbytes`` of a file, reading only those bytes."""
        if nbytes <= 0:
            return b""
        return self._count(self._range(self._key(worker_id, clean_relpath(path)), 0, nbytes))

    def read_range(self, worker_id: str, path: str, start: int, nbytes: int) -> bytes:
        """Up to ``nbytes`` from offset ``start`` (fewer at the end of the file), reading only those."""
        if nbytes <= 0 or start < 0:
            return b""
        return self._count(self._range(self._key(worker_id, clean_relpath(path)), start, nbytes))

    def list_files(self, worker_id: str) -> list[FileInfo]:
        self._require_worker(worker_id)
        return self._list(self._key(worker_id))

    def exists(self, worker_id: str) -> bool:
        return self._is_worker(check_worker_id(worker_id))

    def read_chunks(self, worker_id: str, path: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """A whole artifact file, streamed in chunks (never held in memory at once)."""
        stream = self._stream(self._key(worker_id, clean_relpath(path)))
        try:
            while chunk := stream.read(chunk_size):
                yield self._count(chunk)
        finally:
            stream.close()

    def owner_workers(self, owner_id: int) -> OwnerWorkers:
        """Every worker whose ``metadata.json`` names ``owner_id``, found in the store itself (one
        metadata read per worker): the ``worker_jobs`` index may lag the store, or be gone with
        the owner's rows. Workers whose metadata cannot be read are listed apart."""
        found = OwnerWorkers()
        for wid, meta in self.iter_metadata():
            if isinstance(meta, Exception):
                found.unreadable.append((wid, str(meta)))
            elif meta.get("owner_id") == owner_id:
                found.worker_ids.append(wid)
        return found

    def delete_worker(self, worker_id: str) -> DeletedFiles:
        """Remove every file of a worker, ``metadata.json`` last; a worker already gone is 0 files."""
        base = self._key(worker_id)
        listed = self._list(base)
        self._delete([base + f.path for f in listed if f.path != "metadata.json"])
        self._delete([base + "metadata.json"])
        # A writer that passed its metadata check just before it went may have added a file.
        late = self._list(base)
        self._delete([base + f.path for f in late])
        gone = listed + late
        return DeletedFiles(len(gone), sum(f.size or 0 for f in gone))

    def iter_metadata(self) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
        """Every worker's metadata (or the error reading it), for rebuilding the index."""
        for wid in self._worker_ids():
            try:
                yield wid, self.read_metadata(wid)
            except (ArtifactError, ArtifactPathError) as exc:
                yield wid, exc


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, indent=2, default=str).encode()


def _seq(name: str) -> int:
    head = name.rsplit("/", 1)[-1].split("_", 1)[0]
    return int(head) if head.isdigit() else 0


# What a result.txt says first when its worker wrote no final message: the runner, or
# :func:`settle_abandoned` for a worker nobody runs any more, synthesised it from the last tool outputs.
SYNTHESISED_MARK = "[No final message from the model; synthesised from the last tool outputs]"


def settle_abandoned(store: WorkerArtifactStore, worker_id: str, status: str, reason: str) -> None:
    """Close the artifacts of a worker nobody is running any more (its run's process stopped, or
    it outlived its timeout): a ``result.txt`` saying so, with the tails of its last tool outputs,
    when it had none, and ``status`` in ``metadata.json``. Everything it wrote stays readable.

    Best effort: a store this process may not write (the ingress on AWS only reads) leaves the
    artifacts as they were, with a log line; the index row is what clients read first."""
    try:
        files = store.list_files(worker_id)
        if not any(f.path == "result.txt" for f in files):
            lines = [f"[Worker {status}: {reason}]"]
            outputs = sorted(f.path for f in files if f.path.startswith("tool_calls/") and f.is_file and f.size)
            if outputs:  # the last three, as the runner's own synthesis does (a cut command's partial one too)
                lines.append(SYNTHESISED_MARK)
                for path in outputs[-3:]:
                    lines += ["", f"== {path} ==", store.tail(worker_id, path, 2000).decode("utf-8", "replace")]
            else:
                lines.append("No tool output was recorded.")
            store.save_result(worker_id, "\n".join(lines))
        if store.read_metadata(worker_id).get("status") not in JOB_FINISHED:
            store.complete_worker(worker_id, status, error=reason)
    except Exception as exc:
        log.warning("could not close the artifacts of worker %s: %s: %s", worker_id, type(exc).__name__, exc)
