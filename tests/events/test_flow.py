"""The whole flow as deployed, under faults: originals PUT to a bucket (moto's S3) whose real
notification goes to SQS, `imgwarm listen --sqs` queueing the jobs, real Celery workers, two
cache boxes following the events stream with `imgwarm warm --follow`. The listener, a worker
and a follower are each SIGKILLed while uploads arrive, and Redis is restarted empty; after
each, every upload ends with a manifest and on both boxes' NVMe (reconcile catching what the
events missed), and what was taken down never comes back. The lifecycle's invariants are
checked on the real files at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.manifest import Manifest, Tombstone
from tests.support.events_out import Box, restart_redis
from tests.support.invariants import check, real_stores, tiers_match_index, verdict
from tests.support.listening import Listening, photo, sqs_notification
from tests.support.queues import FAST, Queue
from tests.support.servers import RedisServer, S3Server, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def queue(redis_server: RedisServer, s3_server: S3Server, tmp_path: Path) -> Iterator[Queue]:
    made = Queue(tmp_path, redis_server, s3_server, **FAST, widths="160,320",
                 originals_prefix="uploads/")
    yield made
    made.stop()


class Flow:
    """The deployed pieces around one queue, and the uploads made so far."""

    def __init__(self, queue: Queue, ram: Path) -> None:
        assert queue.s3 is not None
        self.queue, self.s3 = queue, queue.s3
        self.sqs, self.url = sqs_notification(self.s3, queue.bucket)
        self.boxes = [Box(queue, "box-a", ram), Box(queue, "box-b", ram)]
        self.listener = self.listen()
        self.uploaded: list[str] = []
        self.seed = 0

    def listen(self) -> Listening:
        return Listening(self.queue, "--sqs", self.url, "--reconcile-every", "3s")

    def upload(self, count: int, tag: str) -> list[str]:
        keys = [f"uploads/{tag}/photo {n}.jpg" for n in range(count)]  # (a space: encoded)
        for key in keys:
            self.seed += 1
            self.s3.client.put_object(Bucket=self.queue.bucket, Key=key, Body=photo(self.seed))
        self.uploaded += keys
        return keys

    def manifests(self, keys: list[str]) -> list[Manifest]:
        found = [self.queue.stores().manifests.get(key) for key in keys]
        return [m for m in found if m is not None] if all(found) else []

    def everywhere(self, keys: list[str], what: str) -> None:
        """Each key with a manifest, and its variants on both boxes' NVMe."""
        def done() -> bool:
            made = self.manifests(keys)
            return bool(made) and all(box.holds(m) for box in self.boxes for m in made)

        wait_for(done, f"{what}: {len(keys)} upload(s) made and on both boxes' NVMe", 120)


def test_every_upload_reaches_both_boxes_through_every_fault(queue: Queue, ram: Path,
                                                             redis_server: RedisServer) -> None:
    worker = queue.worker("--concurrency", "2")
    flow = Flow(queue, ram)
    for box in flow.boxes:
        box.start()
    flow.everywhere(flow.upload(2, "first"), "no fault")

    # the listener killed while messages arrive: those not deleted from SQS come back
    keys = flow.upload(3, "listener")
    flow.listener.kill()
    flow.listener = flow.listen()
    flow.everywhere(keys, "listener SIGKILLed")

    # a worker killed while it holds jobs (acknowledged late: handed out again)
    keys = flow.upload(3, "worker")
    wait_for(lambda: "received" in queue.log(), "the worker to take a job")
    worker.kill()
    worker = queue.worker("--concurrency", "2")
    flow.everywhere(keys, "worker SIGKILLed")

    # a follower killed while events arrive: its run at start and its pending entries
    keys = flow.upload(3, "follower")
    flow.boxes[0].kill()
    flow.boxes[0].start()
    flow.everywhere(keys, "follower SIGKILLed")

    # Redis restarted empty (queued jobs, order records, the stream and its groups lost)
    worker.stop()
    flow.listener.kill()
    restart_redis(redis_server)
    keys = flow.upload(2, "redis")
    flow.listener = flow.listen()
    worker = queue.worker("--concurrency", "2")
    flow.everywhere(keys, "Redis restarted")

    # a takedown by its event: off both boxes, and it stays down through reconcile
    gone_key = flow.uploaded[0]
    gone = flow.manifests([gone_key])[0]
    flow.s3.client.delete_object(Bucket=queue.bucket, Key=gone_key)
    paths = [v.path for v in gone.variants]
    wait_for(lambda: isinstance(queue.stores().manifests.read(gone_key), Tombstone)
             and not any(box.has_any(paths) for box in flow.boxes),
             "the takedown on both boxes", 60)

    # events that never came: the notification removed; reconcile queues them
    flow.s3.client.put_bucket_notification_configuration(
        Bucket=queue.bucket, NotificationConfiguration={})
    keys = flow.upload(2, "unannounced")
    flow.everywhere(keys, "no event (reconcile)")
    assert {e["key"] for e in flow.listener.events("reconciled")} >= set(keys)
    rounds = len(flow.listener.events("reconcile-done"))
    flow.listener.wait("reconcile-done", rounds + 2)  # rounds that saw the takedown too

    assert isinstance(queue.stores().manifests.read(gone_key), Tombstone)
    assert not any(box.has_any(paths) for box in flow.boxes), "a takedown came back"
    flow.everywhere([k for k in flow.uploaded if k != gone_key], "every upload at the end")
    flow.listener.stop()
    problems = check(real_stores(queue.settings()))
    for box in flow.boxes:
        assert box.stop() == 0, box.text()
        problems += tiers_match_index(queue.settings().updated(
            nvme_root=box.nvme, ram_root=box.ram, cache_state=box.root / "state"))
    assert not problems, verdict(problems, "flow")
