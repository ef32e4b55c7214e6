"""Text for a person, made the same way everywhere: a one-line cut of any text, a size in bytes."""

from __future__ import annotations

import re


def one_line(text: str, limit: int = 120) -> str:
    """``text`` on one line (whitespace collapsed), at most ``limit`` characters (cut with …)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def title(text: str, limit: int = 60) -> str:
    """A short title for a longer text (a worker's task as a source under an answer): its first
    non-blank line's first sentence, capitalised, cut at a word within ``limit`` characters."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    sentence = re.split(r"(?<=[.!?;])\s", " ".join(line.split()), maxsplit=1)[0].rstrip(".;")
    if len(sentence) > limit:
        cut = sentence[: limit - 1]
        sentence = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut).rstrip(",:;- ") + "…"
    return sentence[:1].upper() + sentence[1:]


def human_bytes(n: float) -> str:
    """``n`` bytes as a person reads them: ``512 bytes``, ``1.5 KiB``, ``3.2 GiB``."""
    if n < 1024:
        return f"{n:.0f} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
