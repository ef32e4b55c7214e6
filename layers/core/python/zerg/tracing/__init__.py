"""One OpenTelemetry trace per run (docs/tracing.md): the spans every part of a run opens, and the
context that carries the run's trace across the state machine.

A run's trace is known before its execution starts: its trace id and the id of its root span
(``invoke_workflow``) are derived from the run row (:func:`ids_for`), so the execution input's
``traceparent`` (:func:`traceparent_for`) is the same on a repeated start (Step Functions' start is
idempotent only for the same input) and the run details can name the trace without a lookup. Every
Lambda invocation of the run (the supervisor's steps, each worker, a worker resumed after an
approval) joins the trace through :func:`invocation`; the root span itself is written once, when
the run closes (:func:`end_run`, from :func:`zerg.runs.closing.after_close`), from the run's
creation to its close.

Invariants:
- Nothing here imports OpenTelemetry: the SDK is loaded by :mod:`zerg.tracing.setup` only when
  tracing is on, so a handler's cold start is unchanged when it is off, and every helper below is a
  no-op then (it yields ``None``).
- Spans are opened only inside a run's invocation (:func:`invocation`): a model call outside a run
  (the intent check, a quick answer) starts no trace of its own.
- Tracing never fails the work: a span that cannot be recorded is dropped; exceptions of the work
  itself pass through unchanged (and mark the span ``error``).
- Message content (prompts, answers, tool arguments and results) is recorded only when
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` opts in (:attr:`Options.capture_content`):
  it may hold secrets.
- Attribute names follow the GenAI semantic conventions: :data:`LATEST_SEMCONV` when
  ``OTEL_SEMCONV_STABILITY_OPT_IN`` holds ``gen_ai_latest_experimental``, else :data:`DEFAULT_SEMCONV`
  (the provider is ``gen_ai.system`` there, ``gen_ai.provider.name`` in the latest).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

# The GenAI semantic conventions emitted (pinned: they are "Development" and change between releases).
LATEST_SEMCONV = "1.41.0"  # with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
DEFAULT_SEMCONV = "1.36.0"  # otherwise, as the transition plan asks
OPT_IN = "gen_ai_latest_experimental"
SCOPE = "zerg"
WORKFLOW = "zerg.run"  # the workflow's (and the root span's) name

# Our own attributes: which run (and owner) a span belongs to; the local span store keys on them.
RUN_ID = "zerg.run.id"
OWNER_ID = "zerg.owner.id"
JOB_ID = "zerg.job.id"
COST_USD = "zerg.cost_usd"

# The longest an invocation waits for its spans to be exported (Lambda only): a collector that does
# not answer costs each invocation at most this, never the invocation itself.
INVOCATION_FLUSH_MS = 5_000

# Captured content (opt-in) is cut to this many characters per attribute: a tool's output can be
# megabytes, a span is read by a collector with its own request limits.
CONTENT_MAX_CHARS = 16_000

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class Options:
    latest: bool = False  # OTEL_SEMCONV_STABILITY_OPT_IN names gen_ai_latest_experimental
    capture_content: bool = False  # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT opts in
    # Export what an invocation recorded before it returns: on Lambda, whose sandbox is frozen right
    # after (a batch left queued would wait for the next invocation, or be lost). Elsewhere the
    # batch processor exports in the background (OTEL_BSP_SCHEDULE_DELAY) and at shutdown.
    flush_each_invocation: bool = False

    @property
    def semconv(self) -> str:
        return LATEST_SEMCONV if self.latest else DEFAULT_SEMCONV

    @property
    def provider_key(self) -> str:
        return "gen_ai.provider.name" if self.latest else "gen_ai.system"


@dataclass(frozen=True)
class _Installed:
    provider: "TracerProvider"
    tracer: Any
    options: Options


_installed: _Installed | None = None
_lock = threading.Lock()
# The run the current invocation works for: (run id, owner id); spans are opened only inside one.
_scope: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("zerg_trace_scope", default=None)
# Ids the next span must take (the run's root span, derived from the run): (trace id, span id).
forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("zerg_trace_ids", default=None)


def install(provider: "TracerProvider", options: Options) -> None:
    """Make ``provider`` this process's tracer (:mod:`zerg.tracing.setup`); the previous one is shut down."""
    global _installed
    with _lock:
        previous = _installed
        _installed = _Installed(provider, provider.get_tracer(SCOPE, schema_url=schema_url(options)), options)
    if previous is not None:
        previous.provider.shutdown()


