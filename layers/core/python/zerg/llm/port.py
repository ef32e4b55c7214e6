"""What the agent loops need from a model, and nothing more.

Messages are OpenAI Chat Completions dicts (``role``/``content``/``tool_calls``/``tool_call_id``);
tools are OpenAI function schemas. Usage and cost are data on every result, accumulated by the
caller (job, run), never inferred later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Component = Literal["supervisor", "worker", "summary", "memory", "intent", "quick"]


# What went wrong with a model call, the same words whatever the provider (docs/models.md):
# throttled: 429/529/ThrottlingException past the retries; unavailable: 5xx or unreachable past the
# retries; timeout: the call's time budget ran out; rejected: the provider refused the request (a bad
# request, a bad key, no access to the model); malformed: an answer that cannot be read.
ErrorKind = Literal["throttled", "unavailable", "timeout", "rejected", "malformed"]
# Why an answer ended, normalised: stop (a final answer), tool_calls, length (max_tokens reached),
# refusal (the model or a guardrail declined: the content says so).
StopReason = Literal["stop", "tool_calls", "length", "refusal"]


class LLMError(RuntimeError):
    """The model could not answer (after retries); the message says which model and why, ``kind``
    what happened (:data:`ErrorKind`), the same for every provider."""

    def __init__(self, message: str, kind: ErrorKind = "unavailable") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


ModelError = LLMError  # the name issue 28 uses: one error type, its kinds, whatever the provider


class StreamStopped(Exception):
    """Raised by a :class:`TextStream` to end the call it listens to (the run closed while its answer
    was being written). Providers let it pass: no retry, no answer, no ledger row."""


class TextStream(Protocol):
    """Where a streamed call's text goes as the model writes it (``complete(..., stream=...)``).

    A provider that streams calls :meth:`text` with each piece of the answer's text, in order, and
    :meth:`restart` before a retried attempt that follows one which wrote text; one that cannot
    stream calls :meth:`text` once with the whole text (nothing for an answer made of tool calls).
    Either way the call's :class:`ChatResult` is the whole answer, with its usage, as without a stream.
    """

    def text(self, piece: str) -> None:
        """More of the answer's text; may raise :class:`StreamStopped`."""

    def restart(self) -> None:
        """What :meth:`text` was given so far is withdrawn: the call starts again."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, validated by the tool


@dataclass(frozen=True)
class CallTag:
    """Who a model call is for: the usage ledger records every call under its tag."""

    component: Component
    owner_id: int
    run_id: int | None = None
    job_id: int | None = None


@dataclass
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0  # None once any call had an unknown price
    tokens_cached: int = 0  # of tokens_in, served from the provider's prompt cache
    tokens_cache_write: int = 0  # of tokens_in, written to the provider's prompt cache (Anthropic, Bedrock)

    def add(self, other: "Usage") -> None:
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.tokens_cached += other.tokens_cached
        self.tokens_cache_write += other.tokens_cache_write
        if self.cost_usd is None or other.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd = round(self.cost_usd + other.cost_usd, 8)


@dataclass(frozen=True)
class ChatResult:
    model: str
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = "stop"

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to a conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg


def deliver_whole(stream: TextStream | None, result: ChatResult) -> ChatResult:
    """The fallback of a provider that does not stream: the whole text as one piece (a reply of tool
    calls writes nothing: its text, if any, is no answer)."""
    if stream is not None and result.content and not result.tool_calls:
        stream.text(result.content)
    return result


class ChatModel(Protocol):
    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,  # None: the model's own default
        timeout: float | None = None,
        tool_choice: str | None = None,  # "none": tools stay visible but the model must answer
        tag: CallTag | None = None,  # whose call this is (the ledger records it; providers ignore it)
        stream: TextStream | None = None,  # the answer's text as it is written (see TextStream)
    ) -> ChatResult: ...


# The first words of a background run's system prompt (zerg.supervisor.prompts): the mode a provider
# that plays the model without one (the offline provider) recognises.
BACKGROUND_MARKER = "[BACKGROUND RUN]"
