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
- A stopped command is ended on the server before the call returns: when the context's cancel
  signal fires, at the timeout and past the artifact bound, the command is sent TERM, then KILL
  (:func:`zerg.tools.ssh_channel.end_command`: the SSH ``signal`` request, or a second session's
  ``kill`` of its process group where the server refuses that request, as OpenSSH does for root),
  and the call waits for the server to report the session ended before closing the channel. A
  server that did not confirm it is said so in the output.
- A command killed by a signal reports its name (``exit_signal: TERM``) and no exit code.
"""

from __future__ import annotations

import base64
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from zerg.loop.tool import CriticalToolError, Tool, ToolContext, ToolOutcome, error
from zerg.tools.output import ShellOutput

if TYPE_CHECKING:
    from zerg.hosts.registry import Target

CONNECT_TIMEOUT_S = 5.0


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

    from zerg.tools.ssh_channel import Transport

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
            allow_agent=False, look_for_keys=False, transport_factory=Transport,
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
    from zerg.tools.ssh_channel import end_command, exit_signal

    timeout = ctx.bounded(args.timeout_s)
    start = time.monotonic()
    channel = client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
    channel.exec_command(args.command)
    with ShellOutput(ctx, "ssh_exec", f"[{args.host}] $ {args.command}") as output:
        stopped, full = _follow(channel, output, ctx, start + timeout)
        note = ""
        if stopped or full:
            ended = end_command(channel)
            full = full or _drain_rest(channel, output)  # what it wrote before it was killed
            note = _stop_note(stopped, ended, ctx, timeout)
        killed_by = exit_signal(channel)
        code = None if killed_by or channel.exit_status == -1 else channel.exit_status  # -1: paramiko's "none"
        channel.close()
        ms = int((time.monotonic() - start) * 1000)
        return output.finish(code, ms, note, exit_signal=killed_by)


def _follow(channel, output: ShellOutput, ctx: ToolContext, deadline: float) -> tuple[str, bool]:
    """Stream the command's output until it ends or must be stopped: (why it must stop --
    "cancelled", "timeout" or "" --, the artifact bound was reached)."""
    while True:
        busy, full = _drain(channel, output)
        if full:
            return "", True
        if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            return "", False
        if ctx.cancelled():
            return "cancelled", False
        if time.monotonic() > deadline:
            return "timeout", False
        if not busy:
            time.sleep(0.005)


def _drain_rest(channel, output: ShellOutput) -> bool:
    """Hand over what is already buffered; True when the artifact bound was reached."""
    while True:
        busy, full = _drain(channel, output)
        if full or not busy:
            return full


def _stop_note(stopped: str, ended: bool, ctx: ToolContext, timeout: float) -> str:
    """What the model is told about a command the call stopped ("" stopped: at the artifact bound,
    whose own note says so)."""
    why = {"cancelled": f"killed: {ctx.cancel.reason if ctx.cancel else 'cancelled'}",
           "timeout": f"killed after {timeout:.1f}s timeout"}.get(stopped)
    if ended:
        return f"{why}; the server ended the remote command" if why else ""
    unconfirmed = ("asked the server to end the remote command and closed the channel, but it did not confirm "
                   "the command ended (it may still be running)")
    return f"{why}; {unconfirmed}" if why else unconfirmed


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


TEST_COMMAND = "true"
TEST_TIMEOUT_S = 10.0


def check_connection(runtime, owner_id: int, host: dict) -> dict:
    """The owner's "test connection" of one of their hosts (``host``: its registry view): a
    harmless ``true`` through ``ssh_exec`` itself (the same allowlist, key and host-key rules), and
    what happened as one sentence. When the host key was refused, the key the server presents is
    read (a handshake, no login) so the owner can compare it with the pin."""
    import json

    from zerg.loop.tool import invoke

    started = time.monotonic()
    ctx = ToolContext(settings=runtime.settings, owner_id=owner_id, runtime=runtime,
                      deadline=started + CONNECT_TIMEOUT_S + TEST_TIMEOUT_S)
    out = invoke({TOOL.name: TOOL}, TOOL.name,
                 json.dumps({"host": host["alias"], "command": TEST_COMMAND, "timeout_s": TEST_TIMEOUT_S}), ctx)
    ms = int((time.monotonic() - started) * 1000)
    where = f"{host['user']}@{host['hostname']}:{host['port']}"
    pinned, presented = host.get("host_key_fingerprint"), None
    ok = out.ok and out.exit_code == 0
    reason = out.critical or out.text.removeprefix("ERROR: ")
    if ok and pinned:
        message = (f"Connected to {where} in {ms} ms: the server proved it holds the pinned host key {pinned}, "
                   f"the key was accepted and `{TEST_COMMAND}` exited 0.")
    elif ok:  # a bootstrap host trusted through known_hosts: show what it presents
        presented = _presented(host)
        message = (f"Connected to {where} in {ms} ms: known_hosts trusts its host key"
                   f"{f' {presented}' if presented else ''}, the key was accepted and `{TEST_COMMAND}` exited 0.")
    elif out.exit_code is not None or out.exit_signal:
        message = (f"Connected to {where}, but `{TEST_COMMAND}` did not succeed "
                   f"({f'exit code {out.exit_code}' if out.exit_code is not None else f'signal {out.exit_signal}'}).")
    else:
        message = f"Could not run `{TEST_COMMAND}` on {host['alias']}: {reason}."
        if "host key" in reason or "known_hosts" in reason:
            presented = _presented(host)
            if presented:
                message += (f" The server presents {presented}; the pinned key is {pinned or 'none'}. If its key "
                            "really changed, replace the host with the new key.")
    return {"alias": host["alias"], "ok": ok, "message": message, "host_key_fingerprint": pinned or presented,
            "presented_host_key_fingerprint": presented, "exit_code": out.exit_code, "duration_ms": ms}


def _presented(host: dict) -> str | None:
    """The fingerprint of the host key the server presents now (a handshake, no login), or None."""
    from zerg.hosts.spec import HostInputError, scan_host_key

    try:
        return scan_host_key(host["hostname"], host["port"], timeout=CONNECT_TIMEOUT_S).fingerprint
    except HostInputError:
        return None


TOOL = Tool(
    name="ssh_exec",
    description=(
        "Run a shell command on one of the user's servers over SSH. `host` is a server alias "
        "from the allowlist. Returns exit code (or the signal that killed the command), stdout and "
        "stderr (each capped)."
    ),
    args=SSHExecArgs,
    run=ssh_exec,
)
