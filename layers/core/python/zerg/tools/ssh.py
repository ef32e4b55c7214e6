"""``ssh_exec``: run a command on one of the owner's allowlisted servers.

Invariants:
- Only aliases in ``ZERG_SSH_HOSTS`` are reachable; anything else is refused before any
  connection is attempted.
- Host keys are verified (the host's pinned ``host_key`` or the known_hosts file); an unknown
  key is refused, never trusted on first use.
- Connection or authentication failure is *critical*: the worker fails fast with the reason.
  A command that exits non-zero or times out is an ordinary result for the model to read.
"""

from __future__ import annotations

import base64
import io
import os
import socket
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from zerg.config import SSHHost
from zerg.tools.base import (
    ARTIFACT_OUTPUT_CAP,
    CriticalToolError,
    Tool,
    ToolContext,
    ToolOutcome,
    error,
    shell_report,
)

CONNECT_TIMEOUT_S = 5.0


class SSHExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str = Field(min_length=1, max_length=100, description="Alias of an allowlisted server")
    command: str = Field(min_length=1, max_length=20_000, description="Shell command to run there")
    timeout_s: float = Field(default=30, gt=0, le=600, description="Seconds before giving up")


def _load_key(alias: str, host: SSHHost):
    import paramiko

    if host.key_file:
        text = Path(host.key_file).expanduser().read_text()
    elif host.key_env:
        text = os.environ.get(host.key_env, "")
        if not text:
            raise CriticalToolError(f"ssh key for {alias}: environment variable {host.key_env} is empty")
    elif host.key_secret_arn:
        import boto3

        text = boto3.client("secretsmanager").get_secret_value(SecretId=host.key_secret_arn)["SecretString"]
    else:
        raise CriticalToolError(f"ssh host {alias} has no key_file, key_env or key_secret_arn")
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise CriticalToolError(f"ssh key for {alias} is not a readable Ed25519, ECDSA or RSA private key")


def _client(alias: str, host: SSHHost, ctx: ToolContext):
    import paramiko

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    if host.host_key:
        name = host.hostname if host.port == 22 else f"[{host.hostname}]:{host.port}"
        try:
            keytype, b64 = host.host_key.split()[:2]
            key = paramiko.PKey.from_type_string(keytype, base64.b64decode(b64))
            client.get_host_keys().add(name, keytype, key)
        except Exception as exc:
            raise CriticalToolError(f"host_key for {alias} is not a valid public key line: {exc}") from None
    known = ctx.settings.ssh_known_hosts or Path("~/.ssh/known_hosts").expanduser()
    if known.is_file():
        client.load_host_keys(str(known))
    return client


def ssh_exec(args: SSHExecArgs, ctx: ToolContext) -> ToolOutcome:
    import paramiko

    hosts = ctx.settings.ssh_hosts
    host = hosts.get(args.host)
    if host is None:
        allowed = ", ".join(sorted(hosts)) or "none configured"
        return error(f"host {args.host!r} is not in the SSH allowlist (allowed: {allowed}); not connecting")
    pkey = _load_key(args.host, host)
    client = _client(args.host, host, ctx)
    target = f"{host.user}@{host.hostname}:{host.port}"
    connect_timeout = min(CONNECT_TIMEOUT_S, max(0.5, ctx.bounded(CONNECT_TIMEOUT_S)))
    try:
        client.connect(
            host.hostname, port=host.port, username=host.user, pkey=pkey,
            timeout=connect_timeout, banner_timeout=connect_timeout, auth_timeout=connect_timeout,
            allow_agent=False, look_for_keys=False,
        )
    except paramiko.BadHostKeyException:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({target}): host key does not match the pinned key") from None
    except paramiko.AuthenticationException as exc:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({target}): authentication failed ({exc})") from None
    except paramiko.SSHException as exc:  # includes an unknown host key (RejectPolicy)
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({target}) failed: {exc}") from None
    except (OSError, socket.timeout) as exc:
        client.close()
        raise CriticalToolError(f"ssh to {args.host} ({target}): cannot connect ({exc})") from None
    try:
        return _run(client, args, ctx)
    finally:
        client.close()


def _run(client, args: SSHExecArgs, ctx: ToolContext) -> ToolOutcome:
    timeout = ctx.bounded(args.timeout_s)
    start = time.monotonic()
    channel = client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
    channel.exec_command(args.command)
    out, err = bytearray(), bytearray()
    timed_out = False
    while True:
        busy = False
        if channel.recv_ready():
            chunk = channel.recv(65536)
            if len(out) < ARTIFACT_OUTPUT_CAP:
                out += chunk
            busy = True
        if channel.recv_stderr_ready():
            chunk = channel.recv_stderr(65536)
            if len(err) < ARTIFACT_OUTPUT_CAP:
                err += chunk
            busy = True
        if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        if time.monotonic() - start > timeout:
            timed_out = True
            break
        if not busy:
            time.sleep(0.005)
    code = None if timed_out else channel.recv_exit_status()
    channel.close()
    ms = int((time.monotonic() - start) * 1000)
    note = f"gave up after {timeout:.1f}s timeout (the remote command may still be running)" if timed_out else ""
    text, artifact = shell_report(
        f"[{args.host}] $ {args.command}", code, out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"), ms, note, ctx.settings.tool_output_cap,
    )
    return ToolOutcome(text=text, artifact=artifact, ok=code == 0, exit_code=code)


TOOL = Tool(
    name="ssh_exec",
    description=(
        "Run a shell command on one of the user's servers over SSH. `host` is a server alias "
        "from the allowlist. Returns exit code, stdout and stderr (each capped)."
    ),
    args=SSHExecArgs,
    run=ssh_exec,
)