def uninstall() -> None:
    """Tracing off: flush and shut down the installed provider, if any."""
    global _installed
    with _lock:
        previous, _installed = _installed, None
    if previous is not None:
        previous.provider.shutdown()


def active() -> bool:
    return _installed is not None


def options() -> Options:
    return _installed.options if _installed is not None else Options()


def schema_url(opts: Options) -> str:
    return f"https://opentelemetry.io/schemas/{opts.semconv}"


def flush(timeout_ms: int = 10_000) -> None:
    """Export what was recorded (the end of every invocation: a Lambda may be frozen right after)."""
    installed = _installed
    if installed is not None:
        try:
            installed.provider.force_flush(timeout_ms)
        except Exception:  # tracing never fails the work
            log.warning("flushing the spans failed", exc_info=True)


# --- the run's trace ------------------------------------------------------------------------
def ids_for(run_id: int, created_at: datetime) -> tuple[str, str]:
    """(trace id, root span id) of a run, in hex: derived from its id and creation time, so they are
    the same on every start of the run and different for a run id reused by another database. The
    trace id starts with the creation time in epoch seconds (8 hex digits), as X-Ray's own ids do, so
    X-Ray (through the ADOT collector) takes it whatever its trace-id validation."""
    digest = hashlib.sha256(f"zerg-run:{run_id}:{created_at.isoformat()}".encode()).hexdigest()
    trace_id, span_id = f"{int(created_at.timestamp()) & 0xFFFFFFFF:08x}{digest[:24]}", digest[32:48]
    # All-zero ids are invalid (probability 2^-128 / 2^-64, but the format forbids them outright).
    return (trace_id if int(trace_id, 16) else "1".rjust(32, "0"),
            span_id if int(span_id, 16) else "1".rjust(16, "0"))


def traceparent_for(run: dict[str, Any]) -> str | None:
    """The W3C ``traceparent`` for ``run``'s execution input (its root span as the parent), or None
    when tracing is off in this process."""
    if _installed is None:
        return None
    trace_id, span_id = ids_for(run["id"], run["created_at"])
    return f"00-{trace_id}-{span_id}-01"


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id a ``traceparent`` names (None when absent or malformed); no OpenTelemetry needed."""
    match = _TRACEPARENT.match(traceparent or "")
    return match.group(1) if match else None


def _remote(traceparent: str) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _kind(kind: str) -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL


@contextlib.contextmanager
def invocation(traceparent: str | None, name: str, *, run_id: int, owner_id: int,
               attributes: dict[str, Any] | None = None) -> Iterator["Span | None"]:
    """One Lambda invocation of a run, as a span joining the run's trace (the ``traceparent`` of
    its event). Spans opened inside (:func:`span`, the model's, the tools') are its descendants. On
    Lambda the recorded spans are exported before it returns (:attr:`Options.flush_each_invocation`).
    Without tracing or a valid ``traceparent``: ``None``."""
    installed = _installed
    if installed is None or trace_id_of(traceparent) is None:
        yield None
        return
    token = _scope.set((run_id, owner_id))
    try:
        attrs = {RUN_ID: run_id, OWNER_ID: owner_id, **(attributes or {})}
        with installed.tracer.start_as_current_span(name, context=_remote(traceparent), kind=_kind("internal"),
                                                    attributes=_clean(attrs)) as current:
            yield current
    finally:
        _scope.reset(token)
        if installed.options.flush_each_invocation:
            flush(INVOCATION_FLUSH_MS)


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None, kind: str = "internal") -> Iterator["Span | None"]:
    """A child of the current span, inside a run's invocation only (else ``None``, nothing recorded)."""
    installed, scope = _installed, _scope.get()
    if installed is None or scope is None:
        yield None
        return
    attrs = {RUN_ID: scope[0], OWNER_ID: scope[1], **(attributes or {})}
    with installed.tracer.start_as_current_span(name, kind=_kind(kind), attributes=_clean(attrs)) as current:
        yield current


