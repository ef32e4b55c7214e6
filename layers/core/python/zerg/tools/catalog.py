"""The tool catalogue: which tools each kind of agent gets (:func:`supervisor_tools`,
:func:`worker_tools`), and every tool name an owner may allow per agent (:func:`tool_names`, what
agent settings are checked against)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from zerg.loop.tool import Tool, ToolOutcome


class SpawnArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=8_000, description="One self-contained task for a worker")
    model: str | None = Field(default=None, min_length=1, max_length=100, description="Worker model id (optional)")


SPAWN_TOOL = Tool(
    "spawn_worker",
    "Start a disposable worker agent (with ssh_exec, container_exec, http_request) on one task. "
    "You receive its outcome when it finishes.",
    SpawnArgs,
    run=lambda args, ctx: ToolOutcome(text="spawn_worker is handled by the supervisor loop"),
)


def supervisor_tools(*, background: bool = False) -> dict[str, Tool]:
    """The supervisor's tools; a ``background`` (scheduled) run gets no create_reminder and no
    directive tools (schedules, preferences)."""
    from zerg.tools import clock, connectors
    from zerg.tools import directive_tools as directives
    from zerg.tools import http
    from zerg.tools import memory_tools as memory
    from zerg.tools import reminder_tools as reminders
    from zerg.tools.fact_tools import TOOLS as FACT_TOOLS
    from zerg.tools.worker_access import TOOLS as WORKER_QUERY_TOOLS

    tools = {t.name: t for t in (SPAWN_TOOL, *WORKER_QUERY_TOOLS, clock.TOOL, http.TOOL, *memory.TOOLS, *FACT_TOOLS,
                                 *connectors.SUPERVISOR_TOOLS)}
    if not background:  # a person's run only: text a scheduled run reads must not plant reminders
        tools[reminders.TOOL.name] = reminders.TOOL  # nor change its own schedule or alerts
        tools.update({t.name: t for t in directives.TOOLS})
    return tools


def worker_tools() -> dict[str, Tool]:
    """The worker's shell-first toolset: the terminal is the primitive, not a curated list. Memory:
    read tools and ``memory_write`` for new files only (a worker reads untrusted output directly)."""
    from zerg.tools import clock, connectors, container, http, memory_tools, ssh

    return {t.name: t for t in (ssh.TOOL, container.TOOL, http.TOOL, clock.TOOL, *memory_tools.WORKER_TOOLS,
                                *connectors.WORKER_TOOLS)}


def tool_names() -> dict[str, list[str]]:
    """Every tool each agent can have (the supervisor's person-run tools included), in prompt order."""
    return {"supervisor": list(supervisor_tools()), "worker": list(worker_tools())}


def tool_descriptions() -> dict[str, str]:
    """What each tool any agent can have does, by name: the description its model reads."""
    return {tool.name: tool.description for tools in (supervisor_tools(), worker_tools()) for tool in tools.values()}
