"""One retry policy for every provider: a model call's ``timeout`` is its whole budget, retries included.

Retryable failures (throttling: 429, Anthropic's 529, Bedrock's ``ThrottlingException``; 408/409; 5xx;
connection errors) back off exponentially (0.5 s, 1 s, 2 s, ... at most :data:`MAX_DELAY_S`, or as the
server's ``Retry-After`` says), at most ``max_retries`` times, and never past the call's deadline. The
SDKs' own retries are switched off in every adapter because they do not know that budget: a 5-second
summary stays a 5-second summary whichever provider serves it. After that an :class:`LLMError` names the
model, where it was asked and why, with the same :data:`~zerg.llm.port.ErrorKind` for the same failure
whatever the provider.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from zerg.llm.port import ErrorKind, LLMError

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_DELAY_S = 8.0


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as a provider's adapter classifies its SDK's exception."""

    kind: ErrorKind
    retryable: bool
    detail: str  # what happened, for the error's message ("answered HTTP 503")
    retry_after: float | None = None  # seconds, when the server said
    said: str = ""  # the provider's own words ("overloaded")


def status_kind(status: int) -> ErrorKind:
    """The kind of an HTTP status a provider answered with."""
    if status in (429, 529):
        return "throttled"
    if status == 408:
        return "timeout"
    if status >= 500 or status == 409:
        return "unavailable"
    return "rejected"


def with_retries(
    attempt: Callable[[float], T],
    classify: Callable[[BaseException], Failure | None],
    *,
    model: str,
    where: str,
    timeout: float | None,
    default_timeout: float,
    max_retries: int,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``attempt(seconds_left)`` until it answers, retrying what ``classify`` calls retryable.

    ``classify`` turns the SDK's exception into a :class:`Failure` (None: not a provider failure,
    raised as is). A timeout of an attempt is retried only when the call has no deadline of its own.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    tries = 0
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise LLMError(f"model {model} at {where} timed out after {timeout:g}s", "timeout")
        try:
            return attempt(left or default_timeout)
        except LLMError:
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
        retry = failure.retryable and tries < max_retries and not (failure.kind == "timeout" and deadline is not None)
        if not retry:
            after = f" after {tries} retries" if failure.retryable else ""
            said = f": {failure.said}" if failure.said else ""
            raise LLMError(f"model {model} at {where} {failure.detail}{after}{said}", failure.kind) from None
        delay = min(MAX_DELAY_S, failure.retry_after if failure.retry_after is not None else 0.5 * 2**tries)
        if deadline is not None and time.monotonic() + delay >= deadline:
            raise LLMError(f"model {model} at {where} kept failing ({failure.detail}); no time left to retry "
                           f"within {timeout:g}s", failure.kind)
        sleep(delay)
        tries += 1


def transport_failure(exc: BaseException) -> Failure | None:
    """A timeout or a broken connection of the SDKs' HTTP transport (httpx, or the httpx2 the current
    openai and anthropic SDKs use), as raised while a stream is read (the SDKs wrap it only on connect)."""
    names = {f"{c.__module__.split('.')[0]}.{c.__name__}" for c in type(exc).__mro__}
    for lib in ("httpx", "httpx2"):
        if f"{lib}.TimeoutException" in names:
            return Failure("timeout", True, "timed out while streaming")
        if f"{lib}.TransportError" in names:
            return Failure("unavailable", True, f"broke off its stream: {exc}")
    return None


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def retry_after(headers: object) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` header (seconds), when it sent one."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    try:
        if get("retry-after-ms"):
            return float(get("retry-after-ms")) / 1000
        if get("retry-after"):
            return float(get("retry-after"))
    except (TypeError, ValueError):
        return None
    return None
