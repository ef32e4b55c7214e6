"""An owner's memory files: the one service behind the memory tools, the memory API and ``zerg memory``,
so all three accept, refuse and answer alike.

Invariants:
- Every operation is for one owner: another owner's file is "not found", exactly like a file that
  does not exist, for reads, writes over it, edits, deletes, versions and restores alike.
- Every input goes through :mod:`zerg.memory.paths` first: bad input is :class:`MemoryInputError`
  with a precise message, never a database error.
- A change keeps what it replaced, in the same transaction: an overwrite, an edit, a restore and a
  delete each leave the previous content in ``memory_file_versions`` (reason ``overwrite``,
  ``edit``, ``restore``, ``delete``), restorable for 30 days. A write that changes nothing (same
  title, content, tags and metadata) writes nothing and keeps no version.
- Every write records its writer (user, supervisor, worker, system) and run: text a model wrote
  from tool output is untrusted, so a reader can always tell who wrote what it reads.
- Title, tags and metadata left out of a write keep the file's current ones (a new file: no tags,
  no metadata, and the content's first ``# heading`` as its title).
- A read records the access (``last_accessed_at``, at most once a minute); grep and search do not.
- A change starts the file's re-embedding in the background (:func:`zerg.memory.indexer.kick`);
  until it lands the file is found by full text (a stale vector keeps serving the vector side).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg

from zerg.memory import files, versions
from zerg.memory.paths import (MAX_TITLE_CHARS, MemoryInputError, check_content, check_metadata, check_path,
                               check_prefix, check_tags, check_title)

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.memory.search import SearchOutcome
    from zerg.runtime import Runtime

WRITERS = ("user", "supervisor", "worker", "system")
LS_MAX = 1_000
GREP_MAX_MATCHES = 50
GREP_LINE_CHARS = 200
GREP_PATTERN_CHARS = 200
VERSIONS_MAX = 100

__all__ = ["MemoryFile", "MemoryInputError", "MemoryNotFound", "WRITERS", "content_hash", "delete", "edit", "grep",
           "ls", "prune_versions", "read", "restore", "search", "versions_of", "write"]


class MemoryNotFound(LookupError):
    """No such file (or version) for this owner; the message names it."""


@dataclass(frozen=True)
class MemoryFile:
    id: int
    path: str
    title: str
    tags: list[str]
    metadata: dict[str, Any]
    writer: str
    writer_run_id: int | None
    created_at: datetime
    updated_at: datetime
    size: int  # bytes of UTF-8 content
    content: str | None = None  # None in listings

    @classmethod
    def of(cls, row: dict[str, Any]) -> "MemoryFile":
        return cls(id=row["id"], path=row["path"], title=row["title"], tags=list(row["tags"]),
                   metadata=dict(row["metadata"] or {}), writer=row["writer"], writer_run_id=row["writer_run_id"],
                   created_at=row["created_at"], updated_at=row["updated_at"], size=row["size"],
                   content=row.get("content"))

    def entry(self) -> dict[str, Any]:
        """What a listing shows."""
        return {"path": self.path, "title": self.title, "tags": self.tags, "writer": self.writer,
                "updated_at": self.updated_at, "size": self.size}

    def document(self) -> dict[str, Any]:
        """The whole file, as the API returns it."""
        return {"path": self.path, "title": self.title, "content": self.content, "tags": self.tags,
                "metadata": self.metadata, "writer": self.writer, "writer_run_id": self.writer_run_id,
                "created_at": self.created_at, "updated_at": self.updated_at}

    def provenance(self) -> str:
        """Who wrote the current content: "written by worker in run 12"."""
        return f"written by {self.writer}" + (f" in run {self.writer_run_id}" if self.writer_run_id else "")


@dataclass(frozen=True)
class Written:
    file: MemoryFile
    created: bool  # the path was free
    changed: bool  # False: identical to what was there, nothing written


@dataclass(frozen=True)
class Listing:
    files: list[MemoryFile]
    total: int  # files under the prefix, beyond the limit too


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line_no: int
    line: str
    cut: bool  # the line was longer than GREP_LINE_CHARS


@dataclass(frozen=True)
class GrepResult:
    matches: list[GrepMatch]
    limited: bool  # stopped at GREP_MAX_MATCHES


def content_hash(title: str, content: str) -> str:
    """sha256 of title + NUL + content: what embeddings follow, and what "unchanged" means."""
    return hashlib.sha256(f"{title}\0{content}".encode("utf-8")).hexdigest()


def default_title(content: str) -> str:
    """A new file's title when none is given: its first Markdown ``# heading``, else empty."""
    for line in content.splitlines()[:50]:
        if line.startswith("# "):
            return check_title(line[2:][:MAX_TITLE_CHARS].strip()) if line[2:].strip() else ""
    return ""


def _writer(writer: str, run_id: int | None) -> None:
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {writer!r}")
    if run_id is not None and (not isinstance(run_id, int) or run_id < 1):
        raise ValueError(f"writer_run_id must be a positive run id, not {run_id!r}")


