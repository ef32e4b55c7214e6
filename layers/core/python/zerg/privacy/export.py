"""``zerg owners export``: everything an owner has, in one zip archive.

Archive layout::
    tables/{table}.jsonl            one JSON object per row, for every table in scope.OWNER_TABLES
    artifacts/workers/{id}/...      the owner's worker artifacts at their store paths, byte for byte
    manifest.json                   format and version, owner, created_at, schema version, rows per
                                    table, artifact count and bytes, size and sha256 of every artifact

Invariants:
- The tables are read in one REPEATABLE READ, read-only transaction: one consistent snapshot.
- Nothing big is held in memory: rows stream from the database and artifacts from the store in
  chunks, straight into the zip on disk; only the manifest (a line per artifact) is built in memory.
- The archive appears under its name only when complete (written beside it, then renamed), mode
  0600, and never replaces an existing file.
- No secret material: a column named like a secret (``*hash*``, ``*secret*``, ``*password*``,
  ``*private*``, ``*encrypted*``, ``*_token``...) or a binary value stops the export with an
  error naming the table and column; the table's export function must leave it out.
- Only this owner's rows (every row function is scoped by owner) and workers
  (:func:`zerg.privacy.scope.owner_workers`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from zerg.artifacts.paths import slugify
from zerg.artifacts.store import ArtifactError, ArtifactPathError, WorkerArtifactStore
from zerg.files import atomic_private_file
from zerg.privacy import scope
from zerg.text import human_bytes
from zerg.timestamps import iso, utcnow

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

FORMAT = "zerg-owner-export"
FORMAT_VERSION = 1
_SECRET_WORDS = frozenset({"secret", "secrets", "password", "passphrase", "hash", "private", "encrypted",
                           "ciphertext", "credential", "credentials"})


class ExportError(RuntimeError):
    """The export cannot be made; the message says why. No archive is left behind."""


@dataclass
class ExportReport:
    path: Path
    owner_id: int
    owner_name: str
    rows: dict[str, int] = field(default_factory=dict)
    workers: int = 0
    artifact_files: int = 0
    artifact_bytes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (store path, why)
    unattributed_workers: int = 0

    def lines(self) -> list[str]:
        out = [f"exported owner {self.owner_id} ({self.owner_name}) to {self.path}",
               "rows: " + ", ".join(f"{name} {n}" for name, n in self.rows.items()),
               f"artifacts: {self.artifact_files} files of {self.workers} workers, {human_bytes(self.artifact_bytes)}"]
        out += [f"skipped {path}: {why}" for path, why in self.skipped]
        if self.unattributed_workers:
            out.append(f"note: {self.unattributed_workers} worker(s) in the store have an unreadable metadata.json "
                       "and are in no owner's index: whose they are is unknown, so they are not in the archive")
        return out


def default_filename(owner_name: str) -> str:
    """``zerg-export-{owner}-{UTC time}.zip``."""

    return f"zerg-export-{slugify(owner_name)}-{utcnow():%Y%m%dT%H%M%SZ}.zip"


def secret_column(name: str) -> bool:
    """A column name that says it holds secret material (``device_secret_hash``, ``session_token``,
    ``private_key_encrypted``) — never a count like ``tokens_in``."""
    words = name.lower().split("_")
    return bool(_SECRET_WORDS.intersection(words)) or words[-1] == "token"


def export_owner(pool: "ConnectionPool", store: WorkerArtifactStore, owner_id: int, dest: Path) -> ExportReport:
    """Write the owner's archive to ``dest`` (which must not exist) and say what it holds."""
    dest = Path(dest)
    if dest.exists():
        raise ExportError(f"{dest} already exists: choose another file")
    if not dest.parent.is_dir():
        raise ExportError(f"{dest.parent} is not a directory")
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.partial")

    def cannot(exc: OSError) -> ExportError:
        return ExportError(f"cannot write in {dest.parent}: {exc.strerror}")

    with atomic_private_file(dest, tmp, open_error=cannot) as fh:  # private data: a private file
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
            report = _write(zf, pool, store, owner_id, dest)
    return report


