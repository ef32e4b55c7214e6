"""What every provider's conversion from the port's Chat Completions-shaped messages needs alike.

Invariants:
- Pure: no I/O, no provider SDK imported.
- A tool call's arguments that are not a JSON object (malformed ones were already answered by the
  tool's own error) become an empty object: the provider's wire format wants an object.
- A message's content of any shape becomes its text (content parts joined, anything else as JSON).
"""

from __future__ import annotations

import json
from typing import Any


def tool_arguments(raw: str | None) -> dict[str, Any]:
    """A tool call's arguments as the object the provider wants (malformed ones as an empty object)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def content_text(content: Any) -> str:
    """A message's content as text: a string as it is, text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)
