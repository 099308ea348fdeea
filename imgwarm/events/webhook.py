"""The signed webhook: each event of the stream POSTed to ``notify_url``, retried until a 2xx.

The deliverer reads the stream with its own consumer group (``imgwarm-webhook``), so it sees
every event once whatever the cache boxes do, and a restart resumes what it had not delivered
(its pending entries). Each POST carries:

    Content-Type: application/json
    X-Imgwarm-Event-Id: the stream entry's id (the same on every retry; also "id" in the body)
    X-Imgwarm-Signature: t=UNIX_TIME,v1=HEX   HEX = HMAC-SHA256(notify_secret, f"{t}.{body}")

like Stripe's, so a receiver checks it with ``verify`` (a copy of which it can keep: the
docs show it). A 2xx acknowledges the entry; anything else (an error status, a redirect, no
answer within ``notify_timeout``) schedules it again, with jittered exponential backoff from
1 s to 5 min, until ``notify_give_up`` after the event's time: then it is dropped with one line.
One event backing off never holds the others back.

HTTP: the standard library's urllib, with redirects refused (a webhook that moved is an
error to see, and a POST must not turn into a GET) and a timeout on every socket operation:
one small POST at a time needs no connection pool, and the worker image gets no dependency.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from imgwarm.config import Settings
from imgwarm.events.out import entries, gone, join_group, parse, pending, reason, stream_url
from imgwarm.exceptions import SettingsError

if TYPE_CHECKING:
    import redis

log = logging.getLogger("imgwarm.events")
GROUP = "imgwarm-webhook"
CONSUMER = "notify"
FIRST, MOST = 1.0, 300.0  # seconds of backoff: the first retry, the longest wait
AWAY_FIRST, AWAY_MOST = 1.0, 30.0  # seconds between reconnections to a stream that is away
BLOCK = 1.0  # seconds a read of the stream waits at most
SIGNATURE = "X-Imgwarm-Signature"
EVENT_ID = "X-Imgwarm-Event-Id"


def sign(secret: str, body: bytes, at: int) -> str:
    """The ``X-Imgwarm-Signature`` value of ``body`` sent at ``at`` (unix seconds)."""
    mac = hmac.new(secret.encode(), str(at).encode() + b"." + body, hashlib.sha256)
    return f"t={at},v1={mac.hexdigest()}"


def verify(secret: str, header: str, body: bytes, tolerance: float = 300,
           now: float | None = None) -> bool:
    """A receiver's check: ``header`` (X-Imgwarm-Signature) signs these very ``body`` bytes
    with ``secret``, and was made within ``tolerance`` seconds of ``now`` (a replay of an old
    request fails). Compare in constant time; never parse the body before this is True."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    try:
        at = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - at) > tolerance:
        return False
    expected = sign(secret, body, at).rsplit("=", 1)[1]
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))


@dataclass
class Waiting:
    """An entry not delivered yet: its body, how many tries, when the next."""

    body: bytes
    key: str
    born: float  # the event's time: it is given up notify_give_up after it
    tries: int = 0
    due: float = 0.0


@dataclass
class Counts:
    delivered: int = 0
    failed: int = 0  # attempts that got no 2xx
    dropped: int = 0  # given up, or not an event
    waiting: dict[str, Waiting] = field(default_factory=dict)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None  # a 3xx is an answer that is not a 2xx: the event is retried


