"""The gate every tool call of a run passes before it runs (:attr:`zerg.loop.tool.ToolContext.gate`):
the owner's approval policy decides (:func:`zerg.approvals.policy.decide`) from the call, the host
and who started the run.

Invariants:
- Decided in code, after the arguments validate and before the tool runs, for the supervisor's and
  the workers' calls alike; nothing a model says reaches the decision but the call itself.
- ``deny``: the call's result is "DENIED: denied by the owner's policy: ..." (persisted like any
  tool result); the tool never runs.
- ``ask``: the result carries an :class:`~zerg.approvals.policy.ApprovalNeeded` (``outcome.approval``).
  A worker's call then waits for the owner (:meth:`zerg.workers.runner._WorkerHooks.hold` decides
  before the call runs, creates the pending approval and ends the step; the run machine waits on a
  callback task, :mod:`zerg.approvals.wait`): approved, exactly that call runs once. The supervisor's
  loop has no wait (it answers within one turn): its call does not run, and the result tells the
  model to delegate it to a worker, whose call waits for the owner, or to say it needs approval.
- Nothing is asked about a call that could not run anyway: an ``ssh_exec`` to an alias that is
  not the owner's host goes on to the tool, which refuses it ("not in the SSH allowlist") without
  connecting. A ``deny`` is still a denial.
- The run's trigger is read once (it never changes); the policy at every governed call, so a
  change the owner makes mid-run holds from the next call. A run that cannot be found counts as
  unattended (the stricter rule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from zerg import approvals
from zerg.approvals.policy import GOVERNED, ApprovalNeeded, decide, denied_text, is_mcp_tool
from zerg.loop.tool import ToolOutcome
from zerg.runs import store as runs

if TYPE_CHECKING:
    from zerg.runtime import Runtime

Gate = Callable[[str, BaseModel], ToolOutcome | None]


def approval_gate(rt: Runtime, owner_id: int, run_id: int | None) -> Gate:
    """The gate for the tool calls of the owner's run ``run_id``."""
    trigger: list[str | None] = []

    def gate(name: str, args: BaseModel) -> ToolOutcome | None:
        mcp = is_mcp_tool(name)
        if name not in GOVERNED and not mcp:
            return None
        with rt.pool.connection() as conn:
            if not trigger:
                run = runs.get_run(conn, owner_id, run_id) if run_id is not None else None
                trigger.append(run["trigger"] if run else None)
            policy = approvals.load_policy(conn, owner_id)
        data = args.model_dump(mode="json")
        host = data.get("host") if name == "ssh_exec" else None
        decision = decide(policy, name, data, host, trigger[0], read_only=mcp and getattr(args, "mcp_read_only", False))
        if decision.outcome == "allow":
            return None
        if decision.outcome == "deny":
            return ToolOutcome(text=denied_text(decision), ok=False)
        if host is not None and not _owners_host(rt, owner_id, host):
            return None  # ssh_exec refuses an unknown alias itself, before connecting: nothing to approve
        needed = ApprovalNeeded(tool=name, arguments=data, host=host, reason=decision.reason, trigger=trigger[0],
                                expires_in_s=policy.expiry_s, max_asks=policy.max_asks_per_run)
        return ToolOutcome(text=needed.text(), ok=False, approval=needed)

    return gate


def _owners_host(rt: Runtime, owner_id: int, alias: str) -> bool:
    from zerg.hosts.registry import resolve

    with rt.pool.connection() as conn:
        return not isinstance(resolve(conn, rt.settings, owner_id, alias), list)
