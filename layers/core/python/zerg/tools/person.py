"""The tools only a person may use (schedules, preferences, reminders): the run that calls one
must have been started by a person, never by a schedule, since text a scheduled run reads must not
act through them."""

from __future__ import annotations

from typing import Any

from zerg.loop.tool import ToolContext, ToolOutcome, error
from zerg.runs import store as runs
from zerg.statuses import is_background


def person_run(ctx: ToolContext, name: str, refusal: str | None = None) -> "dict[str, Any] | ToolOutcome":
    """The run calling tool ``name`` when a person started it (chat, API, CLI, a reply), else the
    refusal: text a scheduled run reads must not act through the tools only a person may use."""
    rt = ctx.runtime
    if rt is None or ctx.owner_id is None or ctx.run_id is None:
        return error(f"{name} works only inside a run")
    with rt.pool.connection() as conn:
        run = runs.get_run(conn, ctx.owner_id, ctx.run_id)
    if run is None or is_background(run):
        return error(refusal or f"{name} is only for a run the user started, not a scheduled run")
    return run
