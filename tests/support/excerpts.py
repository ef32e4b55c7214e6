"""What a recorded model request shows of the workers' evidence: its text, the excerpts of evidence
files it repeats, and big outputs to produce that evidence with real commands."""

from __future__ import annotations

from collections import Counter
from typing import Any

WIDTH = 200  # a shingle: this many characters of an evidence file, anywhere in it
AROUND = 65_536  # excerpts are heads and tails: this much of each end of a file is searched


def request_text(request: dict[str, Any]) -> str:
    """Every message content of a recorded request, one after the other (as the model reads them)."""
    parts = []
    for message in request["messages"]:
        content = message.get("content")
        parts.append(content if isinstance(content, str) else "")
        for call in message.get("tool_calls") or []:
            parts.append(call["function"]["arguments"])
    return "\n\0\n".join(parts)


def evidence_ends(store, worker_id: str, paths: list[str]) -> list[str]:
    """The head and the tail (AROUND bytes each) of each of the worker's files: all an excerpt can show."""
    ends = []
    for path in paths:
        size = store.size(worker_id, path)
        ends.append(store.head(worker_id, path, min(size, AROUND)).decode("utf-8", "ignore"))
        if size > AROUND:
            ends.append(store.tail(worker_id, path, AROUND).decode("utf-8", "ignore"))
    return ends


def repeated_excerpts(text: str, evidence: list[str], width: int = WIDTH) -> list[str]:
    """The ``width``-character shingles of the evidence that appear more than once in ``text``
    (one per repeated run: after a hit the scan moves on by a shingle)."""
    counts = Counter(text[i:i + width] for i in range(len(text) - width + 1))
    found, i = [], 0
    while i <= len(text) - width:
        shingle = text[i:i + width]
        if counts[shingle] > 1 and any(shingle in e for e in evidence):
            found.append(shingle)
            i += width
        else:
            i += 1
    return found


def log_command(name: str, size: int) -> str:
    """A shell command printing about ``size`` bytes of distinct lines (no shingle repeats in it)."""
    line = f"{name} log line %.0f: service healthy, queue depth nominal, nothing to report"
    return f"seq -f '{line}' 1 {size // len(line) + 1}"  # each line is a little longer than its format


def answer_text(name: str, size: int) -> str:
    """A worker's final answer of about ``size`` bytes of distinct lines, ending with a marker line."""
    lines, n, length = [], 0, 0
    while length < size - 60:
        n += 1
        lines.append(f"{name} finding {n}: checked item {n * 7919 % 100_003}, within limits.\n")
        length += len(lines[-1])
    return "".join(lines) + f"END-OF-ANSWER {name}"
