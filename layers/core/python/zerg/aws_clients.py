"""boto3 clients for calls on a request's or a run's path: short timeouts and few attempts, built
once, on first use (boto3 is imported only then: cold starts stay small).

Invariants:
- A caller waits at most about ``attempts`` x (connect + read timeout) for one AWS call; a slow
  or unreachable service becomes an error the caller turns into its own (503, a failed row).
- :class:`LazyClient` builds its client once even when several threads ask at the same time.
"""

from __future__ import annotations

import threading
from typing import Any


def short_client(service: str, *, timeout_s: float, attempts: int) -> Any:
    """A boto3 client for ``service`` with ``timeout_s`` to connect and to read, ``attempts`` tries."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, config=Config(connect_timeout=timeout_s, read_timeout=timeout_s,
                                               retries={"total_max_attempts": attempts, "mode": "standard"}))


class LazyClient:
    """:func:`short_client`, built on the first :meth:`get` (or the ``client`` given, e.g. by a test)."""

    def __init__(self, service: str, *, timeout_s: float, attempts: int, client: Any = None) -> None:
        self.service, self.timeout_s, self.attempts = service, timeout_s, attempts
        self._client = client
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = short_client(self.service, timeout_s=self.timeout_s, attempts=self.attempts)
            return self._client
