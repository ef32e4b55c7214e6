"""``container_exec``: a local sandboxed shell.

Each call runs ``/bin/sh -c`` in a fresh temporary working directory with a scrubbed
environment (no secrets, no cloud credentials), in its own process group; on timeout the whole
group is killed. Output goes to files (bounded memory) and is capped for the model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from zerg.tools.base import ARTIFACT_OUTPUT_CAP, Tool, ToolContext, ToolOutcome, shell_report

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ContainerExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, max_length=20_000, description="Shell command to run")
    timeout_s: float = Field(default=30, gt=0, le=600, description="Seconds before the command is killed")


# Limits are set by the shell itself (no preexec_fn: unsafe in a threaded process): no file,
# the capture files included, may outgrow the artifact bound; no core dumps.
_WRAPPER = f'ulimit -f {ARTIFACT_OUTPUT_CAP // 512} -c 0 2>/dev/null; exec /bin/sh -c "$1"'


def _read(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(ARTIFACT_OUTPUT_CAP).decode("utf-8", "replace")


def run_local(command: str, timeout_s: float) -> tuple[int | None, str, str, bool, int]:
    """(exit code or None, stdout, stderr, timed out, duration ms)."""
    with tempfile.TemporaryDirectory(prefix="zerg-sandbox-") as work, \
            tempfile.TemporaryDirectory(prefix="zerg-capture-") as capture:
        out_path, err_path = Path(capture) / "stdout", Path(capture) / "stderr"
        env = {"PATH": SAFE_PATH, "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8", "TERM": "dumb"}
        start = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", _WRAPPER, "sh", command],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: a timeout kills everything
            )
            timed_out = False
            try:
                proc.wait(timeout=max(0.01, timeout_s))
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:  # also reaps background children left behind by a finished command
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        duration_ms = int((time.monotonic() - start) * 1000)
        code = None if timed_out else proc.returncode
        return code, _read(out_path), _read(err_path), timed_out, duration_ms


def container_exec(args: ContainerExecArgs, ctx: ToolContext) -> ToolOutcome:
    timeout = ctx.bounded(args.timeout_s)
    code, out, err, timed_out, ms = run_local(args.command, timeout)
    note = f"killed after {timeout:.1f}s timeout" if timed_out else ""
    text, artifact = shell_report(f"$ {args.command}", code, out, err, ms, note, ctx.settings.tool_output_cap)
    return ToolOutcome(text=text, artifact=artifact, ok=code == 0, exit_code=code)


TOOL = Tool(
    name="container_exec",
    description=(
        "Run a shell command in a local sandbox (fresh temporary directory, no secrets in the "
        "environment). Returns exit code, stdout and stderr (each capped)."
    ),
    args=ContainerExecArgs,
    run=container_exec,
)
