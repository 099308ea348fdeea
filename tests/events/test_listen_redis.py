"""`imgwarm listen --redis-list`: MinIO's Redis target in access format, with duplicates,
events delivered out of order, malformed and oversized ones, and what a killed listener left
in its processing list."""

from __future__ import annotations

import uuid

import redis

from imgwarm.manifest import Tombstone
from tests.support.listening import Listening, minio_access, photo, wait_made
from tests.support.queues import Queue
from tests.support.servers import wait_for


def test_minio_access_events_in_order_once_and_bad_ones_counted(events_queue: Queue) -> None:
    queue, bucket = events_queue, events_queue.bucket
    client = redis.Redis.from_url(queue.values["broker_url"])
    events = f"bucketevents-{uuid.uuid4().hex[:8]}"
    left, twice, late = "redis/left.jpg", "redis/twice over.jpg", "redis/late.jpg"
    for number, key in enumerate([left, twice, late]):
        queue.put(key, photo(400 + number))
    # a listener killed with a message in hand left it in its processing list
    client.rpush(f"{events}:processing", minio_access("created", bucket, left, "0A00"))
    client.rpush(events, *[
        minio_access("created", bucket, twice, "1000"),
        minio_access("created", bucket, twice, "1000"),  # delivered again: a duplicate
        b"not json {",
        b"[" * 300 + b"]" * 300,  # too deep
        b'{"hello": "world"}',  # not a notification
        b'{"Records": [' + b" " * 3000 + b"]}",  # over event_max_bytes
        # removed (newer) delivered before created (older): the original stays unmade
        # (still in the bucket here, so its takedown finds it back and leaves it)
        minio_access("removed", bucket, late, "2000"),
        minio_access("created", bucket, late, "1FFF"),
        minio_access("created", "another-bucket", "redis/theirs.jpg", "1"),
    ])
    listening = Listening(queue, "--redis-list", events, IMGWARM_EVENT_MAX_BYTES="2048")
    wait_made(queue, [left, twice])
    listening.wait("older")
    wait_for(lambda: client.llen(events) == 0 and client.llen(f"{events}:processing") == 0,
             "the list and the processing list to be empty")

    made = "redis/made.jpg"  # made, then removed and created again, delivered reversed
    queue.put(made, photo(410))
    client.rpush(events, minio_access("created", bucket, made, "3000"))
    wait_made(queue, [made])
    assert queue.s3 is not None  # removed last (the newer event): gone from the bucket
    queue.s3.client.delete_object(Bucket=bucket, Key=made)
    client.rpush(events, minio_access("removed", bucket, made, "00003002"),
                 minio_access("created", bucket, made, "3001"))
    manifests = queue.stores().manifests
    wait_for(lambda: isinstance(manifests.read(made), Tombstone), "the takedown", 60)
    listening.wait("older", 2)
    summary = listening.stop()

    assert summary["malformed"] == 4
    assert len(listening.events("malformed")) == 4  # one line each
    assert summary["duplicates"] == 1
    assert summary["older"] == 2
    assert summary["ignored_outside"] == 1
    assert sorted(e["key"] for e in listening.events("queued")) == sorted([left, twice, made])
    assert manifests.get(late) is None  # the newer event (removed) won
    assert isinstance(manifests.read(made), Tombstone)