def in_run() -> bool:
    """True inside a run's invocation while tracing is on (where :func:`span` records)."""
    return _installed is not None and _scope.get() is not None


def current_trace_id() -> str | None:
    """The trace id of the current span (hex), or None."""
    if _installed is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def record_past(traceparent: str | None, name: str, started: datetime, ended: datetime, *, run_id: int,
                owner_id: int, attributes: dict[str, Any] | None = None, error: str | None = None) -> None:
    """A span for something that happened before this invocation (the wait for an approval), a child
    of the run's root span, from ``started`` to ``ended``."""
    installed = _installed
    if installed is None or trace_id_of(traceparent) is None:
        return
    try:
        attrs = {RUN_ID: run_id, OWNER_ID: owner_id, **(attributes or {})}
        done = installed.tracer.start_span(name, context=_remote(traceparent), kind=_kind("internal"),
                                           attributes=_clean(attrs), start_time=_ns(started))
        if error:
            mark_error(done, error)
        done.end(end_time=max(_ns(ended), _ns(started)))
    except Exception:
        log.warning("span %s dropped", name, exc_info=True)


def end_run(run: dict[str, Any]) -> None:
    """Write the run's root span (``invoke_workflow``), from its creation to now, with the ids its
    execution's ``traceparent`` named; called once, by the closer (:func:`zerg.runs.closing.after_close`)."""
    installed = _installed
    if installed is None or not run.get("created_at"):
        return
    try:
        from opentelemetry.context import Context

        trace_id, span_id = ids_for(run["id"], run["created_at"])
        status = run.get("status")
        attrs = {"gen_ai.operation.name": "invoke_workflow", RUN_ID: run["id"], OWNER_ID: run["owner_id"],
                 "zerg.run.status": status, "zerg.run.trigger": run.get("trigger"),
                 "gen_ai.conversation.id": _text(run.get("thread_id")), "gen_ai.workflow.name": WORKFLOW}
        token = forced_ids.set((int(trace_id, 16), int(span_id, 16)))
        try:
            root = installed.tracer.start_span(f"invoke_workflow {WORKFLOW}", context=Context(),
                                               kind=_kind("internal"), attributes=_clean(attrs),
                                               start_time=_ns(run["created_at"]))
        finally:
            forced_ids.reset(token)
        if status not in ("success", None):
            mark_error(root, str(run.get("error") or status)[:500], error_type=str(status))
        root.end(end_time=_ns(run["finished_at"]) if run.get("finished_at") else None)
    except Exception:
        log.warning("run %s: its root span was dropped", run.get("id"), exc_info=True)
        return
    if installed.options.flush_each_invocation:
        flush()


def content(text: str) -> str:
    """Captured content as an attribute value: cut to :data:`CONTENT_MAX_CHARS`, saying how much was left out."""
    if len(text) <= CONTENT_MAX_CHARS:
        return text
    return f"{text[:CONTENT_MAX_CHARS]}… [{len(text) - CONTENT_MAX_CHARS} more characters not recorded]"


def mark_error(target: Any, description: str, error_type: str = "_OTHER") -> None:
    """Status ``error`` with ``error.type`` (a span from this module, or None)."""
    if target is None:
        return
    from opentelemetry.trace import Status, StatusCode

    target.set_attribute("error.type", error_type)
    target.set_status(Status(StatusCode.ERROR, description[:500]))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def now_ns() -> int:
    return time.time_ns()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: None dropped (it would be a warning per span)."""
    return {k: v for k, v in attrs.items() if v is not None}
