"""The supervisor's answer as it is written: ``answer_delta`` run events (docs/api.md).

The model port hands a streamed call's text over piece by piece (:class:`~zerg.llm.port.TextStream`);
:class:`AnswerDeltas` batches the pieces into rows of ``run_events``, which the run's SSE stream (and
its replay after ``Last-Event-ID``) serves like any other event.

Invariants:
- Few rows: the first piece of a call is written at once (the page shows the first words as soon as
  the model has them); after that at most one row per :data:`FLUSH_S` while the model writes, or
  sooner once :data:`FLUSH_CHARS` characters wait. Whatever is left is written when the call ends.
- Each event says where its text goes: ``{"offset", "text"}``, ``offset`` counting the Unicode
  code points of the draft before it, so a client that saw an event already can tell and a gap
  shows. ``reset: true`` starts a new draft (the first event of each streamed call, and a retried
  call); an event ``{"offset": 0, "text": "", "reset": true}`` withdraws the draft (the model went
  on to call tools: its text was no answer; or the call failed).
- The draft is never the answer: the run's stored answer is the whole text, as before, and its
  ``supervisor_complete`` event carries it (with whatever Zerg adds: a question, the deadline line).
- A run that closed meanwhile (cancelled, failed) refuses the event (:func:`zerg.runs.events.emit`
  drops events after the terminal one): the stream then raises :class:`~zerg.llm.port.StreamStopped`,
  which ends the model call (the provider closes its HTTP stream) and the turn, with no answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zerg import observability
from zerg.llm import ChatResult
from zerg.llm.port import StreamStopped

FLUSH_S = 0.1  # at most one row per this many seconds while the model writes...
FLUSH_CHARS = 2000  # ...unless this many characters wait

# Writes one answer_delta event's payload; returns its id, or None when the run's stream has ended.
Emit = Callable[[dict[str, Any]], "int | None"]


class AnswerDeltas:
    """One streamed model call's text as ``answer_delta`` payloads handed to ``emit``."""

    def __init__(self, emit: Emit, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._emit = emit
        self._clock = clock
        self._waiting: list[str] = []
        self._waiting_chars = 0
        self._offset = 0  # code points of the draft written so far
        self._reset = True  # the next event starts a new draft
        self._shown = False  # an event of this call is on the page: a withdrawal must follow if it is no answer
        self._last = 0.0
        self._broken = False  # an event could not be written: the rest of this call is not streamed
        self.events = 0

    def text(self, piece: str) -> None:
        if not piece or self._broken:
            return
        self._waiting.append(piece)
        self._waiting_chars += len(piece)
        if (not self._shown or self._waiting_chars >= FLUSH_CHARS
                or self._clock() - self._last >= FLUSH_S):
            self.flush()

    def restart(self) -> None:
        self._waiting, self._waiting_chars = [], 0
        self._offset, self._reset = 0, True

    def flush(self) -> None:
        if not self._waiting:
            return
        text = "".join(self._waiting)
        self._waiting, self._waiting_chars = [], 0
        self._send({"offset": self._offset, "text": text})
        self._offset += len(text)

    def close(self, reply: ChatResult | None) -> None:
        """The call ended: the rest of an answer is written (:class:`StreamStopped` when the run closed
        meanwhile: the answer is not the run's); a reply of tool calls, or a failed call (None), withdraws
        what was shown, and then never raises: the turn's own outcome matters more."""
        if self._broken:
            return
        if reply is not None and not reply.tool_calls:
            self.flush()
            return
        try:
            if self._shown:
                self.restart()
                self._send({"offset": 0, "text": ""})
        except StreamStopped:
            pass  # the run ended meanwhile: its final event says what became of it

    def _send(self, payload: dict[str, Any]) -> None:
        if self._reset:
            payload["reset"] = True
        try:
            written = self._emit(payload)
        except Exception as exc:  # the database: the answer still comes, whole, with the run's final event
            self._broken = True
            observability.logger().warning("answer draft not written", extra={"reason": f"{type(exc).__name__}: {exc}"})
            return
        if written is None:
            raise StreamStopped("the run ended while its answer was being written")
        self._reset = False
        self._shown = True
        self._last = self._clock()
        self.events += 1
