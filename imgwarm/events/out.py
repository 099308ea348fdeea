"""Events out: what a publish, a final failure and a takedown tell the world, added to a Redis
stream (``events_stream``) that cache boxes follow and the webhook deliverer reads.

An event is one JSON object in the stream entry's ``event`` field:

    {"type": "published" | "failed" | "deleted", "key": source key, "time": unix seconds,
     "variants": [{"path", "format", "width", "height", "bytes"}...],   (published)
     "manifest": the manifest's JSON (what ``picture`` needs),          (published)
     "error": one line,                                                 (failed)
     "removed": [variant paths taken down]}                             (deleted)

Adding one never fails or blocks the job that made it (a Redis that is away costs a warning:
the journal and the periodic warm still carry the change).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from imgwarm.config import Settings
from imgwarm.manifest import Manifest, SourceResult

if TYPE_CHECKING:
    import redis

log = logging.getLogger("imgwarm.events")
Kind = Literal["published", "failed", "deleted"]
FIELD = "event"  # the stream entry's field holding the JSON
# seconds a connection or a command may take: a job waits at most twice this (one retry) on
# an outbox that is away, and not at all on one that refuses connections
SEND_TIMEOUT = 2.0


def published(manifest: Manifest, *, now: float | None = None) -> dict[str, Any]:
    return {"type": "published", "key": manifest.key, "time": now or time.time(),
            "variants": [{"path": v.path, "format": v.format, "width": v.width,
                          "height": v.height, "bytes": v.bytes} for v in manifest.variants],
            "manifest": manifest.model_dump(mode="json")}


def failed(key: str, error: str, *, now: float | None = None) -> dict[str, Any]:
    return {"type": "failed", "key": key, "time": now or time.time(), "error": error}


def deleted(key: str, removed: list[str], *, now: float | None = None) -> dict[str, Any]:
    return {"type": "deleted", "key": key, "time": now or time.time(), "removed": removed}


def stream_url(settings: Settings, *, explicit_only: bool = False) -> str | None:
    """The Redis URL of the stream: ``events_redis_url``, else (unless ``explicit_only``: an
    in-process command on a box that may have no Redis) the broker's when it is Redis."""
    if settings.events.events_redis_url:
        return settings.events.events_redis_url
    broker = settings.queue.broker_url
    if explicit_only or not broker.startswith(("redis://", "rediss://", "unix://")):
        return None
    return broker


def connect(url: str, *, timeout: float | None = SEND_TIMEOUT,
            retries: int = 1) -> redis.Redis:
    """A client whose every command is bounded: ``retries`` more attempts at once (a pooled
    connection a restarted Redis closed is made again), never redis-py's default of ten with
    backoff (a Redis that is away would hold a job for half a minute)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                retry=Retry(NoBackoff(), retries))


class Outbox:
    """Adds events to the stream; one connection, made on first use."""

    def __init__(self, settings: Settings, *, explicit_only: bool = False) -> None:
        self.url = stream_url(settings, explicit_only=explicit_only)
        self.stream = settings.events.events_stream
        self.max_len = settings.events.events_max_len
        self._client: redis.Redis | None = None

    @property
    def enabled(self) -> bool:
        return self.url is not None

    def add(self, event: dict[str, Any]) -> str | None:
        """The entry's id; None (with a warning logged) when no stream is set or it is away."""
        if self.url is None:
            return None
        body = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        try:
            if self._client is None:
                self._client = connect(self.url)
            found = self._client.xadd(self.stream, {FIELD: body}, maxlen=self.max_len,
                                      approximate=True)
        except Exception as error:  # redis-py's own kinds; the job goes on regardless
            self._client = None
            log.warning("event for %s not added to the stream %s: %s (followers catch up "
                        "from the journal)", event.get("key"), self.stream, error)
            return None
        return found.decode() if isinstance(found, bytes) else str(found)


def told(results: Iterable[SourceResult], outbox: Outbox,
         key: Callable[[str], str] = str) -> Iterator[SourceResult]:
    """``results`` as they come, each told to the outbox on its way (an in-process batch:
    ``imgwarm optimize``): a manifest is published, an error failed (``key`` turns the source
    as given into its manifest key)."""
    for result in results:
        if outbox.enabled:
            if result.manifest is not None:
                outbox.add(published(result.manifest))
            elif result.error is not None:
                outbox.add(failed(key(result.source), result.error))
        yield result


def parse(fields: dict[Any, Any]) -> dict[str, Any] | None:
    """An entry's event; None for one that is not ours or is damaged (never fatal)."""
    raw = fields.get(FIELD.encode()) or fields.get(FIELD)
    if raw is None or len(raw) > 16 << 20:
        return None
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict) or event.get("type") not in ("published", "failed",
                                                                "deleted") \
            or not isinstance(event.get("key"), str):
        return None
    return event


def entries(reply: Any) -> list[tuple[bytes, Any]]:
    """The (id, fields) entries of an XREADGROUP reply on one stream (redis-py's RESP2 shape);
    a trimmed entry still pending has no fields (None)."""
    return [(entry, fields) for entry, fields in reply[0][1]] if reply else []


def join_group(url: str, stream: str, group: str, *, block: float) -> redis.Redis:
    """A client for a reader of the stream (reads block up to ``block`` seconds: its socket
    waits longer), its consumer group made at the end (``$``) the first time."""
    import redis

    client = connect(url, timeout=block + 5.0, retries=0)
    try:
        client.xgroup_create(stream, group, id="$", mkstream=True)
    except redis.ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise
    return client


def pending(client: redis.Redis, stream: str, group: str,
            consumer: str) -> list[tuple[bytes, Any]]:
    """The consumer's entries read before and never acknowledged (it was killed, or what
    it did with them failed), oldest first."""
    found: list[tuple[bytes, Any]] = []
    after = "0"
    while got := entries(client.xreadgroup(group, consumer, {stream: after}, count=1000)):
        found += got
        after = got[-1][0].decode()
    return found


def gone(client: redis.Redis | None) -> None:
    """Let a reader's connection go (it may be broken already)."""
    if client is not None:
        try:
            client.close()
        except Exception as error:  # a connection already broken
            log.debug("closing the events stream: %s", error)


def reason(error: BaseException) -> str:
    """An error of the stream in a few words, on one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
