"""A part a test needs (a browser, sshd, a sandbox mechanism, root, a built app): present, or the
test fails under ``CI=true`` (CI must have every part) and skips elsewhere, saying what is missing."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(missing: str | None, what: str) -> None:
    """``missing`` (why the part is not there, with what to install) fails the calling test in CI
    and skips it elsewhere; None lets it run. ``what`` says which tests cannot run."""
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"{what} cannot run: {missing}", pytrace=False)
    pytest.skip(missing)
