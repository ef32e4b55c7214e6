"""What a short reply means when it is the whole message: an acknowledgement ("ok", "ack", "got
it") or a confirmation ("yes").

Invariants:
- The whole message decides, never a word in it: "ok but why is the disk full?" is a question.
- Politeness ("thanks", "please") may come with a meaning word but is none on its own: a bare
  "thanks" to a critical alert does not stop its pages.
- Word sets and a bounded segmentation, no backtracking regex: a long or hostile message costs
  linear time, and anything over :data:`MAX_CHARS` means nothing here.
"""

from __future__ import annotations

import unicodedata

MAX_CHARS = 60
ACKNOWLEDGEMENTS = frozenset({
    "ok", "okay", "k", "kk", "ack", "acked", "acknowledge", "acknowledged", "got it", "roger", "roger that",
    "seen", "noted", "👍", "👌", "✅",
})
AFFIRMATIVES = frozenset({"yes", "y", "yep", "yeah", "yup", "sure", "confirm", "confirmed", "do it", "go ahead"})
POLITENESS = frozenset({"thanks", "thank you", "thx", "ty", "cheers", "please", "pls"})
_LONGEST = 2  # words in the longest phrase above
_MODIFIERS = {"\ufe0f", "\u200d"} | {chr(c) for c in range(0x1F3FB, 0x1F400)}  # emoji variation, joiner, skin tones


def is_acknowledgement(text: str) -> bool:
    """The whole message acknowledges: "ok", "Ack.", "got it, thanks!", "👍"."""
    return _means(text, ACKNOWLEDGEMENTS)


def is_affirmative(text: str) -> bool:
    """The whole message says yes: "yes", "Yes please.", "do it", "y"."""
    return _means(text, AFFIRMATIVES)


def _words(text: str) -> list[str]:
    out: list[str] = []
    for ch in text.casefold():
        if ch in _MODIFIERS:
            continue
        category = unicodedata.category(ch)
        if category[0] in "PZC":
            out.append(" ")
        elif category == "So":  # an emoji is a word of its own, even written against one
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out).split()


def _means(text: str, meaning: frozenset[str]) -> bool:
    if not text or len(text) > MAX_CHARS:
        return False
    words = _words(text)
    # reach[i]: the first i words split into phrases; True once a meaning phrase is among them.
    reach: list[bool | None] = [None] * (len(words) + 1)
    reach[0] = False
    for i in range(len(words)):
        if reach[i] is None:
            continue
        for n in range(1, _LONGEST + 1):
            phrase = " ".join(words[i:i + n])
            if i + n > len(words) or (phrase not in meaning and phrase not in POLITENESS):
                continue
            reach[i + n] = bool(reach[i + n]) or reach[i] or phrase in meaning
    return bool(words) and reach[len(words)] is True