def _not_found(path: str) -> MemoryNotFound:
    return MemoryNotFound(f"memory file {path!r} not found")


# --- reads --------------------------------------------------------------------------------------

def ls(rt: "Runtime", owner_id: int, prefix: str = "", limit: int = 100) -> Listing:
    prefix = check_prefix(prefix)
    if not 1 <= limit <= LS_MAX:
        raise MemoryInputError(f"limit must be between 1 and {LS_MAX}, not {limit}")
    with rt.pool.connection() as conn:
        rows = files.list_prefix(conn, owner_id, prefix, limit)
        total = len(rows) if len(rows) < limit else files.count_prefix(conn, owner_id, prefix)
    return Listing([MemoryFile.of(r) for r in rows], total)


def read(rt: "Runtime", owner_id: int, path: str) -> MemoryFile:
    path = check_path(path)
    with rt.pool.connection() as conn:
        row = files.get(conn, owner_id, path)
        if row is None:
            raise _not_found(path)
        files.touch(conn, owner_id, row["id"])
    return MemoryFile.of(row)


def grep(rt: "Runtime", owner_id: int, pattern: str, prefix: str = "") -> GrepResult:
    """Lines matching ``pattern`` (a regular expression, case-insensitive) in the owner's files
    under ``prefix``: at most 50, each cut to 200 characters."""
    prefix = check_prefix(prefix)
    if not isinstance(pattern, str) or not pattern:
        raise MemoryInputError("pattern is empty")
    if len(pattern) > GREP_PATTERN_CHARS or "\x00" in pattern:
        raise MemoryInputError(f"pattern must be at most {GREP_PATTERN_CHARS} characters, without NUL")
    try:
        re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise MemoryInputError(f"invalid regular expression {pattern!r}: {exc}") from None
    try:
        with rt.pool.connection() as conn:
            rows = files.grep(conn, owner_id, pattern, prefix, limit=GREP_MAX_MATCHES + 1, line_chars=GREP_LINE_CHARS)
    except psycopg.errors.InvalidRegularExpression as exc:  # valid for Python, not for PostgreSQL
        raise MemoryInputError(f"invalid regular expression {pattern!r}: {exc.diag.message_primary or exc}") from None
    except psycopg.errors.QueryCanceled:
        raise MemoryInputError(f"grep for {pattern!r} took longer than {files.GREP_TIMEOUT}: "
                               "use a simpler pattern or a narrower prefix") from None
    matches = [GrepMatch(r["path"], r["line_no"], r["line"], r["line_length"] > GREP_LINE_CHARS)
               for r in rows[:GREP_MAX_MATCHES]]
    return GrepResult(matches, limited=len(rows) > GREP_MAX_MATCHES)


def search(rt: "Runtime", owner_id: int, query: str, *, tags: Any = (), limit: int = 5) -> "SearchOutcome":
    """Hybrid search over the owner's files (:mod:`zerg.memory.search`)."""
    from zerg.memory import search as memory_search

    return memory_search.search_memory(rt, owner_id, query, tags=tags, limit=limit)


# --- changes ------------------------------------------------------------------------------------

def _put(conn: "Connection", owner_id: int, path: str, *, content: str, title: str | None, tags: list[str] | None,
         metadata: dict[str, Any] | None, writer: str, run_id: int | None, reason: str,
         current: dict[str, Any] | None) -> Written:
    """Write ``path`` inside the caller's transaction; ``current`` is its row, locked (or None)."""
    while True:
        if current is None:
            new_title = default_title(content) if title is None else title
            row = files.insert(conn, owner_id, path, title=new_title, content=content, tags=tags or [],
                               metadata=metadata or {}, writer=writer, writer_run_id=run_id,
                               content_hash=content_hash(new_title, content))
            if row is not None:
                return Written(MemoryFile.of(row), created=True, changed=True)
            current = files.get(conn, owner_id, path, lock=True)  # a concurrent writer created it
            continue
        new_title = current["title"] if title is None else title
        new_tags = list(current["tags"]) if tags is None else tags
        new_metadata = dict(current["metadata"] or {}) if metadata is None else metadata
        new_hash = content_hash(new_title, content)
        if (new_hash == current["content_hash"] and new_tags == list(current["tags"])
                and new_metadata == dict(current["metadata"] or {})):
            return Written(MemoryFile.of(current), created=False, changed=False)
        versions.keep(conn, current, reason)
        row = files.replace(conn, owner_id, current["id"], title=new_title, content=content, tags=new_tags,
                            metadata=new_metadata, writer=writer, writer_run_id=run_id, content_hash=new_hash)
        return Written(MemoryFile.of(row), created=False, changed=True)


def _changed(rt: "Runtime", owner_id: int, written: Written) -> None:
    """New content: its vector is computed in the background (the indexer never raises)."""
    if written.changed:
        from zerg.memory import indexer

        indexer.kick(rt, owner_id)


