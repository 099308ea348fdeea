"""Every test leaves the process's signal handlers as it found them.

A handler left behind outlives its test: a command run in-process (CliRunner) that set
SIGTERM to its own ``stop`` and never put it back made every process forked later in that
test process ignore SIGTERM, and a later test's ``multiprocessing.Pool`` waited for ever at
``terminate()`` on a worker that no longer died of it (CI, 900 s, in another file). So a
test that changes a handler fails, naming it, and the handlers are put back for the next.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# SIGALRM is pytest-timeout's, set around every test
WATCHED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE,
           signal.SIGUSR1, signal.SIGUSR2)

Handler = Callable[[int, Any], Any] | int | signal.Handlers | None


def _handlers() -> dict[signal.Signals, Handler]:
    return {number: signal.getsignal(number) for number in WATCHED}


@pytest.fixture(autouse=True)
def _signal_handlers_kept() -> Iterator[None]:
    before = _handlers()
    yield
    changed = {number: handler for number, handler in _handlers().items()
               if handler != before[number]}
    for number in changed:
        was = before[number]
        if was is not None:  # (None: set outside Python, which Python cannot set back)
            signal.signal(number, was)
    if changed:
        pytest.fail("the test left signal handlers changed (a later fork inherits them): "
                    + ", ".join(f"{number.name} -> {handler!r}"
                                for number, handler in changed.items()), pytrace=False)
