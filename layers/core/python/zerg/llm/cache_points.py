"""Where a provider with explicit prompt caching (Anthropic ``cache_control``, Bedrock ``cachePoint``)
marks the end of a cacheable prefix.

Fencing (:mod:`zerg.llm.untrusted`) draws a fresh marker for every inference, so a fenced message
(a tool result, the evidence mount, a replayed untrusted answer) differs on every call: nothing from
the first fenced message on can ever be read from a cache, and marking it would only pay cache
writes. What is the same from one call to the next, and so is marked (at most 3 of a provider's 4
marks):

1. the static prefix: the tools and the system prompt (marked on the system prompt);
2. the thread: the messages before the run's task (the last user message that is not fenced), when
   none of them is fenced, so the owner's next run finds it again;
3. the run's messages up to the first fence (the task, the model's earlier tool calls).
"""

from __future__ import annotations

from typing import Any

from zerg.llm.untrusted import fenced_parts


def is_fenced(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and "<<<UNTRUSTED-DATA" in content and bool(fenced_parts(content))


def cache_marks(messages: list[dict[str, Any]]) -> list[int]:
    """The indexes of the non-system ``messages`` after which a cache mark goes (ascending, at most 2:
    the thread's end and the stable prefix's end); the system prompt is marked by the caller."""
    convo = [m for m in messages if m.get("role") != "system"]
    first_fence = next((i for i, m in enumerate(convo) if is_fenced(m) or m.get("role") == "tool"), len(convo))
    stable_end = first_fence - 1
    task = next((i for i in range(len(convo) - 1, -1, -1)
                 if convo[i].get("role") == "user" and not is_fenced(convo[i])), None)
    marks = set()
    if task is not None and 0 <= task - 1 < first_fence:
        marks.add(task - 1)
    if stable_end >= 0:
        marks.add(stable_end)
    return sorted(marks)
