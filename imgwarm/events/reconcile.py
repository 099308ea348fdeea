"""Reconcile: the originals listed, and a job queued for each that events missed: one with no
record, or whose original is newer than its record (a manifest or a failure: the record
object's own time, LastModified in S3 or mtime in a local store, against the original's;
both from the same clock) or than its takedown (a tombstone's ``deleted``: the deleting
process's clock, against the store's). A taken-down source whose original was not replaced
since stays down.

The listing is streamed (S3 pages of 1000, a local walk), never held. Each original costs one
record read, and one HEAD or stat when it has a manifest: run it every few minutes, not every
second, on a large bucket. An original re-uploaded with the same bytes keeps its older manifest
(the job finds nothing to make), so each version (key, time) is queued once: a mark in Redis
says so (for a week; an hour for one with no record yet).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError
from imgwarm.manifest import Tombstone
from imgwarm.store import Stores, check_source_key
from imgwarm.store.references import key_digest

if TYPE_CHECKING:
    import redis

Why = Literal["no record", "newer than its record", "newer than its takedown"]
MARK_PREFIX = "imgwarm:listen:reconciled:"
MARK_TTL = 7 * 24 * 3600  # a version whose job found nothing to change: not again
MARK_TTL_NEW = 3600  # one with no record yet: its job may wait in a long queue; after an hour
# (a queue lost with its Redis) it is queued again


@dataclass
class Reconciled:
    listed: int = 0
    queued: int = 0
    skipped: int = 0  # not a source key (imgwarm's own files in a local origin, unsafe names)


def record_time(stores: Stores, key: str) -> float | None:
    """When the record of ``key`` was last written; None when it cannot be told."""
    store = stores.manifests.store
    path = stores.manifests.key_path(key)
    client = getattr(store, "client", None)
    if client is not None:  # S3Store (boto3 is imported only with an S3 origin)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = client.head_object(Bucket=store.bucket, Key=store.object_key(path))  # type: ignore[attr-defined]
        except (BotoCoreError, ClientError):
            return None
        return float(found["LastModified"].timestamp())
    local = getattr(store, "path", None)
    if callable(local):
        try:
            return os.stat(local(path), follow_symlinks=False).st_mtime
        except OSError:
            return None
    return None


def why_make(key: str, modified: float, stores: Stores) -> Why | None:
    """Why the original at ``key`` (last written at ``modified``) needs a job; None: it does
    not."""
    record = stores.manifests.read(key)
    if record is None:
        return "no record"
    if isinstance(record, Tombstone):
        return "newer than its takedown" if modified > record.deleted else None
    written = record_time(stores, key)
    return "newer than its record" if written is None or modified > written else None


def reconcile(settings: Settings, stores: Stores, queue: Callable[[str, Why], None],
              client: redis.Redis | None = None, stop: threading.Event | None = None
              ) -> Reconciled:
    """List the originals under ``originals_prefix``; ``queue(key, why)`` each that needs
    its job (once a version, when ``client`` keeps the marks); until ``stop`` is set."""
    done = Reconciled()
    under = settings.events.originals_prefix.rstrip("/")
    for path, modified in stores.origin.stamped(under):
        if stop is not None and stop.is_set():
            break
        key = str(path)
        done.listed += 1
        try:
            check_source_key(key)  # variants and hidden files of a local origin
        except ImgwarmError:
            done.skipped += 1
            continue
        why = why_make(key, modified, stores)
        if why is None:
            continue
        mark = MARK_PREFIX + key_digest(key)
        if client is not None and client.get(mark) == f"{modified:.3f}".encode():
            continue  # this version was queued before: its job found nothing to change
        queue(key, why)
        done.queued += 1
        if client is not None:
            client.set(mark, f"{modified:.3f}",
                       ex=MARK_TTL_NEW if why == "no record" else MARK_TTL)
    return done
