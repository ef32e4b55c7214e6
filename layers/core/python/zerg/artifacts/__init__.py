"""Worker artifacts: the store interface, its two backends and the factory that picks one."""

from __future__ import annotations

from zerg.artifacts.paths import ArtifactPathError, clean_relpath, new_worker_id
from zerg.artifacts.store import (
    ArtifactError,
    ArtifactNotFound,
    FileInfo,
    WorkerArtifactStore,
    WorkerExists,
)
from zerg.config import Settings, get_settings

__all__ = [
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactPathError",
    "FileInfo",
    "WorkerArtifactStore",
    "WorkerExists",
    "clean_relpath",
    "new_worker_id",
    "get_store",
]


def get_store(settings: Settings | None = None) -> WorkerArtifactStore:
    """The artifact store the configuration names (local directory or S3 bucket)."""
    settings = settings or get_settings()
    if settings.artifact_backend == "s3":
        from zerg.artifacts.s3 import S3ArtifactStore

        return S3ArtifactStore(settings.artifact_bucket or "")
    from zerg.artifacts.local import LocalArtifactStore

    return LocalArtifactStore(settings.artifact_root)
