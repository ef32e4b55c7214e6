"""``get_current_time``: the current time in UTC (models do not know what day it is)."""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict

from zerg.loop.tool import Tool, ToolContext, ToolOutcome


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def get_current_time(args: NoArgs, ctx: ToolContext) -> ToolOutcome:
    now = datetime.now(timezone.utc)
    return ToolOutcome(text=f"{now.isoformat(timespec='seconds')} ({now:%A}, UTC)")


TOOL = Tool(
    name="get_current_time",
    description="The current date and time in UTC.",
    args=NoArgs,
    run=get_current_time,
)
