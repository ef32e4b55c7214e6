"""Logs and metrics for every handler and the local host: one Powertools Logger, EMF metrics.

Invariants:
- Every log line of an invocation carries its correlation id (the run id; the request id for
  HTTP). It is kept per thread (Powertools' thread-safe keys), because the local engine runs
  several handlers at once in one process.
- Metrics are CloudWatch Embedded Metric Format documents in the ``Zerg`` namespace. On Lambda
  they are printed to stdout, where CloudWatch turns them into metrics; locally the same lines go
  to the log on stderr at DEBUG, so ``zerg run`` stays quiet unless asked.
- Observability never fails the work: a metric that cannot be written is dropped with a log line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

SERVICE = "zerg"
NAMESPACE = "Zerg"

_lock = threading.Lock()
_logger: "Logger | None" = None
_on_lambda = False


def _settings() -> tuple[str, bool]:
    """(log level, running on Lambda); a broken configuration still gets a logger (INFO)."""
    from zerg.config import ConfigError, get_settings

    try:
        settings = get_settings()
    except ConfigError:
        return "INFO", False
    return settings.log_level, settings.lambda_function_name is not None


def logger() -> "Logger":
    """The process's logger (built on first use from ``ZERG_LOG_LEVEL``)."""
    global _logger, _on_lambda
    with _lock:
        if _logger is None:
            from aws_lambda_powertools import Logger

            level, _on_lambda = _settings()
            # Lambda: stdout is CloudWatch's. Locally: stderr, so a command's output stays clean.
            _logger = Logger(service=SERVICE, level=level, stream=sys.stdout if _on_lambda else sys.stderr)
        return _logger


def set_level(level: str) -> None:
    """Change the level of every line (``zerg run`` stays at WARNING unless asked)."""
    logger().setLevel(level)


def reset() -> None:
    """Re-read the level and the Lambda flag from the settings (tests and hosts that change the
    configuration). The logger itself stays: Powertools configures a service's logger once."""
    global _on_lambda
    with _lock:
        if _logger is not None:
            level, _on_lambda = _settings()
            _logger.setLevel(level)


@contextlib.contextmanager
def invocation(function: str, correlation_id: Any, trace_id: str | None = None) -> Iterator["Logger"]:
    """Scope one handler invocation: its lines carry ``function`` and ``correlation_id``, and the
    run's ``trace_id`` when the invocation is part of a traced run (docs/tracing.md)."""
    log = logger()
    keys: dict[str, Any] = {"function": function,
                            "correlation_id": None if correlation_id is None else str(correlation_id)}
    if trace_id is not None:
        keys["trace_id"] = trace_id
    log.thread_safe_append_keys(**keys)
    try:
        yield log
    finally:
        # Threads are reused (the local engine's pool): the next invocation must not inherit ids.
        log.thread_safe_remove_keys(list(keys))


def metric(name: str, value: float, unit: str, **dimensions: str) -> None:
    """One metric with its own dimensions, as one EMF line."""
    metrics(dimensions, (name, value, unit))


def metrics(dimensions: dict[str, str], *values: tuple[str, float, str]) -> None:
    """Several metrics that share dimensions, as one EMF line: ``(name, value, unit)`` each."""
    log = logger()
    if not _on_lambda and not log.isEnabledFor(logging.DEBUG):
        return  # locally the line would be a DEBUG log line nobody sees: do not build it
    try:
        from aws_lambda_powertools.metrics import EphemeralMetrics

        emf = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
        for key, dim in dimensions.items():
            emf.add_dimension(name=key, value=str(dim))
        for name, value, unit in values:
            emf.add_metric(name=name, unit=unit, value=float(value))
        line = json.dumps(emf.serialize_metric_set(), separators=(",", ":"))
    except Exception as exc:  # a bad metric is the metric's problem, never the run's
        log.warning("metric dropped", extra={"metric": [v[0] for v in values], "reason": str(exc)})
        return
    if _on_lambda:
        print(line, flush=True)
    else:
        log.debug(line)
