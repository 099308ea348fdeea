"""The warm service: one run after another, every so long (``warm --every``), when the events
stream wakes it (``warm --follow``), or both, until told to stop; a run in hand is finished.

One loop for both, so that they stop, beat and retry alike. Runs never overlap (one thread);
what arrives during a run wakes one more run after it, not one per event (coalescing).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

RETRY_FIRST = 2.0  # seconds before a run that failed with events waiting is tried again
RETRY_MOST = 60.0
Report = TypeVar("Report")


class Waker(Protocol):
    """What wakes the service between its periodic runs (events/follow.py)."""

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` (at most about a second: the stop is checked between);
        True when a run is wanted (events came, or the stream is back after being away)."""
        ...

    def ran(self, ok: bool) -> None:
        """The run that covered what woke it has ended (``ok``: without an error, so what
        woke it can be acknowledged; else it stays pending, for the next run)."""
        ...

    def close(self) -> None: ...


def keep_warm(run: Callable[[], Report | None], *, every: float | None,
              waker: Waker | None = None, stop: threading.Event | None = None,
              after: Callable[[Report | None], None] | None = None) -> None:
    """``run`` (one warm run; None when it failed, its line already said) at once, then every
    ``every`` seconds and whenever ``waker`` says, until ``stop`` is set; ``after`` is told
    each run's outcome (the heartbeat). A run that failed while events wait is tried again
    after a backoff (2 s doubling to a minute), not at the next period only."""
    stop = stop or threading.Event()
    wanted = waker.wait(0) if waker is not None else False  # own pending entries first
    due, retry = time.monotonic(), RETRY_FIRST
    try:
        while not stop.is_set():
            now = time.monotonic()
            if wanted or now >= due:
                report = run()
                ok = report is not None
                if waker is not None:
                    waker.ran(ok)
                if after is not None:
                    after(report)
                due = time.monotonic() + every if every else math.inf
                if wanted and not ok:  # the events are still pending: try them again soon
                    due, retry = min(due, time.monotonic() + retry), min(retry * 2, RETRY_MOST)
                elif ok:
                    retry = RETRY_FIRST
                wanted = False
                continue
            left = max(0.0, due - now)
            if waker is None:
                stop.wait(None if math.isinf(left) else left)
            else:
                wanted = waker.wait(min(left, 1.0))
    finally:
        if waker is not None:
            waker.close()
