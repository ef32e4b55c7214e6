"""``ssh_exec``: run a command on one of the calling owner's SSH hosts.

Invariants:
- An alias resolves only among the calling owner's hosts (``zerg.hosts.registry.resolve``: the
  owner's ``ssh_hosts`` rows, plus ``ZERG_SSH_HOSTS`` for the local owner). Anything else, another
  owner's alias included, is refused as "not in the SSH allowlist" before any connection is
  attempted, and the refusal lists only the caller's own aliases. A call without an owner is refused.
- Host keys are verified: an owner's host against its pinned key only; a bootstrap host against
  its ``host_key`` or the known_hosts file. An unknown or different key is refused, never trusted
  on first use.
- The private key is opened (unsealed for the owner) only here, in the worker, and never appears
  in the tool's output, its errors or the artifacts.
- Connection or authentication failure is *critical*: the worker fails fast with the reason.
  A command that exits non-zero or times out is an ordinary result for the model to read.
- Output is streamed to the worker's artifact as it arrives (:mod:`zerg.tools.output`); past the
  artifact bound the channel is closed and the model told so.
- Cancel ends the remote command: when the context's cancel signal fires, the server is asked to
  SIGKILL it (the RFC 4254 ``signal`` request; OpenSSH's sshd kills the command's process group)
  and the call waits for the server to report the session ended before closing the channel. A
  server that ignores the request (forced commands, some servers) is said so in the output.
"""

from __future__ import annotations

import base64
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from zerg.tools.base import CriticalToolError, Tool, ToolContext, ToolOutcome, error
from zerg.tools.output import ShellOutput

if TYPE_CHECKING:
    from zerg.hosts.registry import Target

CONNECT_TIMEOUT_S = 5.0
KILL_GRACE_S = 3.0  # how long a cancelled call waits for the server to confirm the command ended


class SSHExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str = Field(min_length=1, max_length=100, description="Alias of an allowlisted server")
    command: str = Field(min_length=1, max_length=20_000, description="Shell command to run there")
    timeout_s: float = Field(default=30, gt=0, le=600, description="Seconds before giving up")


def _resolve(ctx: ToolContext, alias: str) -> "Target | ToolOutcome":
    from zerg.hosts.registry import resolve

    if ctx.owner_id is None or ctx.runtime is None:
        return error("ssh_exec runs only for an owner (this call has none); not connecting")
    with ctx.runtime.pool.connection() as conn:
        found = resolve(conn, ctx.settings, ctx.owner_id, alias)
    if isinstance(found, list):
        allowed = ", ".join(found) or "none configured"
        return error(f"host {alias!r} is not in the SSH allowlist (allowed: {allowed}); not connecting")
    return found


def _load_key(target: "Target", ctx: ToolContext):
    from zerg.hosts.registry import KeyUnavailable
    from zerg.sealing import SealError

    try:  # the sealer itself may be unavailable (Lambda without ZERG_KMS_KEY_ID): as critical as a bad key
        return target.load_key(ctx.runtime.sealer if target.source == "owner" else None)
    except (KeyUnavailable, SealError) as exc:
        raise CriticalToolError(f"ssh key for {target.alias}: {exc}" if isinstance(exc, SealError) else str(exc)) from None


def _client(target: "Target", ctx: ToolContext):
    import paramiko

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    if target.host_key:
        name = target.hostname if target.port == 22 else f"[{target.hostname}]:{target.port}"
        try:
            keytype, b64 = target.host_key.split()[:2]
            key = paramiko.PKey.from_type_string(keytype, base64.b64decode(b64))
            client.get_host_keys().add(name, keytype, key)
        except Exception as exc:
            raise CriticalToolError(f"host_key for {target.alias} is not a valid public key line: {exc}") from None
    if target.source != "owner":  # an owner's host trusts its pin only, never the deployment's file
        known = ctx.settings.ssh_known_hosts or Path("~/.ssh/known_hosts").expanduser()
        if known.is_file():
            client.load_host_keys(str(known))
    return client


