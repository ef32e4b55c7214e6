"""Starting the execution of a run whose row is already written: the one path for every run start
(the API's ``POST /api/jarvis/supervisor``, a schedule's fire and an email or SMS reply).

Invariants:
- The run row (``running``, ``supervisor_started`` emitted) is committed before the execution
  starts: the execution reads it.
- Starting is idempotent per run: the execution is named after the run (Step Functions answers a
  repeat with the same execution; the local starter remembers what it started).
- A start that fails closes the run ``failed`` with the reason and frees its Idempotency-Key (a
  retry must start a new run), hands it to :func:`zerg.runs.closing.after_close`, then raises
  :class:`LaunchError`; it never leaves a run ``running`` that nothing executes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability, tracing
from zerg.runs import store as runs

if TYPE_CHECKING:
    from zerg.runtime import Runtime


class LaunchError(RuntimeError):
    """The run's execution could not be started; the run is closed ``failed`` with the reason."""


def start_execution(rt: "Runtime", run: dict[str, Any]) -> str:
    """Start ``run``'s execution and record its ARN; return the ARN."""
    try:
        ids = (run["id"], run["owner_id"], run["thread_id"])
        traceparent = tracing.traceparent_for(run)  # None while tracing is off
        arn = rt.starter.start(*ids, traceparent=traceparent) if traceparent else rt.starter.start(*ids)
    except Exception as exc:
        reason = f"could not start the run: {type(exc).__name__}"
        observability.logger().warning("run start failed", exc_info=True, extra={"run_id": run["id"], "reason": reason})
        with rt.pool.connection() as conn:
            closed = runs.fail_run(conn, run, "failed", reason) is not None
            runs.release_idempotency_key(conn, run["id"])
        if closed:  # a check that could not start is a warning in the inbox; a reply is told
            from zerg.runs.closing import after_close

            after_close(rt, run)
        raise LaunchError(f"run {run['id']} {reason}") from None
    with rt.pool.connection() as conn:
        runs.set_execution_arn(conn, run["id"], arn)
    return arn
