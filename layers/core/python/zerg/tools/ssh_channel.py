"""What ``ssh_exec`` needs of an SSH session beyond paramiko's public API: how its command died,
and a way to end it.

Invariants:
- A command killed by a signal is reported by the signal's name ("TERM", "KILL"), from the RFC 4254
  ``exit-signal`` request. paramiko drops that request (it logs it as unhandled and leaves
  ``exit_status`` at -1), so :class:`Transport` reads it first and records the name before it wakes
  the channel's ``status_event`` waiters: whoever sees the session ended sees its signal too.
- :func:`end_command` returns True only once the server reported the command's session ended
  (exit status, exit signal or channel closed). It sends TERM, then KILL to whatever outlives
  :data:`TERM_GRACE_S`, and gives up (False) :data:`KILL_GRACE_S` after the KILL.
- Two ways to deliver a signal. First the RFC 4254 ``signal`` request, a reply asked: OpenSSH
  (7.9+) answers it with ``killpg()`` of the command's session. Where the server refuses it or does
  not answer -- OpenSSH 9.2 refuses it for a root login ("session signalling requires privilege
  separation": root's session runs without the privilege-separated child), Dropbear always -- a
  second session on the same connection signals the command's process group with ``kill``: sshd
  forks every session of a connection from one process, each in a session (and process group)
  of its own, so the command's group is the second session's sibling under ``$PPID``.
  A key with a forced command runs that command in the second session instead (it cannot end
  anything, and the call says the command may still run); ``ssh_exec`` is for shell access.
"""

from __future__ import annotations

import queue
from typing import Any

import paramiko
from paramiko.channel import Channel
from paramiko.common import MSG_CHANNEL_FAILURE, MSG_CHANNEL_REQUEST, MSG_CHANNEL_SUCCESS, cMSG_CHANNEL_REQUEST
from paramiko.message import Message

TERM_GRACE_S = 2.0  # how long a TERMed command has to end before it gets KILL
KILL_GRACE_S = 3.0  # how long the server has to report a KILLed command ended
REPLY_S = 2.0  # how long to wait for the server's answer to a signal request
# The second session's command: signal the process group of every sibling session but its own.
GROUP_KILL = ('for p in $(pgrep -P "$PPID" 2>/dev/null || ps -o pid= --ppid "$PPID"); '
              'do [ "$p" = "$$" ] || kill -s {name} -- "-$p" 2>/dev/null; done; exit 0')


def _on_request(channel: Channel, m: Message) -> None:
    """``exit-signal`` recorded (then the waiters woken); every other request to paramiko."""
    start = m.packet.tell()
    if m.get_text() != "exit-signal":
        m.packet.seek(start)
        return Channel._handle_request(channel, m)
    m.get_boolean()  # want_reply: always false for exit-signal (RFC 4254 6.10)
    channel.transport.exit_signals[channel.chanid] = m.get_text()
    channel.status_event.set()
    return None


def _on_reply(ok: bool, default: Any):
    def handle(channel: Channel, m: Message) -> None:
        """The answer to our signal request goes to its waiter; any other to paramiko (whose
        handler would close the channel on a failure)."""
        waiter = channel.transport.signal_replies.pop(channel.chanid, None)
        if waiter is None:
            return default(channel, m)
        waiter.put(ok)
        return None

    return handle


class Transport(paramiko.Transport):
    """paramiko's client transport (``SSHClient.connect(transport_factory=Transport)``) that also
    keeps each channel's exit signal and routes the replies to our signal requests."""

    _channel_handler_table = {
        **paramiko.Transport._channel_handler_table,
        MSG_CHANNEL_REQUEST: _on_request,
        MSG_CHANNEL_SUCCESS: _on_reply(True, Channel._request_success),
        MSG_CHANNEL_FAILURE: _on_reply(False, Channel._request_failed),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_signals: dict[int, str] = {}  # channel id -> the signal that killed its command
        self.signal_replies: dict[int, queue.SimpleQueue[bool]] = {}  # channel id -> its waiter


def exit_signal(channel: Channel) -> str | None:
    """The name of the signal that killed the channel's command ("TERM"), or None."""
    return getattr(channel.transport, "exit_signals", {}).get(channel.chanid)


def end_command(channel: Channel) -> bool:
    """TERM the channel's command, KILL it if it outlives :data:`TERM_GRACE_S`; True once the
    server reported its session ended."""
    if channel.status_event.is_set():
        return True
    by_request = _signal_request(channel, "TERM")
    if not by_request:
        _signal_group(channel, "TERM")
    if channel.status_event.wait(TERM_GRACE_S):
        return True
    if not (by_request and _signal_request(channel, "KILL")):
        _signal_group(channel, "KILL")
    return channel.status_event.wait(KILL_GRACE_S)


def _signal_request(channel: Channel, name: str) -> bool:
    """Send the RFC 4254 ``signal`` request; True when the server accepted it.

    paramiko has no call for it: the message is built like its ``exec_command``'s and sent the
    same way (outside the channel's lock, as paramiko does: holding it while sending can deadlock
    during a re-key)."""
    transport = channel.transport
    waiter: queue.SimpleQueue[bool] = queue.SimpleQueue()
    request = Message()
    request.add_byte(cMSG_CHANNEL_REQUEST)
    request.add_int(channel.remote_chanid)
    request.add_string("signal")
    request.add_boolean(True)
    request.add_string(name)
    with channel.lock:
        if channel.closed or not hasattr(transport, "signal_replies"):
            return False
        transport.signal_replies[channel.chanid] = waiter
    try:
        transport._send_user_message(request)
        return waiter.get(timeout=REPLY_S)
    except Exception:  # no answer, or the connection is gone
        return False
    finally:
        transport.signal_replies.pop(channel.chanid, None)


def _signal_group(channel: Channel, name: str) -> None:
    """Signal the command's process group from a second session on the same connection."""
    try:
        helper = channel.transport.open_session(timeout=REPLY_S)
    except Exception:  # the server refuses another session, or the connection is gone
        return
    try:
        helper.settimeout(REPLY_S)
        helper.exec_command(GROUP_KILL.format(name=name))
        helper.status_event.wait(REPLY_S)
    except Exception:  # best effort: the caller waits for the command's own end either way
        pass
    finally:
        helper.close()