def ssh_exec(args: SSHExecArgs, ctx: ToolContext) -> ToolOutcome:
    import paramiko

    if ctx.cancelled():
        return error(f"not run: {ctx.cancel.reason}")
    target = _resolve(ctx, args.host)
    if isinstance(target, ToolOutcome):
        return target
    pkey = _load_key(target, ctx)
    client = _client(target, ctx)
    where = f"{target.user}@{target.hostname}:{target.port}"
    connect_timeout = min(CONNECT_TIMEOUT_S, max(0.5, ctx.bounded(CONNECT_TIMEOUT_S)))
    try:
        client.connect(
            target.hostname, port=target.port, username=target.user, pkey=pkey,
            timeout=connect_timeout, banner_timeout=connect_timeout, auth_timeout=connect_timeout,
            allow_agent=False, look_for_keys=False,
        )
    except paramiko.BadHostKeyException:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({where}): host key does not match the pinned key") from None
    except paramiko.AuthenticationException as exc:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({where}): authentication failed ({exc})") from None
    except paramiko.SSHException as exc:  # includes an unknown host key (RejectPolicy)
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({where}) failed: {exc}") from None
    except (OSError, socket.timeout) as exc:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({where}): cannot connect ({exc})") from None
    try:
        return _run(client, args, ctx)
    finally:
        client.close()


def _run(client, args: SSHExecArgs, ctx: ToolContext) -> ToolOutcome:
    timeout = ctx.bounded(args.timeout_s)
    start = time.monotonic()
    channel = client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
    channel.exec_command(args.command)
    with ShellOutput(ctx, "ssh_exec", f"[{args.host}] $ {args.command}") as output:
        timed_out = full = cancelled = False
        while not full:
            busy, full = _drain(channel, output)
            if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                break
            if ctx.cancelled():
                cancelled = True
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                break
            if not busy:
                time.sleep(0.005)
        note = f"gave up after {timeout:.1f}s timeout (the remote command may still be running)" if timed_out else ""
        if cancelled:
            ended = _kill_remote(channel)
            while not full:  # what it wrote before it was killed
                busy, full = _drain(channel, output)
                if not busy:
                    break
            note = (f"killed: {ctx.cancel.reason}; the server ended the remote command" if ended else
                    f"stopped: {ctx.cancel.reason}; asked the server to kill the remote command and closed the "
                    "channel, but it did not confirm the command ended (it may still be running)")
        code = None if timed_out or full or cancelled else channel.recv_exit_status()
        channel.close()
        ms = int((time.monotonic() - start) * 1000)
        return output.finish(code, ms, note)


def _drain(channel, output: ShellOutput) -> tuple[bool, bool]:
    """Hand what the channel has to ``output``: (anything came, the artifact bound was reached)."""
    busy = full = False
    if channel.recv_ready():
        full = not output.stdout(channel.recv(65536))
        busy = True
    if channel.recv_stderr_ready():
        full = not output.stderr(channel.recv_stderr(65536)) or full
        busy = True
    return busy, full


def _kill_remote(channel) -> bool:
    """Ask the server to SIGKILL the channel's command, then wait for it to report the session
    ended (exit status, exit signal or close). True when it did within ``KILL_GRACE_S``."""
    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message

    request = Message()
    request.add_byte(cMSG_CHANNEL_REQUEST)
    request.add_int(channel.remote_chanid)
    request.add_string("signal")
    # No reply asked: paramiko closes a channel whose request failed, which would read as "ended".
    request.add_boolean(False)
    request.add_string("KILL")
    try:  # paramiko has no public call for the signal request (its exec_command sends the same way)
        channel.transport._send_user_message(request)
    except Exception:  # the connection is gone: so is the session, as far as we can tell
        return channel.exit_status_ready()
    return channel.status_event.wait(KILL_GRACE_S)


TOOL = Tool(
    name="ssh_exec",
    description=(
        "Run a shell command on one of the user's servers over SSH. `host` is a server alias "
        "from the allowlist. Returns exit code, stdout and stderr (each capped)."
    ),
    args=SSHExecArgs,
    run=ssh_exec,
)
