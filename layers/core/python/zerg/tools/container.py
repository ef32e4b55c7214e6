"""``container_exec``: a shell command in a sandbox of its own (see :mod:`zerg.sandbox`).

Each call gets a fresh sandbox: with bubblewrap or util-linux ``unshare``, its own user, PID,
mount, IPC, UTS and network namespaces over a read-only view of the host's system directories,
with a private /tmp and home; on a host without either (and on Lambda), today's best effort: a
scrubbed environment, a per-call uid when we are root, a process group and a targeted sweep.
Whatever the mechanism, the call returns only once every process it started is gone, also when
the run is cancelled mid-command (the context's cancel signal kills the sandbox). Its files, memory,
CPU time and (namespace levels) writable space are capped (``ZERG_SANDBOX_*``); what a cap stopped
is one ``limit: ...`` line of the result. Output is
streamed to the worker's artifact as it arrives (:mod:`zerg.tools.output`: bounded memory) and
capped for the model; a command printing more than the artifact bound is stopped there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, error
from zerg.tools.output import ShellOutput


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
    with ShellOutput(ctx, "container_exec", f"$ {args.command}") as output:
        try:
            result = execute(args.command, timeout, ctx.settings, output_cap=ARTIFACT_OUTPUT_CAP, sink=output,
                             cancel=ctx.cancel)
        except SandboxError as exc:
            return error(f"container_exec could not prepare a sandbox: {exc}")
        if result.cancelled:
            note = f"killed: {ctx.cancel.reason}; the sandbox and everything in it are gone"
        else:
            note = f"killed after {timeout:.1f}s timeout" if result.timed_out else ""
        return output.finish(result.exit_code, result.duration_ms, note, limit=result.limit_line())


TOOL = Tool(
    name="container_exec",
    description=(
        "Run a shell command in a fresh local sandbox (private /tmp and home, read-only system "
        "directories, no secrets in the environment, no network unless the operator enabled it; "
        "file size, memory, CPU time and writable space are capped). "
        "Returns exit code, stdout and stderr (each capped), and a 'limit:' line when a cap stopped something."
    ),
    args=ContainerExecArgs,
    run=container_exec,
)
