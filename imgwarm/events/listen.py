"""``imgwarm listen``: bucket notifications from SQS, a Redis list or a webhook become jobs.

Each message body is parsed (notification.py), each change in it ordered per key (order.py),
then an ObjectCreated queues the source's job (``enqueue_all``) and an ObjectRemoved its
takedown (``enqueue_delete``, what ``imgwarm delete`` does). A message is acknowledged (SQS
delete, Redis LREM, HTTP 2xx) only after its jobs were queued: a listener killed between the
two handles it again (at-least-once), which is harmless since jobs are idempotent and a
repeated event is a duplicate. A malformed or oversized message is one line, counted and
acknowledged (it will never read better); one whose jobs could not be queued (the broker
away) is not acknowledged, and comes back.

An ObjectRemoved always queues the takedown (``when_gone``), even for a key with no manifest
yet: jobs run in any order, so the takedown checks when it runs that the original is still
gone (one uploaded anew since is kept), and tombstones a key never made, so that a make still
running from its upload does not publish it after (optimize checks the record before its
manifest goes in).

Every source runs in a thread of its own; handling is serialized by one lock, so that two
events of one key from two sources are checked and recorded in turn.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from imgwarm.config import Settings
from imgwarm.events.notification import Change, parse
from imgwarm.events.order import Order
from imgwarm.exceptions import ImgwarmError, MalformedEvent
from imgwarm.text import printable
from imgwarm.workers.client import enqueue_all, enqueue_delete

log = logging.getLogger("imgwarm.events")
Result = Literal["handled", "malformed", "failed"]
RETRY_PAUSE = 1.0  # seconds between tries of a message whose jobs could not be queued


@dataclass
class Counters:
    """What a listener did, since it started."""

    received: int = 0  # message bodies taken from the sources
    queued: int = 0  # make jobs queued (ObjectCreated)
    deleted: int = 0  # takedowns queued (ObjectRemoved)
    duplicates: int = 0
    older: int = 0
    ignored_test: int = 0
    ignored_outside: int = 0
    ignored_own: int = 0
    ignored_other: int = 0  # events of other kinds (ACL, tagging, restore)
    malformed: int = 0
    failed: int = 0  # messages whose jobs could not be queued (they come back)
    reconciled: int = 0  # jobs a reconcile queued
    reconcile_failed: int = 0  # reconcile runs that failed (the store or the broker away)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, count: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + count)

    def to_object(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "lock"}


class Source(Protocol):
    """A place message bodies come from; ``run`` hands each to ``listener.handle`` and
    acknowledges it when that says so, until ``stop`` is set."""

    name: str

    def check(self) -> None:
        """ImgwarmError (one line) when the source cannot be used: before anything starts."""
        ...

    def run(self, listener: Listener, stop: threading.Event) -> None: ...


class Listener:
    """Turns message bodies into jobs; prints one line per event."""

    def __init__(self, settings: Settings, order: Order, *, as_json: bool = False,
                 echo: Callable[[str], None] = print,
                 to_json: Callable[[Any], str] = json.dumps) -> None:
        self.settings = settings
        self.order = order
        self.as_json = as_json
        self._echo = echo
        self._json = to_json  # the CLI's: UTF-8 where stdout is, escapes elsewhere
        self.counters = Counters()
        self._lock = threading.Lock()  # one message at a time: check, queue, commit

    def say(self, what: str, subject: str, source: str, *, about: str = "key",
            **more: Any) -> None:
        """One line: ``what subject (source) more...``, or its JSON (``subject`` under
        ``about``: the key, or the error's line)."""
        if self.as_json:
            self._echo(self._json({"event": what, about: subject, "source": source, **more}))
        else:
            extra = "".join(f" {k}={v}" for k, v in more.items() if v not in ("", None))
            self._echo(printable(f"{what} {subject} ({source}){extra}"))

    def handle(self, body: bytes, source: str) -> Result:
        """Handle one message: "handled" or "malformed" (acknowledge it), "failed" (its jobs
        were not all queued: leave it to come back)."""
        self.counters.add("received")
        try:
            parsed = parse(body, self.settings)
        except MalformedEvent as error:
            self.counters.add("malformed")
            self.say("malformed", str(error), source, about="error")
            return "malformed"
        except Exception as error:  # a message the reader trips on must not come back forever
            self.counters.add("malformed")
            self.say("malformed", f"{type(error).__name__}: {error}", source, about="error")
            return "malformed"
        for why, subject in parsed.ignored:
            self.counters.add(f"ignored_{why}")
            self.say(f"ignored-{why}", subject, source)
        try:
            with self._lock:
                for change in parsed.changes:
                    self._change(change, source)
        except Exception as error:  # the broker (BrokerError) or the order's Redis away
            self.counters.add("failed")
            line = str(error) if isinstance(error, ImgwarmError) else \
                f"{type(error).__name__}: {error}"
            self.say("failed", f"{line} (the message comes back)", source, about="error")
            return "failed"
        return "handled"

    def _change(self, change: Change, source: str) -> None:
        verdict = self.order.check(change)
        if verdict != "new":
            self.counters.add("duplicates" if verdict == "duplicate" else "older")
            self.say("duplicate" if verdict == "duplicate" else "older", change.key, source,
                     kind=change.kind, sequencer=change.sequencer)
            return
        if change.kind == "created":
            enqueue_all([change.key], self.settings)
            self.counters.add("queued")
        else:
            enqueue_delete(change.key, when_gone=True, settings=self.settings)
            self.counters.add("deleted")
        self.order.commit(change)  # after the job: a crash before this handles it again
        self.say("queued" if change.kind == "created" else "takedown", change.key, source,
                 sequencer=change.sequencer)

    def summary(self) -> str:
        found = self.counters.to_object()
        if self.as_json:
            return self._json({"summary": found})
        return "listen: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in found.items())


def keep_trying(listener: Listener, body: bytes, source: str, stop: threading.Event) -> bool:
    """Handle a message until it is handled (True: acknowledge it) or ``stop`` is set (False:
    leave it unacknowledged, it comes back)."""
    while True:
        if listener.handle(body, source) != "failed":
            return True
        if stop.wait(RETRY_PAUSE):
            return False


def run_sources(sources: list[Source], listener: Listener, stop: threading.Event,
                extra: list[Callable[[], None]] | None = None) -> list[str]:
    """Each source (and each of ``extra``, e.g. the periodic reconcile) in a thread until
    ``stop`` is set or one of them fails; the lines of those that failed."""
    failures: list[str] = []

    def guarded(name: str, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception as error:  # a source that cannot go on ends the process
            failures.append(printable(f"{name}: {error}"))
            stop.set()

    threads = [threading.Thread(target=guarded, args=(s.name, lambda s=s: s.run(listener, stop)),
                                name=f"listen-{s.name}") for s in sources]
    threads += [threading.Thread(target=guarded, args=("reconcile", call), name="reconcile")
                for call in extra or []]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        for thread in threads:
            thread.join(0.2)
    return failures


def reconcile_loop(listener: Listener, stop: threading.Event, every: float | None,
                   at_start: bool, client: Any) -> Callable[[], None]:
    """The periodic reconcile, for a thread: once at the start when asked, then every
    ``every`` seconds (None: never again); a run that fails is one line, the next goes on."""
    from imgwarm.events.reconcile import reconcile
    from imgwarm.store import Stores
    from imgwarm.store.format import ACT

    settings = listener.settings

    def queue(key: str, why: str) -> None:
        enqueue_all([key], settings)
        listener.counters.add("reconciled")
        listener.say("reconciled", key, "reconcile", why=why)

    def once() -> None:
        try:
            stores = Stores.for_settings(settings.store)
            stores.check(ACT)  # it queues takedowns by what it reads: a newer store's format
            done = reconcile(settings, stores, queue, client, stop)  # is no guess
        except Exception as error:  # the store or the broker away, or too new: the next run
            listener.counters.add("reconcile_failed")
            listener.say("reconcile-failed", str(error), "reconcile", about="error")
        else:
            listener.say("reconcile-done", f"{done.listed} listed", "reconcile",
                         about="listed", queued=done.queued)

    def loop() -> None:
        if at_start:
            once()
        while every is not None and not stop.wait(every):
            once()

    return loop


def listen(settings: Settings, sources: list[Source], listener: Listener,
           stop: threading.Event, *, reconcile_every: float | None = None,
           reconcile_at_start: bool = False) -> list[str]:
    """Run every source (each checked first: ImgwarmError before anything starts) and the
    reconcile until ``stop`` is set; the lines of the sources that failed."""
    for source in sources:
        source.check()
    extra = []
    if reconcile_at_start or reconcile_every is not None:
        extra.append(reconcile_loop(listener, stop, reconcile_every, reconcile_at_start,
                                    listener.order.client))
    return run_sources(sources, listener, stop, extra)
