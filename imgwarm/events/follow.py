"""``warm --follow``: a cache box's consumer group on the events stream, waking warm.

The events only wake the box; what changed is read, as ever, from the manifest store's journal
by one incremental ``warm`` run (so the lifecycle's invariants and the index hold as they do
without events). Entries are acknowledged after the run that covered them ended without an
error; a box killed before that reads its own pending entries again when it starts (id 0).

Each box has its own group (``follow_group``: by default the host's name and its state
folder's), made at ``$`` on first start: a new box fills itself from the journal (its first
run lists every manifest), not from the stream's history. A Redis that is away costs one line
and a reconnection with backoff; the periodic runs go on, and the first run after it is back
catches up from the journal (as does one after the group was lost: a Redis restarted empty).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from imgwarm.config import Settings
from imgwarm.events.out import entries, gone, join_group, parse, pending, reason, stream_url
from imgwarm.exceptions import SettingsError

if TYPE_CHECKING:
    import redis

log = logging.getLogger("imgwarm.events")
BLOCK = 1.0  # seconds an XREADGROUP waits at most (the stop is checked between)
COUNT = 100  # entries a read takes
DRAIN = 20  # reads taken at once when a burst came (one run covers them all)
CONSUMER = "warm"  # one consumer a group (a box): its pending entries are found by name
AWAY_FIRST, AWAY_MOST = 1.0, 30.0  # seconds between reconnections: doubling, capped
WAKING = ("published", "deleted")  # a failure changes nothing in the tiers


def group_name(settings: Settings) -> str:
    """This box's consumer group: the setting, else warm-<host>-<8 hex of cache_state>."""
    if settings.events.follow_group:
        return settings.events.follow_group
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:100] or "host"
    state = os.path.abspath(settings.cache.cache_state)
    return f"warm-{host}-{hashlib.sha256(state.encode()).hexdigest()[:8]}"


class Follower:
    """The Waker of ``cache.service.keep_warm`` reading this box's group."""

    def __init__(self, settings: Settings, *, stop: threading.Event | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        url = stream_url(settings)
        if url is None:
            raise SettingsError("events_redis_url: warm --follow needs the events stream "
                                "(set events_redis_url, or a redis:// broker_url)")
        self.url, self.stream = url, settings.events.events_stream
        self.group = group_name(settings)
        self.stop = stop or threading.Event()
        self.say = say or log.warning
        self.client: redis.Redis | None = None
        self.taken: list[bytes] = []  # read, to be acknowledged after the next run
        self.fresh = True  # read this consumer's pending entries (id 0) before new ones
        self.away: float | None = None  # since when the stream is away (monotonic)
        self.pause, self.next_try = AWAY_FIRST, 0.0

    # -- the Waker

    def wait(self, seconds: float) -> bool:
        if self.client is None:
            left = self.next_try - time.monotonic()
            if left > 0:
                self.stop.wait(min(left, max(seconds, 0.0)))
                return False
            if not self._connect():
                return False
            if self.away is not None:  # back: what was published meanwhile is in the journal
                self.say(f"events stream {self.stream} back after "
                         f"{time.monotonic() - self.away:.0f} s (group {self.group})")
                self.away = None
                self._read(0)
                return True
        return self._read(seconds)

    def ran(self, ok: bool) -> None:
        if not ok or not self.taken or self.client is None:
            return
        taken, self.taken = self.taken, []
        try:
            for start in range(0, len(taken), 1000):
                self.client.xack(self.stream, self.group, *taken[start:start + 1000])
        except Exception as error:  # read again as pending once back: one more run
            self._lost(error)

    def close(self) -> None:
        gone(self.client)
        self.client = None

    # -- the stream

    def _connect(self) -> bool:
        try:
            client = join_group(self.url, self.stream, self.group, block=BLOCK)
        except Exception as error:
            self._lost(error)
            return False
        self.client, self.fresh, self.pause = client, True, AWAY_FIRST
        return True

    def _lost(self, error: BaseException) -> None:
        if self.away is None:  # one line when it goes, one when it is back
            self.away = time.monotonic()
            self.say(f"events stream {self.stream} away ({reason(error)}); reconnecting "
                     "with backoff, the journal still carries the changes to the periodic runs")
        gone(self.client)
        self.client, self.taken = None, []  # still pending there: read again once back
        self.next_try = time.monotonic() + self.pause
        self.pause = min(self.pause * 2, AWAY_MOST)

    def _read(self, seconds: float) -> bool:
        """Take what is there (this consumer's pending entries first, after a start), or
        wait for it up to ``seconds``; True when something in it wants a run."""
        import redis

        assert self.client is not None
        woken = False
        try:
            if self.fresh:
                woken = self._take(pending(self.client, self.stream, self.group, CONSUMER))
                self.fresh = False
            block = None if woken or seconds < 0.001 else int(min(seconds, BLOCK) * 1000)
            for _ in range(DRAIN):
                got = self.client.xreadgroup(self.group, CONSUMER, {self.stream: ">"},
                                             count=COUNT, block=block)
                found = entries(got)
                woken = self._take(found) or woken
                if len(found) < COUNT:
                    break
                block = None  # a burst: the rest that is there, without waiting
        except redis.ResponseError as error:
            if "NOGROUP" not in str(error):
                self._lost(error)
                return False
            # the group (or the stream) is gone: a Redis restarted empty, a stream deleted.
            # Made again at "$"; the journal tells the run what came meanwhile.
            self.say(f"events stream {self.stream}: group {self.group} not found; made "
                     "again (a run catches up from the journal)")
            self.close()
            self._connect()
            return True
        except Exception as error:
            self._lost(error)
            return False
        return woken

    def _take(self, found: list[tuple[bytes, Any]]) -> bool:
        """Entries that want a run kept for the next (acknowledged after it); the others (a
        failure changes no tier) acknowledged at once. True when any wants a run."""
        assert self.client is not None
        quiet = []
        for entry, fields in found:
            event = parse(fields) if fields else None  # (a trimmed entry has no fields)
            if event is None or event["type"] in WAKING:  # unknown: a run is the safe side
                self.taken.append(entry)
            else:
                quiet.append(entry)
        if quiet:
            self.client.xack(self.stream, self.group, *quiet)
        return len(quiet) < len(found)

