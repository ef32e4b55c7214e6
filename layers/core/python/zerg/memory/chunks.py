"""How a memory file is cut into overlapping chunks for its vectors.

A sentence-embedding model reads a window (all-MiniLM-L6-v2: 256 word pieces, ~1,000 characters
of English) and ignores the rest, so one vector per file sees only a file's start; evidence further
in was invisible to the vector side. A file is cut into chunks that each fit the window, overlapping
so that a passage cut at a boundary is whole in one of them, and is scored by its best chunk.

Invariants:
- Pure: spans of the content (``start``, ``end``: characters, end exclusive), in order, covering the
  content from its start with no gap, each at most :data:`CHUNK_CHARS` long, consecutive ones
  overlapping; at most :data:`MAX_CHUNKS` of them (the content past :func:`covered` is found by
  full text only). Empty content is one empty span (the title alone is embedded).
- A chunk ends at a line break where one lies in its last part (a conversation's turn, a note's
  line), else at a space, else at the size; the next starts at a line in the overlap where it can.
- The text embedded for a chunk starts with the file's title (:func:`chunk_text`).
"""

from __future__ import annotations

CHUNK_CHARS = 800  # ~200 word pieces of English: inside all-MiniLM-L6-v2's 256, with the title
OVERLAP = 200
MAX_CHUNKS = 64  # ~38,000 characters: a file's first that many characters have vectors
TITLE_CHARS = 120
_SOFT_END = 0.6  # a chunk may end early, at a line or a space, from this share of its size on


def spans(content: str, *, size: int = CHUNK_CHARS, overlap: int = OVERLAP,
          max_chunks: int = MAX_CHUNKS) -> list[tuple[int, int]]:
    """The chunks of ``content`` as (start, end) character spans (see the module's rules)."""
    if not 0 <= overlap < size // 2:
        raise ValueError(f"overlap {overlap} must be below half the chunk size {size}")
    n = len(content)
    if n <= size:
        return [(0, n)]
    out: list[tuple[int, int]] = []
    start = 0
    while len(out) < max_chunks:
        end = min(n, start + size)
        if end < n:
            soft = start + int(size * _SOFT_END)
            line = content.rfind("\n", soft, end)
            space = content.rfind(" ", soft, end)
            end = line + 1 if line != -1 else space + 1 if space != -1 else end
        out.append((start, end))
        if end >= n:
            break
        line = content.find("\n", end - overlap, end - 1)
        start = line + 1 if line != -1 else _word_start(content, end - overlap, end)
    return out


def _word_start(content: str, lo: int, hi: int) -> int:
    """The first word start in [lo, hi), else ``lo``."""
    space = content.find(" ", lo, hi)
    return space + 1 if space != -1 and space + 1 < hi else lo


def covered(content: str) -> int:
    """How many of ``content``'s first characters the chunks cover."""
    return spans(content)[-1][1]


def chunk_text(title: str, content: str, span: tuple[int, int]) -> str:
    """The text embedded for one chunk: the title (cut) above the chunk's characters."""
    body = content[span[0]:span[1]]
    title = title.strip()[:TITLE_CHARS]
    return f"{title}\n\n{body}" if title else body
