"""Run and job statuses and the triggers that decide what follows a run, defined once (the migrations' CHECK constraints list the same values;
``tests/test_structure.py`` holds the two in step).

Invariants:
- A status is set by the system (exit codes, exceptions, deadlines, the user's cancel), never
  from what a model says.
- A final status never changes again.
- ``interrupted``: the process executing the run stopped (killed, crashed, its execution aborted)
  before the run ended; the run was closed by whoever noticed (the orphan reaper, the execution
  status rule on AWS), never by the run itself.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

RunStatus = Literal["queued", "running", "awaiting_approval", "success", "failed", "timeout", "cancelled", "interrupted"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
RUN_FINAL: tuple[str, ...] = ("success", "failed", "timeout", "cancelled", "interrupted")
# ``awaiting_approval``: a worker of the run waits for the owner's answer to a tool call (issue 27); its
# execution waits on a callback task and nothing runs. It goes back to ``running`` when the wait ends.
RUN_UNFINISHED: tuple[str, ...] = ("queued", "running", "awaiting_approval")

JobStatus = Literal["queued", "running", "success", "failed", "timeout", "cancelled"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
# What a worker's own run can end with (its metadata.json): the system decided it. ``cancelled``:
# it was stopped from outside (its run was cancelled, reached its deadline or was interrupted; its
# commands were killed), so metadata and index agree.
WORKER_OUTCOMES: tuple[str, ...] = ("success", "failed", "timeout", "cancelled")
# A job that will not change any more: a worker outcome (a job cancelled before it started too).
JOB_FINISHED: tuple[str, ...] = WORKER_OUTCOMES
JOB_UNFINISHED: tuple[str, ...] = ("queued", "running")

# Who started a run (``runs.trigger``), where it decides what follows the run: a background run
# (nobody reads along; it ends with an assessment) and a reply's run (its answer goes back on the
# channel the reply came by). The API's runs are ``api``.
BACKGROUND_TRIGGERS: tuple[str, ...] = ("schedule",)
REPLY_TRIGGERS: tuple[str, ...] = ("email", "sms")


def is_background(run: dict[str, Any]) -> bool:
    """An unattended run: nobody reads along, it ends with an assessment."""
    return run.get("trigger") in BACKGROUND_TRIGGERS
