"""Events out from real Celery workers on a real Redis: a publish, a failure for good and a
takedown each add their event to the stream, after the manifest (or the tombstone) is there;
a job retried after a transient fault adds one publish and no failure; and a Redis that
accepts connections but never answers costs a job a bounded wait, never the job."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from imgwarm.config import load_settings
from imgwarm.events.out import Outbox, failed
from imgwarm.manifest import Manifest
from imgwarm.workers.client import enqueue_all, enqueue_delete
from imgwarm.workers.task import starts_key
from tests.support.events_out import of_key
from tests.support.images import jpeg_with_exif, photo
from tests.support.queues import FAST, Queue
from tests.support.servers import IMGWARM, RedisServer, S3Server, clean_env, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def s3_queue(redis_server: RedisServer, s3_server: S3Server,
             tmp_path: Path) -> Iterator[Queue]:
    queue = Queue(tmp_path, redis_server, s3_server, **FAST, widths="320,640")
    yield queue
    queue.stop()


def upload(queue: Queue, key: str, seed: int = 0) -> None:
    queue.put(key, jpeg_with_exif(photo(800, 600, seed=seed), quality=85))


def variants(manifest: Manifest) -> list[dict[str, object]]:
    return [{"path": v.path, "format": v.format, "width": v.width, "height": v.height,
             "bytes": v.bytes} for v in manifest.variants]


def test_published_failed_and_deleted_events_carry_what_the_manifest_says(
        local_queue: Queue) -> None:
    queue, url = local_queue, local_queue.values["broker_url"]
    upload(queue, "up/a.jpg")
    queue.put("up/bad.jpg", b"this is not an image at all")
    queue.worker("--concurrency", "2")
    made, bad = (job.wait(timeout=120) for job in
                 enqueue_all(["up/a.jpg", "up/bad.jpg"], queue.settings()))
    assert made.manifest is not None and bad.error is not None
    manifest = made.manifest
    # (the job's result is stored before Celery's on_failure hook has run: wait for it)
    wait_for(lambda: of_key(url, "up/bad.jpg"), "the failure's event")
    [event] = of_key(url, "up/a.jpg")
    assert event["type"] == "published" and event["variants"] == variants(manifest)
    assert {(v["format"], v["width"]) for v in event["variants"]} >= {("jpeg", 320),
                                                                      ("jpeg", 640)}
    assert Manifest.model_validate(event["manifest"]) == manifest  # what `picture` needs
    [failure] = of_key(url, "up/bad.jpg")
    assert failure["type"] == "failed" and "up/bad.jpg" in failure["error"]
    assert "\n" not in failure["error"]

    enqueue_delete("up/a.jpg", settings=queue.settings()).wait(timeout=60)
    wait_for(lambda: len(of_key(url, "up/a.jpg")) == 2, "the takedown's event")
    taken = of_key(url, "up/a.jpg")[1]
    assert taken["type"] == "deleted"
    assert taken["removed"] == sorted(v.path for v in manifest.variants)
    assert all(not (queue.workdir / "origin" / p).exists() for p in taken["removed"])


def test_a_job_retried_after_a_transient_fault_publishes_once_and_never_fails(
        s3_queue: Queue, s3_server: S3Server) -> None:
    queue, url = s3_queue, s3_queue.values["broker_url"]
    upload(queue, "up/late.jpg", seed=3)
    queue.worker("--concurrency", "1")
    s3_server.stop()  # the job meets S3 away, and is retried
    try:
        [job] = enqueue_all(["up/late.jpg"], queue.settings())
        wait_for(lambda: queue.meta("up/late.jpg").get("status") == "RETRY",
                 "the job to be retried while S3 is away", timeout=60)
    finally:
        s3_server.start()
    result = job.wait(timeout=120)
    assert result.manifest is not None, result.error
    assert queue.meta("up/late.jpg")["retries"] >= 1
    wait_for(lambda: of_key(url, "up/late.jpg"), "the publish's event")
    assert [e["type"] for e in of_key(url, "up/late.jpg")] == ["published"]
    assert of_key(url, "up/late.jpg")[0]["variants"] == variants(result.manifest)


def test_retries_run_out_is_one_failed_event(s3_queue: Queue, s3_server: S3Server) -> None:
    queue, url = s3_queue, s3_queue.values["broker_url"]
    queue.values["task_max_retries"] = "1"
    upload(queue, "up/never.jpg", seed=4)
    queue.worker("--concurrency", "1")
    s3_server.stop()
    try:
        [job] = enqueue_all(["up/never.jpg"], queue.settings())
        result = job.wait(timeout=120)
        wait_for(lambda: of_key(url, "up/never.jpg"), "the failure's event")
    finally:
        s3_server.start()
    assert result.manifest is None
    assert [e["type"] for e in of_key(url, "up/never.jpg")] == ["failed"]


def test_an_outbox_whose_redis_never_answers_gives_up_and_the_caller_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A port that takes connections and never answers (a Redis hung, a firewall that
    swallows): add() returns None after one retry at most (not redis-py's ten, with backoff,
    which would hold a job for half a minute), with a warning."""
    connections: list[socket.socket] = []
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]

        def accept() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connections.append(silent.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
        settings = load_settings(origin_root=tmp_path / "o", manifest_root=tmp_path / "m",
                                 events_redis_url=f"redis://127.0.0.1:{port}/0")
        outbox = Outbox(settings, explicit_only=True)
        assert outbox.add(failed("up/x.jpg", "a line")) is None
        tried = len(connections)
    for connection in connections:
        connection.close()
    assert 1 <= tried <= 2, tried
    assert any("not added to the stream" in r.getMessage() for r in caplog.records)


def test_in_process_optimize_and_delete_add_their_events_when_the_stream_is_set(
        redis_server: RedisServer, tmp_path: Path) -> None:
    """`imgwarm optimize` (the CLI: a source made and one that fails) and imgwarm.delete (the
    API) add their events, with the local file's key (its real path), when events_redis_url
    is set; without it, nothing is added anywhere."""
    import imgwarm

    url = f"redis://127.0.0.1:{redis_server.port}/902"
    redis.Redis.from_url(url).flushdb()
    good, bad = tmp_path / "in" / "good.jpg", tmp_path / "in" / "bad.jpg"
    good.parent.mkdir()
    good.write_bytes(jpeg_with_exif(photo(640, 480, seed=5), quality=85))
    bad.write_bytes(b"\xff\xd8 not a JPEG after all")
    roots = {"IMGWARM_ORIGIN_ROOT": str(tmp_path / "origin"),
             "IMGWARM_MANIFEST_ROOT": str(tmp_path / "manifest"), "IMGWARM_WIDTHS": "320"}
    quiet = subprocess.run([str(IMGWARM), "optimize", str(good)], env=clean_env(**roots),
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert redis.Redis.from_url(url).dbsize() == 0  # no stream set: none added
    done = subprocess.run([str(IMGWARM), "optimize", str(good), str(bad)],
                          env=clean_env(**roots, IMGWARM_EVENTS_REDIS_URL=url), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # one failed
    [made] = of_key(url, str(good.resolve()))
    [failure] = of_key(url, str(bad.resolve()))
    assert made["type"] == "published" and failure["type"] == "failed"
    settings = load_settings(origin_root=tmp_path / "origin",
                             manifest_root=tmp_path / "manifest", events_redis_url=url)
    manifest = Manifest.model_validate(made["manifest"])
    imgwarm.delete(good, settings=settings)
    taken = of_key(url, str(good.resolve()))[-1]
    assert taken["type"] == "deleted"
    assert taken["removed"] == sorted(v.path for v in manifest.variants)


def test_a_job_given_up_after_its_worker_died_is_one_failed_event(
        redis_server: RedisServer, tmp_path: Path) -> None:
    """give_up's path (task_max_lost): the pool process killed mid-job, the job handed out
    again and failed for good with its reason: one failed event, no published."""
    queue = Queue(tmp_path, redis_server, None, **FAST, task_max_lost="1")
    url = queue.values["broker_url"]
    try:
        queue.put("up/heavy.jpg", jpeg_with_exif(photo(4000, 3000, seed=7), quality=92))
        worker = queue.worker("--concurrency", "1")
        [job] = enqueue_all(["up/heavy.jpg"], queue.settings())
        starts = redis.Redis.from_url(url)
        wait_for(lambda: int(starts.get(starts_key(job.id)) or 0) == 1, "the job's start")
        [child] = wait_for(worker.pool, "the pool process")
        os.kill(child, signal.SIGKILL)
        result = job.wait(timeout=120)
        wait_for(lambda: of_key(url, "up/heavy.jpg"), "the failure's event")
    finally:
        queue.stop()
    assert result.manifest is None and "died 1 times" in (result.error or "")
    [event] = of_key(url, "up/heavy.jpg")
    assert event["type"] == "failed" and "task_max_lost" in event["error"]
