"""Polling for a condition in tests: a hang guard, never a measurement (tests assert no wall-clock bound)."""

from __future__ import annotations

import time


def wait_for(predicate, what: str, limit_s: float = 20, poll_s: float = 0.05):
    """``predicate()``'s first truthy value, polled until ``limit_s``; else AssertionError naming ``what``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")
