"""Local-directory backend: the S3 layout, byte for byte, under a root directory.

Invariants:
- No symbolic link under the root is ever followed, by a read or a write. A worker directory is
  shared with whatever ran on this host (a sandbox that escaped, a careless script), so a link
  planted in it (``result.txt -> ~/.ssh/id_ed25519``, ``tool_calls -> /etc``, a worker directory
  linked to another owner's) must not turn a read into someone else's file. Every key is opened
  component by component from the store root with ``O_NOFOLLOW`` (``openat`` on directory
  descriptors), so a link in *any* component is refused, and nothing can be swapped in between
  a check and the open.
- Only regular files are read or appended to; a FIFO or device is refused, never opened
  blocking.
- A streamed tool output (:class:`_LocalStream`) is created with ``O_EXCL`` through the same
  no-follow open and written through that one descriptor: a link planted under its name makes
  the claim fail (the next number is taken), and the bytes go nowhere but the file it created.
- A listing reports what is there without following anything (``lstat``): a link is listed as
  ``kind="symlink"`` with no size (its target's size would leak it), other non-regular entries as
  ``kind="other"``.
- Deleting a worker removes everything in its directory, not only what a listing shows (dot
  directories, an interrupted write's ``.tmp-*`` file, FIFOs, links as links), by its own walk
  from directory descriptors, ``metadata.json`` last, then the directory: once the metadata is
  gone nothing could find a leftover again.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from zerg.artifacts.paths import WORKER_ID, ArtifactPathError
from zerg.artifacts.store import ArtifactNotFound, DeletedFiles, FileInfo, WorkerArtifactStore
from zerg.artifacts.stream import ArtifactStream

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: opening a planted FIFO never hangs


_MISSING = (errno.ENOENT, errno.ENOTDIR, errno.EISDIR)


def _shown(key: str) -> str:
    return key.split("/", 2)[-1]


def _not_regular(key: str, name: str, mode: int) -> Exception:
    """Why ``key`` cannot be read as a file, given the ``lstat`` mode of its component ``name``."""
    if stat.S_ISLNK(mode):
        return ArtifactPathError(
            f"{_shown(key)!r}: {name!r} is a symbolic link; links in a worker directory are never followed")
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):  # a folder where a file was asked for, or vice versa
        return ArtifactNotFound(f"no such artifact file: {_shown(key)}")
    return ArtifactPathError(f"{_shown(key)!r}: {name!r} is not a regular file")


class LocalArtifactStore(WorkerArtifactStore):
    def __init__(self, root: Path | str) -> None:
        super().__init__()
        # The root itself is configuration, resolved once; below it nothing is followed.
        self.root = Path(root).expanduser().resolve()
        if not self.root.exists():  # private by default: artifacts can hold anything a server printed
            self.root.mkdir(parents=True, mode=0o700)
        (self.root / "workers").mkdir(exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalArtifactStore({str(self.root)!r})"

    def location(self, worker_id: str = "") -> str:
        return str(self.root / "workers" / worker_id) if worker_id else str(self.root)

    # --- opening without following --------------------------------------------------------
    def _refusal(self, exc: OSError, key: str, parent: int, name: str) -> Exception:
        """The store error for a failed open of ``name`` (in directory ``parent``) on ``key``."""
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except OSError:
            return ArtifactNotFound(f"no such artifact file: {_shown(key)}") if exc.errno in _MISSING else exc
        if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            return _not_regular(key, name, mode)
        # A file where a folder was asked for (or the reverse) is missing; anything else (EACCES)
        # is a real I/O problem, raised as it is.
        return ArtifactNotFound(f"no such artifact file: {_shown(key)}") if exc.errno in _MISSING else exc

    def _dir(self, parts: list[str], key: str, create: bool = False) -> int:
        """A descriptor of the directory ``root/parts...``, every component opened with O_NOFOLLOW."""
        fd = os.open(self.root, _DIR)
        try:
            for name in parts:
                if create:
                    try:
                        os.mkdir(name, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    nxt = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    raise self._refusal(exc, key, fd, name) from None
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open(self, key: str, flags: int, mode: int = 0o666, create_dirs: bool = False) -> int:
        """A descriptor of the regular file ``key`` (a link anywhere on the way is refused)."""
        *parents, name = key.split("/")
        parent = self._dir(parents, key, create_dirs)
        try:
            try:
                fd = os.open(name, flags | _FILE, mode, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    raise
                raise self._refusal(exc, key, parent, name) from None
            kind = os.fstat(fd).st_mode
            if not stat.S_ISREG(kind):
                os.close(fd)
                raise _not_regular(key, name, kind)
            os.set_blocking(fd, True)
            return fd
        finally:
            os.close(parent)

    # --- primitives ------------------------------------------------------------------------
    def _create(self, key: str, data: bytes) -> bool:
        parts = key.split("/")
        if key.endswith("/metadata.json") and len(parts) == 3:
            workers = self._dir(parts[:1], key)
            try:  # creating the worker directory is the exclusive step for a new worker
                os.mkdir(parts[1], dir_fd=workers)
            except FileExistsError:
                return False
            finally:
                os.close(workers)
        try:
            fd = self._open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create_dirs=True)
        except FileExistsError:  # O_EXCL: a link planted under this name counts as existing
            return False
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return True

    def _create_stream(self, key: str) -> "_LocalStream | None":
        try:
            fd = self._open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create_dirs=True)
        except FileExistsError:
            return None
        return _LocalStream(key, fd)

    def _put(self, key: str, data: bytes) -> None:
        *parents, name = key.split("/")
        parent = self._dir(parents, key)
        tmp = f".tmp-{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, 0o600, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                # rename() replaces a link planted under ``name`` itself; it never writes through it.
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=parent)
                except FileNotFoundError:
                    pass
                raise
        finally:
            os.close(parent)

    def _append(self, key: str, data: bytes) -> None:
        fd = self._open(key, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "ab") as fh:  # O_APPEND: one write per line, never interleaved
            fh.write(data)

    def _get(self, key: str) -> bytes:
        with os.fdopen(self._open(key, os.O_RDONLY), "rb") as fh:
            return fh.read()

    def _range(self, key: str, start: int | None, length: int) -> bytes:
        with os.fdopen(self._open(key, os.O_RDONLY), "rb") as fh:
            if start is None:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - length))
            else:
                fh.seek(start)
            return fh.read(length)

    def _size(self, key: str) -> int:
        *parents, name = key.split("/")
        parent = self._dir(parents, key)
        try:
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise self._refusal(exc, key, parent, name) from None
        finally:
            os.close(parent)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(key, name, info.st_mode)
        return info.st_size

    def _list(self, prefix: str) -> list[FileInfo]:
        try:
            base = self._dir(prefix.rstrip("/").split("/"), prefix)
        except ArtifactNotFound:
            return []
        found: list[FileInfo] = []
        try:
            self._walk(base, "", found)
        finally:
            os.close(base)
        return sorted(found, key=lambda f: f.path)

    def _walk(self, fd: int, rel: str, found: list[FileInfo]) -> None:
        with os.scandir(fd) as entries:  # scans a duplicate of fd; lstat-only classification below
            listed = list(entries)
        for entry in listed:
            path = rel + entry.name
            if entry.is_symlink():
                found.append(FileInfo(path, None, "symlink"))
            elif entry.is_dir(follow_symlinks=False):
                if entry.name.startswith("."):
                    continue
                try:
                    sub = os.open(entry.name, _DIR, dir_fd=fd)
                except OSError:  # swapped (for a link?) since the scan: listed, never entered
                    found.append(FileInfo(path, None, "other"))
                    continue
                try:
                    self._walk(sub, path + "/", found)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                if not entry.name.startswith(".tmp-"):
                    found.append(FileInfo(path, entry.stat(follow_symlinks=False).st_size))
            else:
                found.append(FileInfo(path, None, "other"))

    def _worker_ids(self) -> Iterator[str]:
        fd = self._dir(["workers"], "workers")
        try:
            with os.scandir(fd) as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and WORKER_ID.match(e.name))
        finally:
            os.close(fd)
        yield from names

    def _is_worker(self, worker_id: str) -> bool:
        key = f"workers/{worker_id}/metadata.json"
        try:
            os.close(self._open(key, os.O_RDONLY))
        except (ArtifactNotFound, ArtifactPathError):
            return False
        return True

    def _stream(self, key: str) -> BinaryIO:
        return os.fdopen(self._open(key, os.O_RDONLY), "rb")

    def _delete(self, keys: list[str]) -> None:
        """Unlink each key without following anything; emptied directories go with their last file."""
        emptied: set[tuple[str, ...]] = set()
        for key in keys:
            *parents, name = key.split("/")
            try:
                parent = self._dir(parents, key)
            except ArtifactNotFound:
                continue
            try:
                os.unlink(name, dir_fd=parent)  # a symlink is removed, never followed
            except FileNotFoundError:
                continue
            finally:
                os.close(parent)
            for depth in range(len(parents), 1, -1):  # up to, not including, workers/
                emptied.add(tuple(parents[:depth]))
        for parts in sorted(emptied, key=len, reverse=True):
            try:
                parent = self._dir(list(parts[:-1]), "/".join(parts))
            except (ArtifactNotFound, ArtifactPathError):
                continue
            try:
                os.rmdir(parts[-1], dir_fd=parent)  # only once empty; a link is never followed
            except OSError:
                pass
            finally:
                os.close(parent)

    # --- deleting a worker ----------------------------------------------------------------
    def delete_worker(self, worker_id: str) -> DeletedFiles:
        """Every entry of the worker's directory, hidden ones included, ``metadata.json`` last
        (through ``_delete``, like the S3 backend: an interrupted delete is found and finished by
        running it again), then the directory itself; a link is removed, never followed."""
        base = self._key(worker_id)
        files, size = self._purge(worker_id, keep="metadata.json")
        try:
            meta_size = self._size(base + "metadata.json")
        except (ArtifactNotFound, ArtifactPathError):  # gone already, or not a file: purged below
            meta_size = None
        if meta_size is not None:
            self._delete([base + "metadata.json"])
            files, size = files + 1, size + meta_size
        late_files, late_size = self._purge(worker_id, keep=None)  # a late writer's, and the directory
        return DeletedFiles(files + late_files, size + late_size)

    def _purge(self, worker_id: str, keep: str | None) -> tuple[int, int]:
        """Unlink everything under ``workers/<worker_id>`` but the top-level entry ``keep``;
        with ``keep`` None, the worker directory too (or the link standing in for it).
        Returns (files and links removed, bytes of the regular files among them)."""
        workers = self._dir(["workers"], "workers")
        try:
            try:
                fd = os.open(worker_id, _DIR, dir_fd=workers)
            except FileNotFoundError:
                return 0, 0
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if keep is not None:  # a link (or file) where the directory was: it goes last
                    return 0, 0
                os.unlink(worker_id, dir_fd=workers)  # the link itself, never its target
                return 1, 0
            try:
                counts = _unlink_tree(fd, keep)
            finally:
                os.close(fd)
            if keep is None:
                try:
                    os.rmdir(worker_id, dir_fd=workers)
                except FileNotFoundError:
                    pass
            return counts
        finally:
            os.close(workers)


def _unlink_tree(fd: int, keep: str | None = None) -> tuple[int, int]:
    """Empty the directory open at ``fd`` (but its entry ``keep``) without following links."""
    files = size = 0
    with os.scandir(fd) as entries:
        names = [e.name for e in entries if e.name != keep]
    for name in names:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                sub = os.open(name, _DIR, dir_fd=fd)
                try:
                    sub_files, sub_size = _unlink_tree(sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
                files, size = files + sub_files, size + sub_size
            else:
                os.unlink(name, dir_fd=fd)
                files += 1
                size += info.st_size if stat.S_ISREG(info.st_mode) else 0
        except FileNotFoundError:  # removed meanwhile
            continue
    return files, size


class _LocalStream(ArtifactStream):
    """Each piece goes to the file at once: readers see it grow; memory holds nothing."""

    def __init__(self, key: str, fd: int) -> None:
        super().__init__(key)
        self._fd = fd

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def _close(self) -> None:
        os.close(self._fd)
