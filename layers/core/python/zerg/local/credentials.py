"""Where ``zerg ask``, ``zerg login`` and ``zerg logout`` get their credentials: never argv.

Invariants:
- A device secret comes from standard input (``--secret-stdin``), ``ZERG_DEVICE_SECRET`` or an
  interactive prompt without echo, in that order; never from the command line, where any process
  on the machine (a sandboxed ``ps`` included) can read it.
- ``zerg ask`` prefers an explicit secret (stdin, then the environment), then the session
  ``zerg login`` stored for that server, then the prompt. A stored session the server refuses is
  deleted, and the message says to log in again.
- A session token is kept in one JSON file per server URL under ``ZERG_CONFIG_DIR/sessions``
  (``$XDG_CONFIG_HOME/zerg`` or ``~/.config/zerg``): directory 0700, file 0600 from its creation
  (a temporary file opened 0600, then renamed over the old one). A token file that group or others
  can read, or that another user owns, is refused, as ssh refuses such a key.
- ``zerg logout`` revokes the session on the server and deletes the file; when the server cannot
  be reached the file is deleted anyway and the message says the session stays valid until it
  expires.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from zerg.config import Settings
from zerg.files import atomic_private_file
from zerg.local.client import ClientError, ask, authenticate, revoke


@dataclass(frozen=True)
class StoredSession:
    url: str
    token: str
    expires_at: str
    owner_id: int
    session_id: str


def server_key(url: str) -> str:
    """The URL a session file is keyed by: no trailing slash, scheme and host in lower case."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url.strip().rstrip("/"))
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))


def session_file(config_dir: Path, url: str) -> Path:
    return config_dir / "sessions" / f"{hashlib.sha256(server_key(url).encode()).hexdigest()[:32]}.json"


def _private_dirs(config_dir: Path) -> Path:
    """``config_dir/sessions``, it and ``config_dir`` created or tightened to 0700."""
    sessions = config_dir / "sessions"
    config_dir.parent.mkdir(parents=True, exist_ok=True)
    for path in (config_dir, sessions):
        path.mkdir(exist_ok=True, mode=0o700)
        path.chmod(0o700)
    return sessions


def save_session(config_dir: Path, stored: StoredSession) -> Path:
    _private_dirs(config_dir)
    target = session_file(config_dir, stored.url)
    with atomic_private_file(target, target.with_suffix(f".tmp{os.getpid()}")) as fh:
        fh.write(json.dumps(asdict(stored)).encode())
    return target


def load_session(config_dir: Path, url: str) -> StoredSession | None:
    path = session_file(config_dir, url)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ClientError(f"cannot read the stored session {path}: {exc.strerror}") from None
    with os.fdopen(fd) as fh:
        info = os.fstat(fh.fileno())
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ClientError(f"refusing the stored session {path}: it is mode {stat.S_IMODE(info.st_mode):04o}"
                              f"{'' if info.st_uid == os.getuid() else ' and not yours'}; delete it and run zerg login")
        try:
            return StoredSession(**json.load(fh))
        except (ValueError, TypeError):
            raise ClientError(f"the stored session {path} is not readable: delete it and run zerg login") from None


def remove_session(config_dir: Path, url: str) -> bool:
    try:
        session_file(config_dir, url).unlink()
    except FileNotFoundError:
        return False
    return True


def read_device_secret(settings: Settings, *, from_stdin: bool, stdin: TextIO | None = None,
                       prompt: Callable[[str], str] = getpass.getpass, required: bool = True) -> str | None:
    """The device secret from stdin (``--secret-stdin``), ``ZERG_DEVICE_SECRET`` or a no-echo prompt
    on a terminal; None when there is none and ``required`` is false (a stored session may do)."""
    stdin = stdin or sys.stdin
    if from_stdin:
        secret = stdin.readline().strip()
        if not secret:
            raise ClientError("--secret-stdin: standard input held no device secret")
        return secret
    if settings.device_secret:
        return settings.device_secret.get_secret_value()
    if not required:
        return None
    if stdin.isatty():
        secret = prompt("device secret (zd_...): ").strip()
        if secret:
            return secret
    raise ClientError("no device secret: set ZERG_DEVICE_SECRET, pipe it to --secret-stdin, or type it at the "
                      "prompt on a terminal (zerg owners add / pair give one)")


def login(settings: Settings, url: str, *, from_stdin: bool) -> str:
    """``zerg login``: a session for this device, its token stored for ``url``; what to print."""
    secret = read_device_secret(settings, from_stdin=from_stdin)
    body = authenticate(url, secret)
    stored = StoredSession(server_key(url), body["token"], body["expires_at"], body["owner_id"], body["session_id"])
    path = save_session(settings.config_dir, stored)
    return (f"logged in to {stored.url} as owner {stored.owner_id} (session {stored.session_id}, "
            f"expires {stored.expires_at}); token kept in {path}")


def logout(settings: Settings, url: str) -> tuple[str, bool]:
    """``zerg logout``: revoke the stored session and delete its file; (what to print, ok)."""
    stored = load_session(settings.config_dir, url)
    if stored is None:
        return f"no stored session for {server_key(url)}", True
    try:
        revoke(url, stored.token)
        message, ok = f"session {stored.session_id} revoked on {stored.url}", True
    except ClientError as exc:
        if exc.status == 401:  # already revoked, rotated away or expired: nothing left to revoke
            message, ok = f"session {stored.session_id} was no longer valid on {stored.url}", True
        else:
            message, ok = str(exc), False
    except Exception as exc:  # unreachable server: still forget the token here
        message, ok = (f"could not reach {stored.url} ({exc}); the session stays valid until {stored.expires_at} "
                       f"unless revoked there (DELETE /api/jarvis/sessions/{stored.session_id} or zerg owners rotate)"), False
    remove_session(settings.config_dir, url)
    return f"{message}; the stored token is deleted", ok


def ask_as_device(settings: Settings, url: str, task: str, *, from_stdin: bool, as_json: bool,
                  out: Callable[[str], None] = print) -> dict[str, Any]:
    """``zerg ask``: run ``task`` with an explicit secret, else the stored session, else a prompt."""
    secret = read_device_secret(settings, from_stdin=from_stdin, required=False)
    stored = None if secret else load_session(settings.config_dir, url)
    if stored is None:
        secret = secret or read_device_secret(settings, from_stdin=False)
        return ask(url, secret, task, out=out, as_json=as_json)
    try:
        return ask(url, None, task, token=stored.token, out=out, as_json=as_json)
    except ClientError as exc:
        if exc.status != 401:
            raise
        remove_session(settings.config_dir, url)
        raise ClientError(f"the stored session for {stored.url} was refused ({exc}); it is deleted: run zerg login "
                          "again") from None
