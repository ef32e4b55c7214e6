"""The local path for replies: files read as the parsers' :class:`~zerg.inbound.messages.Inbound`
(``zerg inbound email FILE``), and the inbox directory ``zerg serve`` watches.

Drop a reply into ``settings.inbound_root / "new"``: ``*.eml`` is an email (raw RFC 5322, as a
mail client saves it), ``*.json`` an SMS ``{"from": "+15551234567", "text": "...", "reply_to":
"<the provider id of the SMS it answers; optional>"}``. :func:`sweep` takes them in name order.

Invariants:
- A name starting with ``.`` or ending ``.tmp`` is still being written: skipped, left in place.
  Write elsewhere (or under such a name) and rename into ``new/``.
- A file is moved only after :func:`zerg.inbound.replies.receive` returned for it: to
  ``processed/`` (a run, an acknowledgement, a keyword), or to ``failed/`` with ``NAME.reason``
  beside it (refused, or accepted but its run could not start). Nothing is ever deleted; a name
  already taken there gets a ``-N`` suffix.
- Idempotent by content: an email's provider id is ``local-{sha256 of the file}``
  (:func:`zerg.inbound.email.from_local_file`), an SMS's ``local-{sha256 of the file}`` too
  (:func:`zerg.inbound.sms.from_local`). A crash between ``receive`` and the move leaves the file
  in ``new/``; the next sweep delivers it again and the pipeline answers with the first delivery's
  outcome (one row, one run). The same file dropped twice is one message.
- An email larger than ``settings.inbound_max_bytes`` is refused from its size alone (``stat``,
  never read whole; hashed in chunks for its id) and recorded like any refusal.
- Only regular files are read, never through a symlink; anything else goes to ``failed/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from zerg import observability
from zerg.inbound.messages import Inbound

if TYPE_CHECKING:
    from zerg.runtime import Runtime

SWEEP_EVERY_S = 2.0  # how soon a dropped file is taken
FILES_PER_SWEEP = 100  # the rest wait for the next sweep (each may start a run)
SMS_FILE_MAX_BYTES = 64 * 1024  # an SMS file is a few hundred bytes; more is not one
_CHUNK = 1024 * 1024
TAKEN = ("run", "acknowledged", "keyword")  # outcomes whose file goes to processed/


@dataclass(frozen=True)
class Taken:
    """What became of one dropped file."""

    name: str
    moved_to: str  # processed | failed | new (left: its outcome is not final yet)
    status: str  # the pipeline's status, or "unreadable" / "not a reply file"
    reason: str | None = None
    inbound_id: int | None = None
    run_id: int | None = None


def email_from_file(rt: Runtime, path: Path, *, follow_symlinks: bool = True) -> Inbound:
    """The email in ``path`` as the local parser reads it; an oversized file is refused from its
    size (the reason as the parser words it). OSError when it cannot be read."""
    from zerg.inbound import email

    limit = rt.settings.inbound_max_bytes
    with _open_regular(path, follow_symlinks) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= limit:
            raw = fh.read(limit + 1)  # bounded: the file may have grown since the stat
            if len(raw) <= limit:
                return email.from_local_file(rt, raw)
            size = len(raw) + _rest(fh)
            fh.seek(0)
        digest = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return Inbound(channel="email", provider_id=f"local-{digest.hexdigest()}", source="local", sender="", body="",
                   rejection=f"message of {size} bytes exceeds the {limit}-byte limit")


def sms_from_json(raw: bytes) -> Inbound:
    """An SMS file (``{"from", "text", "reply_to"?}``) as the local SMS parser reads it; its id is
    the file's sha256. A file that is not such an object is an :class:`Inbound` refused with why."""
    from zerg.inbound import sms

    digest = hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return _refused_sms(digest, f"not a JSON SMS file: {str(exc)[:200] or type(exc).__name__}")
    if not isinstance(doc, dict):
        return _refused_sms(digest, "not a JSON SMS file: expected an object with from, text and reply_to")
    # The parser refuses what is not a string (a missing field included) and says which.
    return sms.from_local(doc.get("from"), doc.get("text"), previous_provider_id=doc.get("reply_to") or None,
                          message_id=digest)


def sweep(rt: Runtime) -> list[Taken]:
    """Take the files waiting in ``new/`` (at most :data:`FILES_PER_SWEEP`, in name order)."""
    root = rt.settings.inbound_root
    new, processed, failed = (_directory(root / name) for name in ("new", "processed", "failed"))
    names = sorted(entry.name for entry in os.scandir(new) if not _being_written(entry.name))
    return [t for t in (_take(rt, new / name, processed, failed) for name in names[:FILES_PER_SWEEP]) if t]


