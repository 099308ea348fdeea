"""Reconcile against a local origin: what has no record, or a record or takedown older than
its original, is queued, once a version; what is up to date, taken down, or imgwarm's own is
not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import redis

from imgwarm.config import Settings
from imgwarm.events.reconcile import reconcile, why_make
from imgwarm.manifest import Failure, Tombstone
from imgwarm.store import Stores
from tests.support.listening import photo
from tests.support.servers import RedisServer


def _original(settings: Settings, key: str, modified: float) -> None:
    path = Path(settings.store.origin_root) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(photo(len(key)))
    os.utime(path, (modified, modified))


def test_what_reconcile_queues(settings: Settings, stores: Stores,
                               redis_server: RedisServer) -> None:
    past, future = time.time() - 3600, time.time() + 3600
    _original(settings, "new.jpg", past)
    _original(settings, "failed.jpg", past)
    stores.manifests.put(Failure(key="failed.jpg", source_sha256=None, settings_digest="x",
                                 failed="failed.jpg: it did"))
    _original(settings, "down.jpg", past)
    stores.manifests.put(Tombstone(key="down.jpg", deleted=time.time(), variants=[]))
    _original(settings, "ab/cd/photo.0123456789abcdef0123.webp", past)  # a variant
    assert why_make("failed.jpg", past, stores) is None  # a failure counts as done
    assert why_make("failed.jpg", future, stores) == "newer than its record"
    assert why_make("down.jpg", past, stores) is None  # taken down stays down
    assert why_make("down.jpg", future, stores) == "newer than its takedown"

    client = redis.Redis(port=redis_server.port, db=901)
    client.flushdb()
    queued: list[tuple[str, str]] = []
    done = reconcile(settings, stores, lambda key, why: queued.append((key, why)), client)
    assert queued == [("new.jpg", "no record")]
    # (the store's format record, written by the first write, is listed and passed over as
    # the variant is)
    assert (done.listed, done.queued, done.skipped) == (5, 1, 2)
    reconcile(settings, stores, lambda key, why: queued.append((key, why)), client)
    assert len(queued) == 1  # the same version: not again while its job may wait
    _original(settings, "down.jpg", future)  # uploaded again after its takedown
    reconcile(settings, stores, lambda key, why: queued.append((key, why)), client)
    assert queued[1:] == [("down.jpg", "newer than its takedown")]
