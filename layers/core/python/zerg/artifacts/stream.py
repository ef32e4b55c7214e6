"""ArtifactStream: one artifact file written as its bytes arrive, never held whole in memory.

A tool's raw output can be tens of megabytes (a command printing a log); the tool writes it
here piece by piece while the command runs (:meth:`WorkerArtifactStore.open_tool_output`).

Invariants:
- The file's name is claimed exclusively when the stream opens (the same exclusive create as
  :meth:`WorkerArtifactStore.save_tool_output`): two writers never share a name, and no other
  writer ever touches a claimed name.
- Memory is bounded by the backend, not by the output: the local backend writes each piece to
  the file at once (a reader sees the file grow, and a crash keeps what was written); S3 holds at
  most one multipart part (:data:`zerg.artifacts.s3.PART_BYTES`) and publishes the object at
  :meth:`close` (until then the claimed key is an empty object).
- :meth:`close` runs on every exit of a ``with`` block, an exception included: what was written
  so far is kept, never discarded. Writing after close is refused.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType

from zerg.artifacts.store import ArtifactError


class ArtifactStream(ABC):
    def __init__(self, key: str) -> None:
        self.key = key  # the full store key ("workers/<id>/tool_calls/001_x.txt")
        self.path = key.split("/", 2)[-1]  # relative to the worker directory
        self.size = 0
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ArtifactError(f"{self.path} is closed; a finished artifact is never written again")
        if data:
            self._write(data)
            self.size += len(data)

    def close(self) -> None:
        """Publish what was written; idempotent."""
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self) -> "ArtifactStream":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @abstractmethod
    def _write(self, data: bytes) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...
