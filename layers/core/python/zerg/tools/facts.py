"""The supervisor's tools for organisational memory: ``list_facts`` ("what do you know about me?")
and ``forget_fact`` ("forget that").

Invariants:
- Owner-scoped through :mod:`zerg.memory.facts`: another owner's memory is "not found", exactly
  like one that does not exist.
- ``forget_fact`` deletes only the id the model names, which it can only have learnt from
  ``list_facts`` (or the memory layer) of this owner; the deletion is what the owner asked for.
- Output is bounded (at most ``limit`` memories, each cut to :data:`CONTENT_CHARS`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from zerg.memory import facts
from zerg.memory.facts import Category
from zerg.tools.base import Tool, ToolContext, ToolOutcome, error

CONTENT_CHARS = 300


class ListFactsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    category: Category | None = Field(default=None, description="Only this category")
    limit: int = Field(default=30, ge=1, le=100, description="How many, most important first")


class ForgetFactArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fact_id: int = Field(gt=0, lt=2**62, description="The memory's id, as list_facts shows it")


def line(row: dict) -> str:
    """One memory as the model and the CLI see it."""
    tags = f" (tags: {', '.join(row['tags'])})" if row["tags"] else ""
    content = row["content"] if len(row["content"]) <= CONTENT_CHARS else row["content"][:CONTENT_CHARS] + "…"
    return f"#{row['id']} [{row['category']}] importance {row['importance']}: {content}{tags}"


def list_facts(args: ListFactsArgs, ctx: ToolContext) -> ToolOutcome:
    with ctx.runtime.pool.connection() as conn:
        rows = facts.list_facts(conn, ctx.owner_id, category=args.category, limit=args.limit)
    if not rows:
        return ToolOutcome(text="No organisational memories" + (f" in category {args.category}." if args.category else " yet."))
    head = f"Organisational memories (most important first, {len(rows)} shown):"
    return ToolOutcome(text="\n".join([head, *(f"- {line(r)}" for r in rows),
                                       "forget_fact(fact_id) deletes one when the user asks."]))


def forget_fact(args: ForgetFactArgs, ctx: ToolContext) -> ToolOutcome:
    with ctx.runtime.pool.connection() as conn:
        row = facts.forget_fact(conn, ctx.owner_id, args.fact_id)
    if row is None:
        return error(f"memory #{args.fact_id} not found")
    return ToolOutcome(text=f"Forgot memory #{row['id']} [{row['category']}]: {row['content'][:CONTENT_CHARS]}")


LIST_FACTS = Tool(
    name="list_facts",
    description="What Zerg remembers about the user (organisational memory: profile, facts, preferences, "
                "decisions, reminders), most important first, with ids. Use for 'what do you know about me?'.",
    args=ListFactsArgs,
    run=list_facts,
)
FORGET_FACT = Tool(
    name="forget_fact",
    description="Delete one organisational memory by id, when the user asks to forget it.",
    args=ForgetFactArgs,
    run=forget_fact,
)
TOOLS = (LIST_FACTS, FORGET_FACT)
