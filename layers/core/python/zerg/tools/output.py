"""ShellOutput: one shell command's output on its way to the artifact and to the model.

The shell tools (``container_exec``, ``ssh_exec``) hand every piece of output to a
:class:`ShellOutput` the moment it arrives. The artifact file (``tool_calls/NNN_<tool>.txt``) is::

    $ df -h
    --- stdout ---
    <stdout, as it arrived>
    --- stderr ---
    <stderr>
    --- exit ---
    exit_code: 0
    exit_signal: TERM         (only when a signal killed the command; exit_code is then none)
    limit: file size 50 MiB exceeded   (only when a sandbox limit stopped something)
    duration_ms: 41
    note: ...                 (only when there is one)

Invariants:
- Memory is bounded whatever the command prints: stdout goes to the artifact stream piece by
  piece; stderr is spooled (in memory up to :data:`SPOOL_IN_MEMORY`, then in a temporary file)
  and appended once the command is done, so the artifact stays one readable file; the model's
  view keeps only the head and tail of each stream (:class:`zerg.loop.tool.Capped`).
- The model sees the same report as ever (header, exit code, duration, note, each stream cut to
  ``ZERG_TOOL_OUTPUT_CAP`` with a marker); the artifact keeps each stream up to
  ``ARTIFACT_OUTPUT_CAP`` bytes. Past that, :meth:`stdout`/:meth:`stderr` answer False: the tool
  stops the command, and both views say the rest was not kept.
- The artifact file is claimed at the first byte or at :meth:`finish`, never before: a call that
  fails before it runs anything (no sandbox, no connection) leaves no half-written file. Once
  claimed it is always closed with its ``--- exit ---`` trailer, also when the tool fails midway
  (the trailer then says so), and a write error of the store never fails the call: the model is
  told the artifact is incomplete.
"""

from __future__ import annotations

import logging
import tempfile
from types import TracebackType

from zerg.loop.tool import ARTIFACT_OUTPUT_CAP, Capped, OutputStream, ToolContext, ToolOutcome

logger = logging.getLogger(__name__)

SPOOL_IN_MEMORY = 1 << 20  # stderr bytes held in memory before the spool moves to a temporary file
COPY_CHUNK = 1 << 20


class _InMemory:
    """The artifact of a call made outside a worker (no ``open_output``): returned as text."""

    path = ""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass


class ShellOutput:
    def __init__(self, ctx: ToolContext, tool: str, header: str, *, store_cap: int = ARTIFACT_OUTPUT_CAP) -> None:
        self._ctx, self._tool, self.header = ctx, tool, header
        self.store_cap = store_cap
        self._out_view, self._err_view = Capped(ctx.settings.tool_output_cap), Capped(ctx.settings.tool_output_cap)
        self._out_kept = self._err_kept = 0
        self._out_last = b"\n"
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        self._stream: OutputStream | _InMemory | None = None
        self._write_error: str | None = None
        self._closed = False

    # --- what the command prints --------------------------------------------------------
    def stdout(self, data: bytes) -> bool:
        """Take stdout bytes; False once the artifact bound is reached (stop the command)."""
        self._out_view.add(data)
        keep = data[: max(0, self.store_cap - self._out_kept)]
        if keep:
            self._write(keep)
            self._out_kept += len(keep)
            self._out_last = keep[-1:]
        return len(keep) == len(data)

    def stderr(self, data: bytes) -> bool:
        """Take stderr bytes; False once the artifact bound is reached (stop the command)."""
        self._err_view.add(data)
        keep = data[: max(0, self.store_cap - self._err_kept)]
        if keep:
            self._spool.write(keep)
            self._err_kept += len(keep)
        return len(keep) == len(data)

    @property
    def over_cap(self) -> bool:
        return self._out_view.total > self._out_kept or self._err_view.total > self._err_kept

    # --- the end --------------------------------------------------------------------------
    def finish(self, exit_code: int | None, duration_ms: int, note: str = "", *,
               exit_signal: str | None = None, limit: str = "") -> ToolOutcome:
        """Close the artifact with its trailer; the outcome for the model (capped). ``limit``: the
        one line saying what a sandbox limit stopped (``limit: ... exceeded``), if any."""
        notes = [n for n in (note, self._cap_note()) if n]
        status = _status_lines(exit_code, exit_signal, duration_ms, limit)
        self._close(status, notes)
        if self._write_error:
            notes.append(f"the raw output could not be fully saved ({self._write_error})")
        text = self._model_text(status, "; ".join(notes))
        stream = self._stream
        if isinstance(stream, _InMemory):
            return ToolOutcome(text=text, artifact=stream.data.decode("utf-8", "replace"), ok=exit_code == 0,
                               exit_code=exit_code, exit_signal=exit_signal)
        return ToolOutcome(text=text, artifact_path=stream.path if stream else None, ok=exit_code == 0,
                           exit_code=exit_code, exit_signal=exit_signal)

    def __enter__(self) -> "ShellOutput":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._closed and self._stream is not None:  # the tool failed midway: keep what came, say so
            failed = kind.__name__ if kind else "closed"
            self._close(_status_lines(None, None, 0), [f"the tool failed before the command finished: {failed}"])
        self._spool.close()

    def _cap_note(self) -> str:
        if not self.over_cap:
            return ""
        return f"output over {self.store_cap} bytes: the command was stopped and the rest not kept"

    def _close(self, status: list[str], notes: list[str]) -> None:
        self._closed = True
        if self._out_last != b"\n":
            self._write(b"\n")
        self._write(b"--- stderr ---\n")
        self._spool.seek(0)
        last = b"\n"
        while chunk := self._spool.read(COPY_CHUNK):
            self._write(chunk)
            last = chunk[-1:]
        self._write(b"" if last == b"\n" else b"\n")
        trailer = ["--- exit ---", *status, *(f"note: {n}" for n in notes)]
        self._write(("\n".join(trailer) + "\n").encode("utf-8", "replace"))
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception as exc:  # S3 refused the upload: the call's result still reaches the model
                self._failed(exc)

    def _write(self, data: bytes) -> None:
        if self._write_error or not data:
            return
        try:
            if self._stream is None:
                opener = self._ctx.open_output
                self._stream = opener(self._tool) if opener is not None else _InMemory()
                self._stream.write(f"{self.header}\n--- stdout ---\n".encode("utf-8", "replace"))
            self._stream.write(data)
        except Exception as exc:  # the disk is full, S3 is down: stop writing, tell the model, go on
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self._write_error = f"{type(exc).__name__}: {exc}"
        logger.warning("tool output not saved: %s", self._write_error)

    def _model_text(self, status: list[str], note: str) -> str:
        lines = [self.header, *status]
        if note:
            lines.append(f"note: {note}")
        lines += ["--- stdout ---", self._out_view.text().rstrip("\n"), "--- stderr ---",
                  self._err_view.text().rstrip("\n")]
        return "\n".join(lines) + "\n"


def _status_lines(exit_code: int | None, exit_signal: str | None, duration_ms: int, limit: str = "") -> list[str]:
    """``exit_code: N`` (``none``: no code), ``exit_signal: TERM`` when a signal killed the command,
    ``limit: ...`` when a limit stopped something, ``duration_ms: N``: the same lines in the
    artifact's trailer and in the model's view."""
    code = ["exit_code: none" if exit_code is None else f"exit_code: {exit_code}"]
    return (code + ([f"exit_signal: {exit_signal}"] if exit_signal else []) + ([limit] if limit else [])
            + [f"duration_ms: {duration_ms}"])
