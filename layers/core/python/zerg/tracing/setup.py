"""Turning tracing on: the OpenTelemetry SDK's tracer provider with its exporters, built from the
settings when the runtime is (:func:`zerg.wiring.get_runtime`); the only module that loads the SDK.

Tracing is on when ``OTEL_SDK_DISABLED`` is not true and either an OTLP endpoint is set
(``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: spans go there over
OTLP/HTTP, protobuf; the exporter reads the other ``OTEL_EXPORTER_OTLP_*`` variables itself) or
``ZERG_TRACE_STORE`` keeps spans in the database. ``ZERG_TRACE_STORE=auto`` (the default) keeps them
when the runtime is local (not on Lambda, no Step Functions machine configured) and either it is
``zerg serve`` (:func:`serving`) or an endpoint is set.
Both exporters batch (``OTEL_BSP_*`` tune them): in the background, and on Lambda also at the end of
every invocation (:attr:`zerg.tracing.Options.flush_each_invocation`), whose sandbox is frozen after.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zerg import tracing

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from zerg.config import Settings

CONTENT_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})

_lock = threading.Lock()
_key: tuple[Any, ...] | None = None


def otlp_endpoint(settings: "Settings") -> str | None:
    return settings.otel_exporter_otlp_traces_endpoint or settings.otel_exporter_otlp_endpoint


_serving = False  # this process is `zerg serve` (:func:`serving`, before its runtime is built)


def serving() -> None:
    """Say this process is ``zerg serve``: with ``ZERG_TRACE_STORE=auto`` it keeps every run's spans
    for the waterfall, no collector needed (issue 29; the cost, measured, is in docs/tracing.md)."""
    global _serving
    _serving = True


def store_spans(settings: "Settings", *, serve: bool | None = None) -> bool:
    """Whether spans are also kept in the database (``ZERG_TRACE_STORE``). ``auto`` keeps them in a
    local runtime (neither on Lambda nor starting Step Functions executions) that is ``zerg serve``
    (``serve``; default: :func:`serving` was called) or exports to an OTLP endpoint."""
    if settings.trace_store == "auto":
        local = settings.lambda_function_name is None and settings.state_machine_arn is None
        return local and (otlp_endpoint(settings) is not None or (_serving if serve is None else serve))
    return settings.trace_store == "on"


def wanted(settings: "Settings") -> bool:
    return not settings.otel_sdk_disabled and (otlp_endpoint(settings) is not None or store_spans(settings))


def options_of(settings: "Settings") -> tracing.Options:
    opt_in = {v.strip() for v in (settings.otel_semconv_stability_opt_in or "").split(",")}
    return tracing.Options(latest=tracing.OPT_IN in opt_in,
                           capture_content=(settings.otel_capture_message_content or "").lower() in CONTENT_ON,
                           flush_each_invocation=settings.lambda_function_name is not None)


def configure(settings: "Settings", pool: Callable[[], "ConnectionPool"]) -> bool:
    """Install (or remove) this process's tracer for ``settings``; True when tracing is on.
    The same settings again change nothing."""
    global _key
    endpoint = otlp_endpoint(settings)
    key = (wanted(settings), endpoint, store_spans(settings), options_of(settings), settings.otel_service_name)
    with _lock:
        if key == _key and tracing.active() == key[0]:
            return key[0]
        _key = key
        if not key[0]:
            tracing.uninstall()
            return False
        tracing.install(_provider(settings, pool, endpoint), options_of(settings))
        return True


def shutdown() -> None:
    """Flush and remove the tracer (the runtime closed)."""
    global _key
    with _lock:
        _key = None
        tracing.uninstall()


def _provider(settings: "Settings", pool: Callable[[], "ConnectionPool"], endpoint: str | None) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class RunIds(RandomIdGenerator):
        """Random ids, except for a run's root span, whose ids the run's traceparent named."""

        def generate_span_id(self) -> int:
            forced = tracing.forced_ids.get()
            return forced[1] if forced is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            forced = tracing.forced_ids.get()
            return forced[0] if forced is not None else super().generate_trace_id()

    # Resource.create adds OTEL_RESOURCE_ATTRIBUTES and the SDK's own attributes.
    resource = Resource.create({"service.name": settings.otel_service_name})
    provider = TracerProvider(resource=resource, id_generator=RunIds())
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # No arguments: the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT (appending /v1/traces to
        # the generic one), _HEADERS, _TIMEOUT, _COMPRESSION and the certificates itself.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if store_spans(settings):
        from zerg.tracing.store import SpanStoreExporter

        provider.add_span_processor(BatchSpanProcessor(SpanStoreExporter(pool)))
    return provider
