"""Local-directory backend: the S3 layout, byte for byte, under a root directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from zerg.artifacts.paths import WORKER_ID, ArtifactPathError
from zerg.artifacts.store import ArtifactNotFound, FileInfo, WorkerArtifactStore


class LocalArtifactStore(WorkerArtifactStore):
    def __init__(self, root: Path | str) -> None:
        super().__init__()
        self.root = Path(root).expanduser().resolve()
        if not self.root.exists():  # private by default: artifacts can hold anything a server printed
            self.root.mkdir(parents=True, mode=0o700)
        (self.root / "workers").mkdir(exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalArtifactStore({str(self.root)!r})"

    def location(self, worker_id: str = "") -> str:
        return str(self.root / "workers" / worker_id) if worker_id else str(self.root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        # Keys were validated already; this also stops a symlink planted inside a worker dir.
        workers = self.root / "workers"
        if not path.is_relative_to(workers):
            raise ArtifactPathError(f"{key!r} resolves outside the artifact store")
        if key.startswith("workers/"):
            worker_dir = workers / key.split("/")[1]
            if path != worker_dir and not path.is_relative_to(worker_dir.resolve()):
                raise ArtifactPathError(f"{key!r} resolves outside its worker directory")
        return path

    def _create(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        if key.endswith("/metadata.json") and key.count("/") == 2:
            try:  # creating the worker directory is the exclusive step for a new worker
                path.parent.mkdir(parents=False)
            except FileExistsError:
                return False
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(path, "xb") as fh:
                fh.write(data)
        except FileExistsError:
            return False
        return True

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _append(self, key: str, data: bytes) -> None:
        path = self._path(key)
        with open(path, "ab") as fh:  # O_APPEND: one write per line, never interleaved
            fh.write(data)

    def _get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _range(self, key: str, start: int | None, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                if start is None:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - length))
                else:
                    fh.seek(start)
                return fh.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _size(self, key: str) -> int:
        try:
            path = self._path(key)
            if not path.is_file():
                raise FileNotFoundError
            return path.stat().st_size
        except FileNotFoundError:
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _list(self, prefix: str) -> list[FileInfo]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        found = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith(".tmp-"):
                    continue
                full = Path(dirpath) / name
                found.append(FileInfo(full.relative_to(base).as_posix(), full.stat().st_size))
        return sorted(found, key=lambda f: f.path)

    def _worker_ids(self) -> Iterator[str]:
        with os.scandir(self.root / "workers") as entries:
            names = sorted(e.name for e in entries if e.is_dir() and WORKER_ID.match(e.name))
        yield from names

    def _is_worker(self, worker_id: str) -> bool:
        return (self.root / "workers" / worker_id / "metadata.json").is_file()

    def _open(self, key: str) -> BinaryIO:
        try:
            return open(self._path(key), "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _delete(self, keys: list[str]) -> None:
        emptied: set[Path] = set()
        for key in keys:
            parent = self._path(key.rsplit("/", 1)[0])  # the directory must be inside the worker's
            path = parent / key.rsplit("/", 1)[1]  # not resolved: a symlink is removed, never followed
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            while parent != self.root / "workers" and parent not in emptied:
                emptied.add(parent)
                parent = parent.parent
        for directory in sorted(emptied, key=lambda d: len(d.parts), reverse=True):
            try:
                directory.rmdir()  # only once empty: the worker directory goes with its last file
            except OSError:
                pass