def write(rt: "Runtime", owner_id: int, path: str, content: str, *, title: str | None = None,
          tags: Any = None, metadata: Any = None, writer: str, run_id: int | None = None) -> Written:
    """Create or overwrite ``path`` (the replaced content kept as an ``overwrite`` version)."""
    path, content = check_path(path), check_content(content)
    title = None if title is None else check_title(title)
    tags = None if tags is None else check_tags(tags)
    metadata = None if metadata is None else check_metadata(metadata)
    _writer(writer, run_id)
    with rt.pool.connection() as conn:
        out = _put(conn, owner_id, path, content=content, title=title, tags=tags, metadata=metadata, writer=writer,
                   run_id=run_id, reason="overwrite", current=files.get(conn, owner_id, path, lock=True))
    _changed(rt, owner_id, out)
    return out


def edit(rt: "Runtime", owner_id: int, path: str, old: str, new: str, *, writer: str,
         run_id: int | None = None) -> Written:
    """Replace the one occurrence of ``old`` in the file with ``new`` (kept as an ``edit`` version).
    ``old`` must occur exactly once: none or several is a :class:`MemoryInputError` saying which."""
    path = check_path(path)
    if not isinstance(old, str) or not old:
        raise MemoryInputError("old is empty: give the exact text to replace")
    if not isinstance(new, str):
        raise MemoryInputError("new must be a string")
    _writer(writer, run_id)
    with rt.pool.connection() as conn:
        current = files.get(conn, owner_id, path, lock=True)
        if current is None:
            raise _not_found(path)
        count = current["content"].count(old)
        if count == 0:
            raise MemoryInputError(f"the old text does not occur in {path!r}: read the file and copy the text exactly")
        if count > 1:
            raise MemoryInputError(f"the old text occurs {count} times in {path!r}: include more of the "
                                   "surrounding text so it occurs once")
        content = check_content(current["content"].replace(old, new, 1))
        out = _put(conn, owner_id, path, content=content, title=None, tags=None, metadata=None, writer=writer,
                   run_id=run_id, reason="edit", current=current)
    _changed(rt, owner_id, out)
    return out


def delete(rt: "Runtime", owner_id: int, path: str) -> MemoryFile:
    """Remove ``path``; its content stays restorable for 30 days (a ``delete`` version)."""
    path = check_path(path)
    with rt.pool.connection() as conn:
        current = files.get(conn, owner_id, path, lock=True)
        if current is None:
            raise _not_found(path)
        versions.keep(conn, current, "delete")
        files.delete(conn, owner_id, current["id"])
    return MemoryFile.of(current)


def prune_versions(rt: "Runtime", should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Delete every owner's versions replaced more than 30 days ago (the daily housekeeping task
    ``memory-versions``)."""
    from zerg.memory.sweeps import delete_in_batches

    return delete_in_batches(rt, versions.prune, versions.PRUNE_BATCH, "memory_versions_pruned", should_stop)


@dataclass(frozen=True)
class Version:
    id: int
    path: str
    reason: str  # why it was replaced: overwrite, edit, delete, restore
    writer: str  # who wrote this content
    writer_run_id: int | None
    written_at: datetime
    replaced_at: datetime
    title: str
    tags: list[str]
    size: int

    def entry(self) -> dict[str, Any]:
        return {"id": self.id, "reason": self.reason, "writer": self.writer, "writer_run_id": self.writer_run_id,
                "written_at": self.written_at, "replaced_at": self.replaced_at, "title": self.title,
                "tags": self.tags, "size": self.size}


def versions_of(rt: "Runtime", owner_id: int, path: str) -> list[Version]:
    """The kept versions of ``path``, newest first (a deleted file's too); not found when the owner
    has neither the file nor any version of it."""
    path = check_path(path)
    with rt.pool.connection() as conn:
        rows = versions.list_for_path(conn, owner_id, path, VERSIONS_MAX)
        if not rows and files.get(conn, owner_id, path) is None:
            raise _not_found(path)
    return [Version(id=r["id"], path=r["path"], reason=r["reason"], writer=r["writer"],
                    writer_run_id=r["writer_run_id"], written_at=r["written_at"], replaced_at=r["replaced_at"],
                    title=r["title"], tags=list(r["tags"]), size=r["size"]) for r in rows]


def restore(rt: "Runtime", owner_id: int, path: str, version_id: int, *, writer: str,
            run_id: int | None = None) -> Written:
    """Write version ``version_id`` of ``path`` back (title, tags and metadata too); what it
    replaces is kept as a ``restore`` version, so a restore can itself be undone."""
    path = check_path(path)
    _writer(writer, run_id)
    with rt.pool.connection() as conn:
        old = versions.get(conn, owner_id, version_id)
        if old is None or old["path"] != path:
            raise MemoryNotFound(f"version {version_id} of memory file {path!r} not found")
        out = _put(conn, owner_id, path, content=old["content"], title=old["title"], tags=list(old["tags"]),
                   metadata=dict(old["metadata"] or {}), writer=writer, run_id=run_id, reason="restore",
                   current=files.get(conn, owner_id, path, lock=True))
    _changed(rt, owner_id, out)
    return out