def _write(zf: zipfile.ZipFile, pool: "ConnectionPool", store: WorkerArtifactStore, owner_id: int,
           dest: Path) -> ExportReport:
    from psycopg import IsolationLevel

    from zerg.migrate import status

    created = utcnow()
    stamp = created.timetuple()[:6]
    with pool.connection() as conn:
        conn.isolation_level, conn.read_only = IsolationLevel.REPEATABLE_READ, True
        try:
            with conn.transaction():
                firsts = {t.name: _write_table(zf, conn, t, owner_id, stamp) for t in scope.OWNER_TABLES}
                schema_version = status(conn).current
                workers = scope.owner_workers(conn, store, owner_id)
        finally:
            conn.isolation_level, conn.read_only = None, None
    rows = {name: n for name, (n, _) in firsts.items()}
    owner = firsts["owners"][1]
    if owner is None:
        raise ExportError(f"owner {owner_id} does not exist")
    report = ExportReport(dest, owner_id, owner["name"], rows, len(workers.worker_ids),
                          unattributed_workers=workers.unattributed)
    files = []
    for worker_id in workers.worker_ids:
        files += _write_worker(zf, store, worker_id, stamp, report)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "owner": {"id": owner_id, "name": owner["name"]},
        "created_at": iso(created),
        "schema_version": schema_version,
        "tables": {name: {"file": f"tables/{name}.jsonl", "rows": n} for name, n in rows.items()},
        "not_exported": dict(scope.NOT_EXPORTED),
        "artifacts": {
            "workers": report.workers,
            "count": report.artifact_files,
            "bytes": report.artifact_bytes,
            "files": files,
            "skipped": [{"path": p, "reason": why} for p, why in report.skipped],
        },
        "encoding": "UTF-8 JSON Lines; timestamps ISO 8601; numeric columns as exact decimal strings",
    }
    zf.writestr(_info("manifest.json", stamp), json.dumps(manifest, indent=2, ensure_ascii=False))
    return report


def _info(name: str, stamp: tuple[int, ...]) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=stamp)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o600 << 16
    return info


def _write_table(zf: zipfile.ZipFile, conn: "Connection", table: scope.OwnerTable, owner_id: int,
                 stamp: tuple[int, ...]) -> tuple[int, dict[str, Any] | None]:
    """Stream the table's rows into ``tables/{name}.jsonl``: (rows written, the first row)."""
    count, first = 0, None
    rows = iter(table.rows(conn, owner_id))
    try:
        with zf.open(_info(f"tables/{table.name}.jsonl", stamp), "w", force_zip64=True) as out:
            for row in rows:
                if first is None:  # one query: every row has the first row's columns
                    first = row
                    if leaked := [c for c in row if secret_column(c)]:
                        raise ExportError(f"{table.name}.{leaked[0]} looks like secret material: its export "
                                          "function must leave it out")
                try:
                    line = json.dumps(row, ensure_ascii=False, default=_jsonable)
                except _Unexportable as exc:
                    raise ExportError(f"{table.name}: {exc}") from None
                out.write(line.encode() + b"\n")
                count += 1
    finally:
        getattr(rows, "close", lambda: None)()  # a stream stopped early gives its connection back
    return count, first


class _Unexportable(TypeError):
    pass


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (Decimal, UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise _Unexportable("a binary column (key material?) is not exported: its export function must leave it out")
    raise _Unexportable(f"a {type(value).__name__} value has no JSON form: its export function must convert it")


def _write_worker(zf: zipfile.ZipFile, store: WorkerArtifactStore, worker_id: str, stamp: tuple[int, ...],
                  report: ExportReport) -> list[dict[str, Any]]:
    try:
        listing = store.list_files(worker_id)
    except (ArtifactError, ArtifactPathError) as exc:
        report.skipped.append((f"workers/{worker_id}/", str(exc)))
        return []
    files = []
    for info in listing:
        path = f"workers/{worker_id}/{info.path}"
        if not info.is_file:  # a link or FIFO planted in the directory: never followed
            report.skipped.append((path, f"a {info.kind}, not a file: not exported"))
            continue
        chunks = store.read_chunks(worker_id, info.path)
        try:
            first = next(chunks, b"")  # opens the file: a file gone or refused is skipped, not half-written
        except (ArtifactError, ArtifactPathError) as exc:
            report.skipped.append((path, str(exc)))
            continue
        digest, size = hashlib.sha256(), 0
        with zf.open(_info(f"artifacts/{path}", stamp), "w", force_zip64=True) as out:
            for chunk in itertools.chain((first,), chunks):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        files.append({"path": path, "size": size, "sha256": digest.hexdigest()})
        report.artifact_files += 1
        report.artifact_bytes += size
    return files
