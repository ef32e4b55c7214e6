"""Worker artifacts: the store interface and its two backends (:func:`zerg.wiring.make_store` picks one)."""

from __future__ import annotations

from zerg.artifacts.paths import ArtifactPathError, clean_relpath, new_worker_id
from zerg.artifacts.store import ArtifactError, ArtifactNotFound, FileInfo, WorkerArtifactStore, WorkerExists

__all__ = [
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactPathError",
    "FileInfo",
    "WorkerArtifactStore",
    "WorkerExists",
    "clean_relpath",
    "new_worker_id",
]
