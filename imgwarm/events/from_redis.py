"""``listen --redis-list KEY``: bucket notifications from a Redis list, as MinIO's Redis target
in ``access`` format RPUSHes them.

Read reliably: each message is moved (BLMOVE) into ``KEY:processing`` and removed from there
(LREM) only after its jobs were queued. On start, what a killed listener left in the
processing list is handled first. One listener per list: a second one on the same list would
handle the first's messages in hand again when it starts (harmless, they are duplicates).
The Redis is ``events_redis_url``, else the broker's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from imgwarm.events.listen import Listener, keep_trying
from imgwarm.events.out import connect
from imgwarm.exceptions import ImgwarmError
from imgwarm.text import printable

if TYPE_CHECKING:
    import redis

T = TypeVar("T")
WAIT = 1  # seconds a BLMOVE waits, so a stop is seen within about that


class RedisListSource:
    """One Redis list."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.key = key
        self.processing = f"{key}:processing"
        self.name = "redis"
        # the socket waits longer than a BLMOVE does
        self.client: redis.Redis = connect(url, timeout=WAIT + 5)

    def check(self) -> None:
        try:
            self.client.ping()
        except Exception as error:  # redis-py's kinds
            raise ImgwarmError(f"--redis-list {printable(self.key)}: cannot reach Redis: "
                               f"{printable(str(error))}") from None

    def run(self, listener: Listener, stop: threading.Event) -> None:
        left: list[Any] = self._call(listener, stop, lambda: self.client.lrange(
            self.processing, 0, -1)) or []
        for body in left:  # a killed listener's messages in hand, first
            if stop.is_set() or not self._one(listener, body, stop):
                return
        while not stop.is_set():
            body = self._call(listener, stop, lambda: self.client.blmove(
                self.key, self.processing, WAIT, "LEFT", "RIGHT"))
            if body is not None and not self._one(listener, body, stop):
                return

    def _one(self, listener: Listener, body: bytes, stop: threading.Event) -> bool:
        if not keep_trying(listener, body, self.name, stop):
            return False  # left in the processing list: handled at the next start
        value: Any = body  # redis-py's stubs say str; bytes are taken as they are
        self._call(listener, stop, lambda: self.client.lrem(self.processing, 1, value),
                   until_done=True)
        return True

    def _call(self, listener: Listener, stop: threading.Event, call: Callable[[], T],
              until_done: bool = False) -> T | None:
        """``call()``, through a Redis that is away for a while (None when stopped)."""
        while not stop.is_set() or until_done:
            try:
                return call()
            except Exception as error:  # redis-py's kinds: Redis restarted, a timeout
                listener.say("unreachable", str(error), self.name, about="error")
                if stop.wait(1) and until_done:
                    return None
        return None
