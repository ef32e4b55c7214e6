"""Byte ranges (RFC 9110 §14) on artifact files, so an output too big for one response is read in pieces.

Invariants:
- One range per response, at most :data:`RANGE_MAX_BYTES` (1 MiB). A range is bytes, so it is
  always sent base64-encoded: API Gateway's 6 MB Lambda response limit would allow ~4.4 MiB, but
  a response holds ~2.7x its size in the server while it is built (the bytes read, their base64,
  its text), so 1 MiB keeps a read of any file within ~3 MB of memory (``bench/bigoutput.py``),
  and reading in 1 MiB pieces was no slower than in 4 MiB ones. A longer range is served in its
  first :data:`RANGE_MAX_BYTES`; ``Content-Range`` says which bytes came, so a client asks for
  the next piece from there.
- ``bytes=a-b``, ``bytes=a-`` and ``bytes=-n`` (the last n bytes) are served as 206. Of several
  ranges (``bytes=0-9,20-29``) only the first is served, as a single-part 206 (never
  ``multipart/byteranges``); a client must read ``Content-Range``, as RFC 9110 asks of it.
- A range that starts past the end (or any range of an empty file, or ``bytes=-0``) is 416 with
  ``Content-Range: bytes */<size>``. A malformed ``bytes=`` header is 400 with what is wrong. A
  range unit other than ``bytes`` is ignored (RFC 9110: MUST ignore): the whole file, as without
  a Range header.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from aws_lambda_powertools.event_handler import Response

from zerg.api.errors import ApiError, error_response

RANGE_MAX_BYTES = 1024 * 1024
_SPEC = re.compile(r"^(\d{0,19})-(\d{0,19})$")  # 19 digits: every offset an int64 can hold


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1


class RangeNotSatisfiable(Exception):
    def __init__(self, spec: str, size: int) -> None:
        super().__init__(f"range {spec!r} is outside the file: it is {size} bytes")
        self.size = size

    def response(self) -> Response:
        return error_response(416, "range_not_satisfiable", str(self),
                              headers={"Content-Range": f"bytes */{self.size}", "Accept-Ranges": "bytes"})


def _bad(header: str, why: str) -> ApiError:
    return ApiError(400, "bad_range", f"Range {header[:100]!r}: {why}; expected bytes=START-END, bytes=START- "
                                      "or bytes=-LAST_N")


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The range to serve of a ``size``-byte file; None: serve the whole file (no usable Range)."""
    if header is None or not header.strip():
        return None
    unit, eq, specs = header.strip().partition("=")
    if unit.strip().lower() != "bytes":
        return None
    if not eq:
        raise _bad(header, "no '=' after the unit")
    spec = specs.split(",")[0].strip()
    match = _SPEC.match(spec)
    if not match or match.groups() == ("", ""):
        raise _bad(header, f"{spec!r} is not a byte range")
    first, last = match.groups()
    if first == "":  # the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable(spec, size)
        start, end = max(0, size - n), size - 1
    else:
        start = int(first)
        if last != "" and int(last) < start:
            raise _bad(header, f"the range ends ({last}) before it starts ({start})")
        if start >= size:
            raise RangeNotSatisfiable(spec, size)
        end = size - 1 if last == "" else min(int(last), size - 1)
    return ByteRange(start, min(end, start + RANGE_MAX_BYTES - 1))


def partial_content(data: bytes, start: int, size: int, content_type: str) -> Response:
    """The 206 for ``data`` read from offset ``start`` of a ``size``-byte file (pass the read itself:
    its bytes are released as soon as they are encoded, so a response holds ~2.7x its size at most).

    The body is base64-encoded here, not left to Powertools: it would JSON-serialize a bytes body
    whose content type is ``application/json`` (a piece of ``metadata.json``)."""
    count = len(data)
    encoded = base64.b64encode(data)
    del data
    response = Response(206, content_type, encoded.decode("ascii"), headers={
        "Content-Range": f"bytes {start}-{start + count - 1}/{size}", "Accept-Ranges": "bytes"})
    response.base64_encoded = True
    return response
