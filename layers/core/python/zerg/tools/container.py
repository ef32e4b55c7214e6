"""``container_exec``: a local sandboxed shell.

Each call runs ``/bin/sh -c`` in a fresh temporary working directory with a scrubbed
environment (no secrets, no cloud credentials), in its own process group; on timeout the whole
group is killed. Output goes to files (bounded memory) and is capped for the model.

The command must not reach the secrets of the process that runs it:
- the parent makes itself non-dumpable before the first command, so ``/proc/<parent>/environ``
  (API keys, AWS credentials on Lambda) is readable by root only;
- when the parent runs as root (a local install), the command runs as ``nobody``, so it cannot
  read the 0700 data directory (the JWT secret, the embedded database, every owner's artifacts).
A non-root local install runs commands as its own user: they can read that user's files. For
stronger isolation run workers on Lambda, or in a container/VM.
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


_hardened = False


def _harden_parent() -> None:
    """PR_SET_DUMPABLE=0: our /proc entries become root-owned, unreadable to same-uid children."""
    global _hardened
    if _hardened:
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass
    _hardened = True


def _sandbox_user() -> tuple[int, int] | None:
    """(uid, gid) of ``nobody`` when we are root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def run_local(command: str, timeout_s: float) -> tuple[int | None, str, str, bool, int]:
    """(exit code or None, stdout, stderr, timed out, duration ms)."""
    _harden_parent()
    user = _sandbox_user()
    with tempfile.TemporaryDirectory(prefix="zerg-sandbox-") as work, \
            tempfile.TemporaryDirectory(prefix="zerg-capture-") as capture:
        if user:
            os.chown(work, *user)
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
                user=user[0] if user else None,  # set in the forked child, no preexec_fn
                group=user[1] if user else None,
                extra_groups=[] if user else None,
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
