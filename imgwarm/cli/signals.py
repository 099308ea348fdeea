"""How the long-running commands (watch, warm --every/--follow, listen, notify) are stopped:
SIGTERM, as a service manager sends it, and Ctrl-C both ask the command to finish what it has
in hand; the handlers are put back when the command returns.

Putting them back matters beyond tidiness: a command run in-process (a test's CliRunner, an
app that embeds the CLI) would otherwise leave its handler for the rest of the process, and a
process forked later inherits it. A forked worker whose SIGTERM only calls the old command's
``stop`` no longer dies on it, so ``multiprocessing.Pool.terminate`` waits on it for ever.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOPPING = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stopped_by_signals(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT call ``stop``; the handlers found are restored
    after, however the block ends. Off the main thread (where Python cannot set a handler) the
    block runs with the process's handlers as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(*_: Any) -> None:
        stop()

    previous = {number: signal.signal(number, handler) for number in STOPPING}
    try:
        yield
    finally:
        for number, was in previous.items():
            signal.signal(number, was)


def then_interrupt(stop: threading.Event) -> Callable[[], None]:
    """A first signal sets ``stop`` (the work in hand is finished); a second raises
    KeyboardInterrupt, for whoever will not wait."""
    def stopping() -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    return stopping
