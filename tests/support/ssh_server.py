"""A real SSH server on loopback for ssh_exec tests, of two kinds; either way the client side is
the production ``ssh_exec``.

- ``openssh``: OpenSSH's ``sshd`` (Debian's openssh-server, 9.2 on bookworm), started by the test
  as root with temporary host and client keys, no PAM and its own pid file; we log in as root.
  Where it cannot run (no sshd, not root) a test asking for it fails under ``CI=true`` and skips
  elsewhere with what to install (``./dev.sh test`` installs it when run as root).
- ``paramiko``: a paramiko server in a child process whose exec handler runs the command as a
  real subprocess in a session of its own and, like sshd, answers the RFC 4254 ``signal`` request
  by killing that session's process group and reports a command killed by a signal with
  ``exit-signal``. It runs anywhere; unlike OpenSSH for root, it honours the ``signal`` request.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from tests.support.parts import need

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
KINDS = ("openssh", "paramiko")


def _keypair(path: Path) -> str:
    """Write an OpenSSH ed25519 private key to ``path``; return the public key line."""
    key = ed25519.Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    path.chmod(0o600)
    return key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"SSH test server did not listen on {port}")


@dataclass
class SSHServer:
    kind: str  # "openssh" | "paramiko"
    port: int
    user: str
    client_key: Path
    host_key: str  # public key line, for pinning
    _stop: object

    def host_config(self, **overrides) -> dict:
        cfg = {"hostname": "127.0.0.1", "port": self.port, "user": self.user,
               "key_file": str(self.client_key), "host_key": self.host_key}
        return cfg | overrides

    def stop(self) -> None:
        self._stop()


def missing_openssh() -> str | None:
    """Why OpenSSH's sshd cannot serve the tests here (what to do), or None."""
    if SSHD is None:
        return ("no OpenSSH server (sshd): sudo apt-get install openssh-server "
                "(./dev.sh test installs it when run as root)")
    if os.geteuid() != 0:
        return f"the tests start {SSHD} themselves and log in as root: run them as root"
    return None


def require_openssh() -> None:
    """Fail (CI) or skip (elsewhere) the calling test or fixture when sshd cannot run here."""
    need(missing_openssh(), "SSH tests against OpenSSH")


def start_ssh_server(workdir: Path, kind: str = "openssh") -> SSHServer:
    """A server of ``kind`` (:data:`KINDS`) on loopback; ``openssh`` first :func:`require_openssh`."""
    if kind not in KINDS:
        raise ValueError(f"unknown SSH server kind {kind!r}")
    if kind == "openssh":
        require_openssh()
    workdir.mkdir(parents=True, exist_ok=True)
    client_key = workdir / "client_ed25519"
    client_pub = _keypair(client_key)
    host_key_path = workdir / "host_ed25519"
    host_pub = _keypair(host_key_path)
    if kind == "openssh":
        return _openssh(workdir, client_key, client_pub, host_key_path, host_pub)
    return _paramiko(client_key, client_pub, host_key_path, host_pub)


def _openssh(workdir: Path, client_key: Path, client_pub: str, host_key_path: Path, host_pub: str) -> SSHServer:
    port = _free_port()
    (workdir / "authorized_keys").write_text(client_pub + "\n")
    config = workdir / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key_path}",
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}", f"PidFile {workdir / 'sshd.pid'}",
        "UsePAM no", "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes", "PermitRootLogin prohibit-password", "LogLevel ERROR", "",
    ]))
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    _wait_port(port)

    def stop() -> None:
        proc.terminate()
        proc.wait(timeout=5)

    return SSHServer("openssh", port, getpass.getuser(), client_key, host_pub, stop)


def _paramiko(client_key: Path, client_pub: str, host_key_path: Path, host_pub: str) -> SSHServer:
    """The in-process-style server, run in a child process so its crypto never competes with the
    client under test for the GIL (a loaded 2-core machine could otherwise miss the 5 s timeouts)."""
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.ssh_server", str(host_key_path), client_pub.split()[1]],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )
    port = int(proc.stdout.readline())
    _wait_port(port)

    def stop() -> None:
        proc.kill()
        proc.wait(timeout=5)

    return SSHServer("paramiko", port, getpass.getuser(), client_key, host_pub, stop)


