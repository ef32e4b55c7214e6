"""Recall: the ``[MEMORY CONTEXT]`` layer the supervisor is shown for a run (seed 004 §7, seed 002).

:func:`memory_layer` gathers, for one task: the owner's ``profile`` memories (always, up to 20,
by importance then recency), the top memory-file hits of a search for it (path, title, snippet, who
wrote it and in which run) and the owner's top other organisational memories.

Invariants:
- Owner-scoped: every read filters by the owner (search, files, org memory); another owner's
  memories never appear.
- Ephemeral and untrusted: the layer is computed once per supervisor invocation (plan, resume),
  handed to the context assembler, never stored (not on the thread, not in the working messages).
  Memory may hold text a model wrote from tool output, so the layer reaches the model fenced as
  data in a user-role message, never in the system prompt.
- Bounded: about the memory share of ``ZERG_CONTEXT_BUDGET_BYTES`` (at most :data:`MAX_BYTES`; the
  assembler then fits it exactly); when it must be cut, whole lines go, the general memories first,
  then the file hits, the profile last (it also comes first, as the assembler keeps the head).
- Never fails a run, nor holds it up: the query embedding runs under the embedder's hard timeout
  inside search (a slow embedder degrades to full-text); every statement runs under the search's
  statement timeout (:data:`zerg.memory.search.SEARCH_TIMEOUT`: a search past it has no hits);
  any failure is logged and the layer carries what was gathered, or is None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability
from zerg.memory import facts, files
from zerg.memory.search import SEARCH_TIMEOUT

if TYPE_CHECKING:
    from zerg.runtime import Runtime

HEADER = "[MEMORY CONTEXT]"
FILE_HITS = 3
TOP_FACTS = 10
MAX_BYTES = 8_000
FACT_CHARS = 300
QUERY_CHARS = 1_000  # what search accepts


# The memory layer's share of the supervisor's context budget (what :mod:`zerg.supervisor.context`
# allots it, and the size this layer is cut to).
MEMORY_SHARE = 0.10


def memory_layer(rt: "Runtime", owner_id: int, task: str) -> str | None:
    """The ``[MEMORY CONTEXT]`` text for ``task``, or None when the owner has no memory to show."""
    log = observability.logger()
    hits: list[dict[str, Any]] = []
    profile: list[dict[str, Any]] = []
    general: list[dict[str, Any]] = []
    try:
        hits = file_hits(rt, owner_id, task)
    except Exception as exc:  # recall is a help, never a reason to fail a run
        log.warning("recall: memory search failed", extra={"owner_id": owner_id, "reason": f"{type(exc).__name__}: {exc}"[:300]})
    try:
        with rt.pool.connection() as conn:
            files.limit_time(conn, SEARCH_TIMEOUT)
            profile = facts.profile_facts(conn, owner_id)
            general = facts.top_facts(conn, owner_id, TOP_FACTS)
    except Exception as exc:
        log.warning("recall: organisational memory not read", extra={"owner_id": owner_id, "reason": f"{type(exc).__name__}: {exc}"[:300]})
    return render(hits, profile, general, layer_bytes(rt.settings.context_budget_bytes))


def layer_bytes(context_budget: int) -> int:
    """The layer's size: about its share of the context budget (the assembler fits it exactly; cut
    here at whole lines, the least important first, rather than there mid-line), at most MAX_BYTES."""
    return min(MAX_BYTES, int(context_budget * MEMORY_SHARE * 0.8))


def file_hits(rt: "Runtime", owner_id: int, task: str) -> list[dict[str, Any]]:
    """The top :data:`FILE_HITS` memory files for ``task``, each with its writer and run."""
    from zerg.memory import filesystem

    query = " ".join(task.split())[:QUERY_CHARS]
    if not query:
        return []
    found = filesystem.search(rt, owner_id, query, limit=FILE_HITS).hits
    if not found:
        return []
    with rt.pool.connection() as conn:  # who wrote each hit (search does not say): read, not touched
        files.limit_time(conn, SEARCH_TIMEOUT)
        rows = {h.path: files.get(conn, owner_id, h.path) for h in found}
    return [{"path": h.path, "title": h.title, "snippet": h.snippet, "method": h.method,
             "writer": (rows.get(h.path) or {}).get("writer"), "run_id": (rows.get(h.path) or {}).get("writer_run_id")}
            for h in found]


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fact_line(row: dict[str, Any], with_category: bool) -> str:
    tags = f" (tags: {', '.join(row['tags'])})" if row["tags"] else ""
    kind = f" {row['category']}" if with_category else ""
    # Who wrote it and from which run: an extracted memory comes from a run's words, to be weighed.
    source = f"{row.get('writer') or 'unknown'}" + (f", run {row['source_run_id']}" if row.get("source_run_id") else "")
    return f"- [#{row['id']}{kind}] {_cut(row['content'], FACT_CHARS)}{tags} ({source})"


def _file_lines(hit: dict[str, Any]) -> list[str]:
    who = f"written by {hit['writer'] or 'unknown'}" + (f" in run {hit['run_id']}" if hit.get("run_id") else "")
    title = f' "{_cut(hit["title"], 120)}"' if hit["title"] else ""
    lines = [f"- {hit['path']}{title} ({who}; found by {hit['method']})"]
    if hit["snippet"]:
        lines.append(f"  {_cut(hit['snippet'], 320)}")
    return lines


def render(hits: list[dict[str, Any]], profile: list[dict[str, Any]], general: list[dict[str, Any]],
           max_bytes: int = MAX_BYTES) -> str | None:
    """The layer's text, at most ``max_bytes``: general memories are dropped first (least important
    last in line), then file hits (lowest ranked first), the profile last."""
    if not (hits or profile or general):
        return None
    files_part = [_file_lines(h) for h in hits]
    profile_part = [_fact_line(r, False) for r in profile]
    general_part = [_fact_line(r, True) for r in general]

    def text() -> str:
        out = [HEADER, "What Zerg remembers that may bear on this request (memory_read(path) opens a file; "
                       "list_facts shows every organisational memory)."]
        if profile_part:  # first: the assembler keeps the head of the layer when it must cut
            out += ["About the owner (profile):", *profile_part]
        if files_part:
            out += ["Memory files (best matches):", *(line for lines in files_part for line in lines)]
        if general_part:
            out += ["Organisational memory (most important first):", *general_part]
        return "\n".join(out)

    for part in (general_part, files_part, profile_part):
        while part and len(text().encode()) > max_bytes:
            part.pop()
    layer = text()
    if len(layer.encode()) > max_bytes:  # only the header lines would be left: no layer
        return None
    return layer if (files_part or profile_part or general_part) else None