class Deliverer:
    """Reads the stream's ``imgwarm-webhook`` group and POSTs each event, signed."""

    def __init__(self, settings: Settings, *, stop: threading.Event | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        events = settings.events
        url = stream_url(settings)
        if not events.notify_url or not events.notify_secret:
            raise SettingsError("notify_url: imgwarm notify needs notify_url and "
                                "notify_secret (IMGWARM_NOTIFY_URL, IMGWARM_NOTIFY_SECRET)")
        if url is None:
            raise SettingsError("events_redis_url: imgwarm notify reads the events stream "
                                "(set events_redis_url, or a redis:// broker_url)")
        self.url, self.stream, self.target = url, events.events_stream, events.notify_url
        self.secret, self.timeout = events.notify_secret, float(events.notify_timeout)
        self.give_up = float(events.notify_give_up)
        self.stop = stop or threading.Event()
        self.say = say or log.warning
        self.opener = urllib.request.build_opener(_NoRedirect())
        self.client: redis.Redis | None = None
        self.counts = Counts()
        self.fresh = True  # read this consumer's pending entries first (after a restart)

    def run(self, *, once: bool = False) -> Counts:
        """Deliver until stopped; ``once``: what is in the stream now (each tried once),
        then return."""
        pause, away = AWAY_FIRST, None
        while not self.stop.is_set():
            try:
                took = self._read(0 if once else self._wait())
                self._deliver_due(everything=once)
            except Exception as error:  # redis-py's kinds: the stream is away
                if away is None:  # one line when it goes, one when it is back
                    away = time.monotonic()
                    self.say(f"notify: events stream {self.stream} away ({reason(error)}); "
                             "reconnecting with backoff")
                self._drop()
                if once:
                    break
                self.stop.wait(pause)
                pause = min(pause * 2, AWAY_MOST)
                continue
            if away is not None:
                self.say(f"notify: events stream {self.stream} back after "
                         f"{time.monotonic() - away:.0f} s")
                away, pause = None, AWAY_FIRST
            if once and not took:
                break
        self._drop()
        return self.counts

    def _drop(self) -> None:
        """Let the connection go (made again on the next read)."""
        gone(self.client)
        self.client, self.fresh = None, True

    def _wait(self) -> float:
        """How long a read may block: until the next retry is due, at most BLOCK."""
        due = min((w.due for w in self.counts.waiting.values()), default=None)
        return BLOCK if due is None else max(0.0, min(BLOCK, due - time.time()))

    def _connect(self) -> redis.Redis:
        if self.client is None:
            self.client = join_group(self.url, self.stream, GROUP, block=BLOCK)
        return self.client

    def _read(self, seconds: float) -> int:
        """Entries read into ``waiting`` (due at once): pending ones after a start, then new."""
        import redis

        client = self._connect()
        took = 0
        try:
            if self.fresh:
                took += self._take(pending(client, self.stream, GROUP, CONSUMER))
                self.fresh = False
            block = int(seconds * 1000) if seconds >= 0.001 else None
            took += self._take(entries(client.xreadgroup(
                GROUP, CONSUMER, {self.stream: ">"}, count=100, block=block)))
        except redis.ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            # (a Redis restarted empty: what was read and not delivered yet is still sent)
            self.say(f"notify: group {GROUP} on {self.stream} not found; made again (events "
                     "added while it was gone are not delivered)")
            self._drop()
        return took

    def _take(self, found: list[tuple[bytes, Any]]) -> int:
        for raw_id, fields in found:
            entry = raw_id.decode()
            event = parse(fields) if fields else None
            if event is None:  # trimmed before it was delivered, or not ours
                self.counts.dropped += 1
                self._ack(entry, "not an event (trimmed, or not imgwarm's)")
                continue
            body = json.dumps({"id": entry, **event}, ensure_ascii=False,
                              separators=(",", ":")).encode()
            born = event.get("time")
            self.counts.waiting.setdefault(entry, Waiting(
                body, event["key"], float(born) if isinstance(born, int | float) else
                time.time()))
        return len(found)

    def _deliver_due(self, *, everything: bool = False) -> None:
        now = time.time()
        for entry, waiting in sorted(self.counts.waiting.items(), key=lambda i: i[1].due):
            if self.stop.is_set():
                return
            if waiting.due > now and not (everything and waiting.tries == 0):
                continue
            answer = self.post(entry, waiting.body)
            waiting.tries += 1
            if answer is None:
                self.counts.delivered += 1
                self._ack(entry)
                continue
            self.counts.failed += 1
            if time.time() - waiting.born > self.give_up:
                self.counts.dropped += 1
                self._ack(entry, f"given up after {waiting.tries} tries ({answer}; "
                          f"notify_give_up {self.give_up:g} s)")
                continue
            wait = min(MOST, FIRST * 2 ** (waiting.tries - 1)) * random.uniform(0.5, 1.0)
            waiting.due = time.time() + wait
            self.say(f"notify: {entry} ({waiting.key}): {answer}; again in {wait:.0f} s")

    def post(self, entry: str, body: bytes) -> str | None:
        """POST one event; None on a 2xx, else what went wrong in a few words."""
        request = urllib.request.Request(self.target, data=body, method="POST", headers={
            "Content-Type": "application/json", EVENT_ID: entry,
            SIGNATURE: sign(self.secret, body, int(time.time())),
            "User-Agent": "imgwarm-notify"})
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                response.read(1 << 16)  # (the answer's body is not used: a little of it)
                status = int(response.status)
        except urllib.error.HTTPError as error:
            error.close()
            return f"HTTP {error.code}"
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            return f"no answer ({' '.join(str(reason).split())[:200]})"
        return None if 200 <= status < 300 else f"HTTP {status}"

    def _ack(self, entry: str, dropped: str | None = None) -> None:
        self.counts.waiting.pop(entry, None)
        if dropped is not None:
            self.say(f"notify: {entry} dropped: {dropped}")
        if self.client is not None:
            self.client.xack(self.stream, GROUP, entry)

