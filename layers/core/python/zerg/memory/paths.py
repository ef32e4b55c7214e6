"""Memory paths and the small fields of a memory file: the one validator the tools, the API and the
CLI share, so all three accept and refuse exactly the same input.

A memory path is relative and ``/``-separated, like ``episodes/2026-11-22/42-disk-check.md``:

- at most 512 characters, at most 16 segments, each segment 1-100 characters;
- no leading ``/``, no empty segment (``a//b``, a trailing ``/``), no segment made only of dots
  (``.``, ``..``, ``...``), no backslash;
- each character is a letter or a digit (any script: ``notes/café.md`` and ``заметки/план.md`` are
  fine; combining marks too, after the first character of a segment), or one of ``- _ . @ + , ( )``
  or a space (not at either end of a segment). So no control character, no NUL, no invisible
  formatting character (a right-to-left override could make a path read as another), no shell or
  glob character;
- the path is stored in Unicode NFC form, so two spellings of "é" name one file.

An ``ls`` prefix is empty, or a valid path, optionally ending with ``/``.

Every refusal is a :class:`MemoryInputError` whose message says exactly what is wrong and where
(tools show it to the model, the API answers 422, the CLI exits 2).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

MAX_PATH_CHARS = 512
MAX_SEGMENT_CHARS = 100
MAX_SEGMENTS = 16
MAX_CONTENT_BYTES = 262_144  # the column's CHECK (256 KiB of UTF-8)
MAX_TITLE_CHARS = 255
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_METADATA_BYTES = 4_096
PUNCTUATION = "-_.@+,() "
ALLOWED = "letters, digits, space and - _ . @ + , ( )"
TAG_PUNCTUATION = "-_.:"


class MemoryInputError(ValueError):
    """Input the memory files refuse; the message says what and where."""


def _char(ch: str) -> str:
    return f"{ch!r} (U+{ord(ch):04X})"


def _check_segment(segment: str, start: int) -> None:
    if not segment:
        raise MemoryInputError(f"path has an empty segment at position {start} ('//' or a trailing '/')")
    if set(segment) == {"."}:
        raise MemoryInputError(f"path segment {segment!r} is not allowed (no '.' or '..' segments)")
    if len(segment) > MAX_SEGMENT_CHARS:
        raise MemoryInputError(f"path segment {segment[:20]!r}... is {len(segment)} characters; "
                               f"at most {MAX_SEGMENT_CHARS} per segment")
    if segment[0] == " " or segment[-1] == " ":
        raise MemoryInputError(f"path segment {segment!r} starts or ends with a space")
    for offset, ch in enumerate(segment):
        category = unicodedata.category(ch)
        if category[0] in "LN" or ch in PUNCTUATION or (category in ("Mn", "Mc") and offset > 0):
            continue
        where = f"at position {start + offset}"
        if ch == "\\":
            raise MemoryInputError(f"path contains a backslash {where}; separate folders with '/'")
        if category[0] == "C":
            raise MemoryInputError(f"path contains the control or invisible character {_char(ch)} {where}")
        raise MemoryInputError(f"path contains {_char(ch)} {where}; allowed: {ALLOWED}")


def check_path(path: Any) -> str:
    """The path in its stored (NFC) form, or :class:`MemoryInputError` saying what is wrong."""
    if not isinstance(path, str):
        raise MemoryInputError("path must be a string")
    if not path:
        raise MemoryInputError("path is empty")
    if "\x00" in path:
        raise MemoryInputError(f"path contains the NUL character at position {path.index(chr(0))}")
    path = unicodedata.normalize("NFC", path)
    if len(path) > MAX_PATH_CHARS:
        raise MemoryInputError(f"path is {len(path)} characters; at most {MAX_PATH_CHARS}")
    if path.startswith("/"):
        raise MemoryInputError("path must be relative: remove the leading '/'")
    segments = path.split("/")
    if len(segments) > MAX_SEGMENTS:
        raise MemoryInputError(f"path has {len(segments)} segments; at most {MAX_SEGMENTS}")
    start = 0
    for segment in segments:
        _check_segment(segment, start)
        start += len(segment) + 1
    return path


def check_prefix(prefix: Any) -> str:
    """An ``ls`` prefix: empty, or a valid path with an optional trailing ``/``."""
    if prefix is None or prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise MemoryInputError("prefix must be a string")
    folder = prefix.endswith("/")
    try:
        path = check_path(prefix[:-1] if folder else prefix)
    except MemoryInputError as exc:
        raise MemoryInputError(f"prefix: {exc}") from None
    return path + "/" if folder else path


def check_content(content: Any) -> str:
    if not isinstance(content, str):
        raise MemoryInputError("content must be a string")
    if "\x00" in content:
        raise MemoryInputError(f"content contains the NUL character at position {content.index(chr(0))}")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise MemoryInputError(f"content is {size} bytes; at most {MAX_CONTENT_BYTES} (256 KiB) per memory file")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryInputError(f"content holds a lone surrogate at position {exc.start}: not valid text") from None
    return content


def check_title(title: Any) -> str:
    if not isinstance(title, str):
        raise MemoryInputError("title must be a string")
    title = title.strip()
    if len(title) > MAX_TITLE_CHARS:
        raise MemoryInputError(f"title is {len(title)} characters; at most {MAX_TITLE_CHARS}")
    for at, ch in enumerate(title):
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            raise MemoryInputError(f"title contains the control or invisible character {_char(ch)} at position {at}")
    return title


def check_tags(tags: Any) -> list[str]:
    """Tags lower-cased, stripped and de-duplicated (first occurrence kept): at most 20 of 1-50
    characters, each a letter, digit or one of ``- _ . :``."""
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise MemoryInputError("tags must be a list of strings")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise MemoryInputError("tags must be a list of strings")
        tag = unicodedata.normalize("NFC", tag.strip().lower())
        if not tag:
            raise MemoryInputError("tags: an empty tag")
        if len(tag) > MAX_TAG_CHARS:
            raise MemoryInputError(f"tag {tag[:20]!r}... is {len(tag)} characters; at most {MAX_TAG_CHARS}")
        bad = next((ch for ch in tag if not (unicodedata.category(ch)[0] in "LN" or ch in TAG_PUNCTUATION)), None)
        if bad is not None:
            raise MemoryInputError(f"tag {tag!r} contains {_char(bad)}; allowed: letters, digits and - _ . :")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise MemoryInputError(f"{len(out)} tags; at most {MAX_TAGS}")
    return out


def check_metadata(metadata: Any) -> dict[str, Any]:
    """A small JSON object (at most 4 KiB serialised, no NUL anywhere)."""
    if not isinstance(metadata, dict):
        raise MemoryInputError("metadata must be a JSON object")
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryInputError(f"metadata is not JSON: {exc}") from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise MemoryInputError(f"metadata is {len(text.encode('utf-8', 'surrogatepass'))} bytes as JSON; "
                               f"at most {MAX_METADATA_BYTES}")
    if "\\u0000" in text:
        raise MemoryInputError("metadata contains the NUL character")
    return metadata
