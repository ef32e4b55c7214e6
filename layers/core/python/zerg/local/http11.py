"""The HTTP/1.1 connection under ``zerg serve``: uvicorn's h11 protocol, answering in our words
where uvicorn would answer in its own.

Invariants:
- A request h11 cannot parse (bad framing, a bad or repeated Content-Length, an unknown
  Transfer-Encoding, a head over the size limit) gets ``{"error", "message"}`` JSON with h11's
  status (400, 431, 501) and reason, and the connection is closed: no byte after the bad ones is
  read as a request. (uvicorn's own answer is a text/plain 400 that drops the reason.)
- A request head must be complete within ``HEAD_TIMEOUT_S`` of the connection opening or of the
  previous response, however the bytes trickle in: a client that connects and says nothing, or
  drips a head a byte at a time, holds a connection that long and no longer. An idle connection
  is closed without a word; a partial head gets 408. (The body has its own deadline in the app,
  ``server.BODY_TIMEOUT_S``; uvicorn's keep-alive timer restarts on every byte, so it bounds
  neither.)
"""

from __future__ import annotations

import asyncio
import socket
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from zerg.api.errors import error_body

HEAD_TIMEOUT_S = 10.0
DEFAULT_HEAD_BYTES = 16 * 1024
_CODES = {400: "bad_request", 431: "headers_too_large", 501: "not_implemented"}


class _Connection(h11.Connection):
    """h11's connection, remembering the protocol error it raised (uvicorn's handler drops it)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


def _no_delay(transport: asyncio.Transport) -> None:
    """TCP_NODELAY on the accepted socket. asyncio sets it only when the listening socket was made
    with ``proto=IPPROTO_TCP``; without it uvicorn's two writes (head, then body) meet Nagle and
    the client's delayed ACK: every keep-alive response after the first took ~40 ms more."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # closed already: nothing to speed up
            pass


class ZergH11Protocol(H11Protocol):
    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.conn = _Connection(h11.SERVER, config.h11_max_incomplete_event_size or DEFAULT_HEAD_BYTES)
        self._head_timer: asyncio.TimerHandle | None = None

    # --- uvicorn's hooks -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._arm_head_timer()  # before uvicorn starts on a pipelined request, which is then in progress
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        error = self.conn.last_error
        status = error.error_status_hint if error is not None and error.error_status_hint in _CODES else 400
        if status == 431:
            message = f"request line and headers over {self.config.h11_max_incomplete_event_size or DEFAULT_HEAD_BYTES} bytes"
        else:
            message = f"malformed HTTP request: {error or msg}"
        self._answer(status, _CODES[status], message)

    # --- ours ----------------------------------------------------------------------------
    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request is being answered; its response re-arms the timer
        partial, _ = self.conn.trailing_data
        if partial:
            self._answer(408, "request_timeout", f"the request head did not arrive within {HEAD_TIMEOUT_S:g} s")
            return
        try:
            self.conn.send(h11.ConnectionClosed())
        except h11.LocalProtocolError:
            pass
        self.transport.close()

    def _answer(self, status: int, error: str, message: str) -> None:
        """One JSON error response, then the connection closes."""
        body = error_body(error, message).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        try:
            out = self.conn.send(h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase))
            out += self.conn.send(h11.Data(data=body))
            out += self.conn.send(h11.EndOfMessage())
            self.transport.write(out)
        except h11.LocalProtocolError:  # a response is already under way: nothing more can be said
            pass
        self.transport.close()
