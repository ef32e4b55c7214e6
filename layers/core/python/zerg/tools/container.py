"""``container_exec``: a shell command in a sandbox of its own (see :mod:`zerg.sandbox`).

Each call gets a fresh sandbox: with bubblewrap or util-linux ``unshare``, its own user, PID,
mount, IPC, UTS and network namespaces over a read-only view of the host's system directories,
with a private /tmp and home; on a host without either (and on Lambda), today's best effort: a
scrubbed environment, a per-call uid when we are root, a process group and a targeted sweep.
Whatever the mechanism, the call returns only once every process it started is gone, also when
the run is cancelled mid-command (the context's cancel signal kills the sandbox). Output is
captured to files (bounded memory) and capped for the model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from zerg.tools.base import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, error, shell_report


class ContainerExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, max_length=20_000, description="Shell command to run")
    timeout_s: float = Field(default=30, gt=0, le=600, description="Seconds before the command is killed")


def container_exec(args: ContainerExecArgs, ctx: ToolContext) -> ToolOutcome:
    from zerg.sandbox import execute
    from zerg.sandbox.reaper import SandboxError

    if ctx.cancelled():
        return error(f"not run: {ctx.cancel.reason}")
    timeout = ctx.bounded(args.timeout_s)
    try:
        result = execute(args.command, timeout, ctx.settings, output_cap=ARTIFACT_OUTPUT_CAP, cancel=ctx.cancel)
    except SandboxError as exc:
        return error(f"container_exec could not prepare a sandbox: {exc}")
    if result.cancelled:
        note = f"killed: {ctx.cancel.reason}; the sandbox and everything in it are gone"
    else:
        note = f"killed after {timeout:.1f}s timeout" if result.timed_out else ""
    text, artifact = shell_report(f"$ {args.command}", result.exit_code, result.stdout, result.stderr,
                                  result.duration_ms, note, ctx.settings.tool_output_cap)
    return ToolOutcome(text=text, artifact=artifact, ok=result.exit_code == 0, exit_code=result.exit_code)


TOOL = Tool(
    name="container_exec",
    description=(
        "Run a shell command in a fresh local sandbox (private /tmp and home, read-only system "
        "directories, no secrets in the environment, no network unless the operator enabled it). "
        "Returns exit code, stdout and stderr (each capped)."
    ),
    args=ContainerExecArgs,
    run=container_exec,
)
