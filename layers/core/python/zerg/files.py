"""A private file that appears whole or not at all: written under a temporary name (0600, created
new, never through a link), flushed to disk, then renamed onto its final name. A crash or an error
leaves no partial file under the final name, and the temporary one is removed on an error."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_private_file(dest: Path, tmp: Path, *,
                        open_error: Callable[[OSError], Exception] | None = None) -> Iterator[BinaryIO]:
    """Yield ``tmp`` open for writing (binary); once the block ends, ``tmp`` is synced and renamed
    to ``dest``. ``open_error``: the exception to raise instead when ``tmp`` cannot be created."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        if open_error is None:
            raise
        raise open_error(exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