def run_sweep(rt: Runtime) -> dict[str, Any]:
    """``zerg serve``'s task: the dropped files, then the replies a crash left half done."""
    from zerg.inbound import replies

    taken = sweep(rt)
    counts = {where: sum(t.moved_to == where for t in taken) for where in ("processed", "failed", "new")}
    return {**counts, "recovered": replies.recover_pending(rt)}


def _take(rt: Runtime, path: Path, processed: Path, failed: Path) -> Taken | None:
    from zerg.inbound import replies

    log = observability.logger()
    if path.suffix not in (".eml", ".json"):
        return _move(path, failed, Taken(path.name, "failed", "not a reply file",
                                         "not a reply file: name it *.eml (an email) or *.json (an SMS)"))
    if path.is_symlink():
        return _move(path, failed, Taken(path.name, "failed", "unreadable",
                                         "a symbolic link: only regular files dropped here are read"))
    try:
        inbound = _read(rt, path)
        outcome = replies.receive(rt, inbound)
    except FileNotFoundError:  # taken by another sweep meanwhile
        return None
    except OSError as exc:
        return _move(path, failed, Taken(path.name, "failed", "unreadable", f"unreadable: {exc.strerror or exc}"))
    except psycopg.Error:  # the database: the file stays in new/ and the next sweep tries again
        raise
    except Exception as exc:  # a bug: this file must not block the ones after it, sweep after sweep
        log.exception("inbound file could not be processed", extra={"file": path.name})
        return _move(path, failed, Taken(path.name, "failed", "failed", f"could not be processed: {type(exc).__name__}"))
    where = "processed" if outcome.status in TAKEN else "new" if outcome.status == "received" else "failed"
    taken = Taken(path.name, where, outcome.status, outcome.reason, outcome.inbound_id, outcome.run_id)
    log.info("inbound file taken", extra={"file": path.name, "status": outcome.status, "inbound_id": outcome.inbound_id,
                                          "run_id": outcome.run_id, "duplicate": outcome.duplicate})
    if where == "new":  # the first delivery of the same message is still at work: look again next sweep
        return taken
    return _move(path, processed if where == "processed" else failed, taken)


def _read(rt: Runtime, path: Path) -> Inbound:
    if path.suffix == ".eml":
        return email_from_file(rt, path, follow_symlinks=False)
    with _open_regular(path, follow_symlinks=False) as fh:
        raw = fh.read(SMS_FILE_MAX_BYTES + 1)
    if len(raw) > SMS_FILE_MAX_BYTES:
        return _refused_sms(hashlib.sha256(raw).hexdigest(), f"an SMS file of more than {SMS_FILE_MAX_BYTES} bytes")
    return sms_from_json(raw)


def _move(path: Path, into: Path, taken: Taken) -> Taken | None:
    """``path`` into the directory ``into`` under a free name (and its ``.reason`` beside it when
    it failed); None when another sweep moved it first."""
    target = into / path.name
    n = 1
    while target.exists() or target.is_symlink():
        target = into / f"{path.stem}-{n}{path.suffix}"
        n += 1
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    except OSError as exc:  # left in new/: logged at every sweep until someone looks
        observability.logger().warning("inbound file not moved", extra={"file": path.name, "reason": str(exc)})
        return taken
    if taken.moved_to == "failed":
        lines = [f"status: {taken.status}", f"reason: {taken.reason}"]
        lines += [f"inbound message: {taken.inbound_id}"] if taken.inbound_id is not None else []
        try:
            target.with_name(target.name + ".reason").write_text("\n".join(lines) + "\n")
        except OSError as exc:  # the row (when there is one) and the log line still say why
            observability.logger().warning("inbound file: its reason not written", extra={
                "file": target.name, "reason": taken.reason, "error": str(exc)})
    return taken


def _refused_sms(digest: str, reason: str) -> Inbound:
    return Inbound(channel="sms", provider_id=f"local-{digest}", source="local", sender="", body="", rejection=reason)


def _open_regular(path: Path, follow_symlinks: bool):
    """``path`` opened for reading if it is a regular file (OSError otherwise)."""
    flags = os.O_RDONLY | (0 if follow_symlinks else os.O_NOFOLLOW) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(0, "not a regular file")
    return os.fdopen(fd, "rb")


def _rest(fh) -> int:
    """How many bytes are left in ``fh`` (read and dropped in chunks)."""
    n = 0
    while chunk := fh.read(_CHUNK):
        n += len(chunk)
    return n


def _being_written(name: str) -> bool:
    return name.startswith(".") or name.endswith(".tmp")


def _directory(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
