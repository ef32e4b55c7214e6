"""Where a provider with explicit prompt caching (Anthropic ``cache_control``, Bedrock ``cachePoint``)
marks the end of a cacheable prefix.

A message keeps its fence from one inference to the next (:mod:`zerg.llm.untrusted`: its marker is
keyed by the process's secret, not drawn per call), so a request is the same bytes as the previous
one up to the newest message the loop appended. What is marked (at most 3 of a provider's 4 marks):

1. the static prefix: the tools and the system prompt (marked on the system prompt);
2. the thread: the messages before the run's task (the last user message that is not fenced), so
   the owner's next run finds it again;
3. the run's messages up to the newest fence: the last tool result or the model's last reply (a
   user message after it, such as the supervisor's evidence mount, is rebuilt for each inference
   and is not marked).
"""

from __future__ import annotations

from typing import Any

from zerg.llm.untrusted import fenced_parts


def is_fenced(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and "<<<UNTRUSTED-DATA" in content and bool(fenced_parts(content))


def cache_marks(messages: list[dict[str, Any]]) -> list[int]:
    """The indexes of the non-system ``messages`` after which a cache mark goes (ascending, at most 2:
    the thread's end and the run's newest loop message); the system prompt is marked by the caller."""
    convo = [m for m in messages if m.get("role") != "system"]
    task = next((i for i in range(len(convo) - 1, -1, -1)
                 if convo[i].get("role") == "user" and not is_fenced(convo[i])), None)
    newest = next((i for i in range(len(convo) - 1, -1, -1) if convo[i].get("role") in ("tool", "assistant")), None)
    marks = set()
    if task is not None and task >= 1:
        marks.add(task - 1)
    if newest is not None and (task is None or newest > task):
        marks.add(newest)
    elif task is not None:
        marks.add(task)
    return sorted(marks)
