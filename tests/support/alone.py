"""Tests that measure a process's memory run with no test beside them.

test.sh runs the suite in two processes (pytest-xdist): a neighbour's load changes what
libvips' threads hold (a worker kept up to 111 MiB between jobs with two busy loops beside
it, 27-41 MiB on a quiet machine), so a test marked ``alone`` takes an exclusive lock for
its setup, call and teardown, and every other test a shared one. A turnstile, taken by every
test on its way in and held by an ``alone`` test while it waits, keeps the other process
from taking shared locks back to back and starving it. Without xdist there is nothing beside
a test: no lock.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _lock(path: Path, how: int) -> int:
    """A descriptor holding the lock ``how`` on ``path`` (closing it lets go)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.lockf(fd, how)
    return fd


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        yield
        return
    base = Path(tempfile.gettempdir()) / f"imgwarm-tests-{run}"
    alone = item.get_closest_marker("alone") is not None
    turnstile = _lock(base.with_suffix(".turnstile"), fcntl.LOCK_EX)
    try:
        held = _lock(base.with_suffix(".lock"), fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    finally:
        if not alone:  # through the turnstile: side by side with the other process
            os.close(turnstile)
    try:
        yield
    finally:
        os.close(held)
        if alone:
            os.close(turnstile)
