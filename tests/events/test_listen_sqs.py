"""`imgwarm listen --sqs` against moto's S3 and SQS with a real bucket notification and a real
worker: uploads made under their real keys, the loop guard, takedowns, SIGKILLs, reconcile."""

from __future__ import annotations

from imgwarm.events.reconcile import why_make
from imgwarm.manifest import Manifest, Tombstone
from tests.support.listening import Listening, photo, queue_drained, sqs_notification, wait_made
from tests.support.queues import Queue
from tests.support.servers import wait_for


def test_uploads_are_made_under_their_real_keys_and_own_writes_queue_nothing(
        events_queue: Queue) -> None:
    queue, s3 = events_queue, events_queue.s3
    assert s3 is not None
    sqs, url = sqs_notification(s3, queue.bucket)  # moto sends s3:TestEvent to it now
    listening = Listening(queue, "--sqs", url)
    keys = ["sqs/red flower+1.jpg", "sqs/ünï/çødé.jpg", "sqs/plain.jpg"]
    for number, key in enumerate(keys):
        queue.put(key, photo(number))
    wait_made(queue, keys)
    # the variants, manifests and journal the jobs wrote each sent an event too: all ignored
    listening.wait("ignored-own", 3)
    wait_for(lambda: queue_drained(sqs, url), "the SQS queue to be drained", 60)
    queued = listening.events("queued")
    assert sorted(e["key"] for e in queued) == sorted(keys)
    manifests = queue.stores().manifests
    assert all(manifests.get(k) is not None for k in keys)  # under the decoded keys

    s3.client.delete_object(Bucket=queue.bucket, Key=keys[1])  # taken down
    wait_for(lambda: isinstance(manifests.read(keys[1]), Tombstone), "the tombstone", 60)
    wait_for(lambda: queue_drained(sqs, url), "the SQS queue to be drained", 60)
    summary = listening.stop()
    assert summary["queued"] == len(keys)  # one job an upload, none for imgwarm's own writes
    assert summary["deleted"] == 1
    assert summary["ignored_test"] == 1
    assert summary["ignored_own"] >= 3
    assert summary["malformed"] == 0
    assert isinstance(manifests.read(keys[0]), Manifest)


def test_a_killed_listener_loses_nothing(events_queue: Queue) -> None:
    queue, s3 = events_queue, events_queue.s3
    assert s3 is not None
    sqs, url = sqs_notification(s3, queue.bucket)
    keys = [f"kill/{n:02d}.jpg" for n in range(8)]
    first = Listening(queue, "--sqs", url)
    for number, key in enumerate(keys):
        queue.put(key, photo(100 + number))
    first.wait("queued")
    first.kill()  # SIGKILL: messages taken and not deleted come back after 3 s
    second = Listening(queue, "--sqs", url)
    wait_made(queue, keys)
    wait_for(lambda: queue_drained(sqs, url), "the SQS queue to be drained", 60)
    second.stop()
    # a job the first queued and committed to its order, killed before it said so: its
    # message comes back to the second, which knows it as a duplicate (and queues no more)
    handled = {e["key"] for e in first.events("queued") + second.events("queued")
               + second.events("duplicate")}
    assert handled == set(keys)
    assert not {e["key"] for e in first.events("queued")} & \
        {e["key"] for e in second.events("queued")}  # none queued twice


def test_a_killed_worker_leaves_its_jobs_to_another(events_queue: Queue) -> None:
    queue, s3 = events_queue, events_queue.s3
    assert s3 is not None
    sqs, url = sqs_notification(s3, queue.bucket)
    listening = Listening(queue, "--sqs", url)
    keys = [f"wkill/{n:02d}.jpg" for n in range(4)]
    held = queue.workers[-1]
    for number, key in enumerate(keys):
        queue.put(key, photo(200 + number, (1600, 1200)))
    listening.wait("queued", len(keys))
    jobs = [queue.job(k) for k in keys]
    wait_for(lambda: any(f"[{job}] received" in held.text() for job in jobs),
             "the worker to hold a job", 60)
    held.kill()  # acks late: its jobs go back to the queue after the visibility timeout
    queue.worker("--concurrency", "2")
    wait_made(queue, keys, timeout=120)
    wait_for(lambda: queue_drained(sqs, url), "the SQS queue to be drained", 60)
    assert listening.stop()["queued"] == len(keys)  # each queued once, by the listener...
    assert any(queue.received(k) >= 2 for k in keys)  # ...a killed worker's job ran again


def test_reconcile_catches_uploads_whose_events_never_came(events_queue: Queue) -> None:
    queue, s3 = events_queue, events_queue.s3
    assert s3 is not None
    taken = "rec/taken.jpg"
    queue.put(taken, photo(300))
    assert queue.cli("enqueue", taken).returncode == 0
    wait_made(queue, [taken])
    assert queue.cli("delete", taken).returncode == 0  # taken down, its original left
    s3.client.put_bucket_notification_configuration(  # no events from here on
        Bucket=queue.bucket, NotificationConfiguration={})
    keys = [f"rec/{n}.jpg" for n in range(3)]
    for number, key in enumerate(keys):
        queue.put(key, photo(310 + number))
    listening = Listening(queue, "--reconcile-every", "1s",
                          IMGWARM_ORIGINALS_PREFIX="rec/")
    wait_made(queue, keys)
    listening.wait("reconcile-done", 3)
    summary = listening.stop()
    assert sorted(e["key"] for e in listening.events("reconciled")) == sorted(keys)
    assert summary["reconciled"] == len(keys)  # each once, however many runs
    assert isinstance(queue.stores().manifests.read(taken), Tombstone)  # stays down
    stores = queue.stores()
    for key in keys:  # made now: their manifests are newer than their originals
        modified = s3.client.head_object(Bucket=queue.bucket, Key=key)["LastModified"]
        assert why_make(key, modified.timestamp(), stores) is None
        assert why_make(key, modified.timestamp() + 3600, stores) == "newer than its record"
    queue.values["originals_prefix"] = "rec/"
    try:  # --reconcile alone: once, then exit (nothing left to queue)
        once = queue.cli("listen", "--reconcile", timeout=120)
    finally:
        del queue.values["originals_prefix"]
    assert once.returncode == 0, once.stderr
    assert "0 reconciled" in once.stderr and "reconcile-done 4 listed" in once.stdout