def serve_paramiko(host_key_path: str, authorized: str) -> None:
    """Child-process entry: an SSH server whose exec handler runs real subprocesses."""
    import signal

    import paramiko
    from paramiko.common import MSG_CHANNEL_REQUEST, cMSG_CHANNEL_FAILURE, cMSG_CHANNEL_REQUEST, cMSG_CHANNEL_SUCCESS

    host_key = paramiko.Ed25519Key.from_private_key_file(host_key_path)
    commands: dict[object, subprocess.Popen] = {}  # channel -> its running command
    handle_request = paramiko.Transport._channel_handler_table[MSG_CHANNEL_REQUEST]

    def handle_signal(channel, m) -> None:
        """sshd's ``session_signal_req``: killpg() the command's session (paramiko's server has no
        hook for this request type, so it is read here before paramiko's own handler)."""
        start = m.packet.tell()
        if m.get_text() != "signal":
            m.packet.seek(start)
            return handle_request(channel, m)
        want_reply, name = m.get_boolean(), m.get_text()
        proc, number = commands.get(channel), getattr(signal, f"SIG{name}", None)
        ok = proc is not None and isinstance(number, int)
        if ok:
            try:
                os.killpg(proc.pid, number)
            except ProcessLookupError:
                pass
        if want_reply:
            reply = paramiko.Message()
            reply.add_byte(cMSG_CHANNEL_SUCCESS if ok else cMSG_CHANNEL_FAILURE)
            reply.add_int(channel.remote_chanid)
            channel.transport._send_user_message(reply)

    paramiko.Transport._channel_handler_table[MSG_CHANNEL_REQUEST] = handle_signal  # the transport's dispatch

    class Server(paramiko.ServerInterface):
        def get_allowed_auths(self, username):
            return "publickey"

        def check_auth_publickey(self, username, key):
            return paramiko.AUTH_SUCCESSFUL if key.get_base64() == authorized else paramiko.AUTH_FAILED

        def check_channel_request(self, kind, chanid):
            return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

        def check_channel_exec_request(self, channel, command):
            threading.Thread(target=_exec, args=(channel, command.decode()), daemon=True).start()
            return True

    def _exec(channel, command: str) -> None:
        """Like sshd: the command in its own session (its own process group, which a ``signal``
        request kills), each stream forwarded as the command writes it, then the exit status.

        paramiko sends the exec request's success reply only after ``check_channel_exec_request``
        returns, on the transport thread; a command that ended and closed the channel before that
        made the client's ``exec_command`` fail with "Channel closed" on a loaded machine. sshd
        replies first, so this waits for the reply (a short grace) before running the command."""
        time.sleep(0.2)
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        commands[channel] = proc

        def forward(pipe, send) -> None:
            while chunk := os.read(pipe.fileno(), 65536):
                send(chunk)

        errors = threading.Thread(target=forward, args=(proc.stderr, channel.sendall_stderr), daemon=True)
        errors.start()
        try:
            try:
                forward(proc.stdout, channel.sendall)
                errors.join()
                code = proc.wait()
            finally:
                commands.pop(channel, None)
            _send_exit(channel, code)
        finally:
            channel.close()

    def _send_exit(channel, code: int) -> None:
        """sshd's ``session_exit_message``: the exit status, or for a command killed by a signal
        the RFC 4254 ``exit-signal`` request with the signal's name."""
        if code >= 0:
            return channel.send_exit_status(code)
        message = paramiko.Message()
        message.add_byte(cMSG_CHANNEL_REQUEST)
        message.add_int(channel.remote_chanid)
        message.add_string("exit-signal")
        message.add_boolean(False)
        message.add_string(signal.Signals(-code).name.removeprefix("SIG"))
        message.add_boolean(False)  # no core dumped
        message.add_string("")
        message.add_string("")
        channel.transport._send_user_message(message)

    def handshake(conn) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(host_key)
        try:
            transport.start_server(server=Server())
        except (paramiko.SSHException, EOFError):
            pass

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(sock.getsockname()[1], flush=True)
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=handshake, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    import sys

    serve_paramiko(sys.argv[1], sys.argv[2])
