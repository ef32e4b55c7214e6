"""Names inside the artifact store: worker ids, tool names and caller-supplied relative paths.

Every path a caller (the supervisor model, an HTTP client) hands in goes through
:func:`clean_relpath` before it reaches a backend. It refuses absolute paths, ``..`` segments,
backslashes and NUL bytes — also when they hide behind URL-encoding — and names longer than
either backend can hold (a component over ``NAME_MAX`` bytes, a path over ``PATH_MAX`` bytes),
and says *why*, so the model can correct itself.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from urllib.parse import unquote

WORKER_ID = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}_[a-z0-9-]{1,30}_[0-9a-f]{6}$")
_NON_SLUG = re.compile(r"[^a-z0-9]+")
_NON_TOOL = re.compile(r"[^a-z0-9_]+")
# A file name the local filesystem can hold (ext4, APFS: 255 bytes), and a relative path that
# stays under S3's 1,024-byte key once the owner, worker id and prefix are put in front of it.
NAME_MAX = 255
PATH_MAX = 800


class ArtifactPathError(ValueError):
    """A path or id that must not be used; the message says why."""


def slugify(text: str, limit: int = 30) -> str:
    slug = _NON_SLUG.sub("-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "task"


def new_worker_id(task: str, now: datetime | None = None) -> str:
    """``YYYY-MM-DDTHH-MM-SS_{slug<=30}_{6 hex}`` (UTC), e.g. ``2026-11-22T14-32-00_check-disk_a1b2c3``."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{now:%Y-%m-%dT%H-%M-%S}_{slugify(task)}_{secrets.token_hex(3)}"


def check_worker_id(worker_id: str) -> str:
    if not isinstance(worker_id, str) or not WORKER_ID.match(worker_id):
        raise ArtifactPathError(
            f"invalid worker id {worker_id!r}: expected YYYY-MM-DDTHH-MM-SS_slug_6hex"
        )
    return worker_id


def tool_file_name(seq: int, tool_name: str) -> str:
    tool = _NON_TOOL.sub("_", tool_name.lower()).strip("_")[:60] or "tool"
    return f"tool_calls/{seq:03d}_{tool}.txt"


def _decodings(path: str) -> list[str]:
    """The path and every distinct URL-decoding of it (double encoding included)."""
    forms = [path]
    for _ in range(4):
        decoded = unquote(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms


def clean_relpath(path: object) -> str:
    """Return ``path`` normalised (``a/./b`` → ``a/b``) or raise :class:`ArtifactPathError`."""
    if not isinstance(path, str) or not path.strip():
        raise ArtifactPathError("path is empty: give a path relative to the worker directory")
    for form in _decodings(path):
        encoded = form is not path
        how = " (after URL-decoding)" if encoded else ""
        if "\x00" in form:
            raise ArtifactPathError(f"path {path!r} contains a NUL byte{how}")
        if "\\" in form:
            raise ArtifactPathError(
                f"path {path!r} contains a backslash{how}; use '/' between directories"
            )
        if form.startswith("/") or re.match(r"^[a-zA-Z]:", form):
            raise ArtifactPathError(
                f"path {path!r} is absolute{how}; paths are relative to the worker directory, "
                "e.g. 'tool_calls/001_ssh_exec.txt'"
            )
        if ".." in form.split("/"):
            raise ArtifactPathError(
                f"path {path!r} contains '..'{how}; only files inside the worker directory "
                "can be read"
            )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        raise ArtifactPathError(f"path {path!r} names the worker directory itself, not a file")
    _check_length(parts)
    return "/".join(parts)


def _shorten(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else f"{text[:keep]}…"


def _check_length(parts: list[str]) -> None:
    """A name no backend can hold is the caller's mistake, said as such (not an OS error later)."""
    for part in parts:
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > NAME_MAX:
            raise ArtifactPathError(
                f"file name {_shorten(part)!r} is {size} bytes; a file or folder name is at most {NAME_MAX}")
    size = len("/".join(parts).encode("utf-8", "surrogatepass"))
    if size > PATH_MAX:
        raise ArtifactPathError(f"path {_shorten('/'.join(parts))!r} is {size} bytes; a path is at most {PATH_MAX}")
