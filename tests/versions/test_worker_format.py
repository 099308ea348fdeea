"""A rollout under a real Celery worker: an older worker (this code) meeting a store marked
with a newer format neither makes nor takes down a job, records no failure and sends no
``failed`` event: it puts the job back on the queue, and a newer worker (this code told it
knows the newer format, started afterwards: the next version in a rollout) does it. Real
redis-server, real `imgwarm worker` processes, moto's S3 over HTTP or a local origin."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.manifest import Manifest, Tombstone
from imgwarm.store.format import STORE_FORMAT
from imgwarm.workers.client import enqueue_delete
from tests.support.images import jpeg_with_exif, photo
from tests.support.queues import FAST, Queue
from tests.support.servers import RedisServer, S3Server, Worker, wait_for
from tests.support.versions import NEWER, bucket_snapshot, mark_local, mark_s3, refusal, snapshot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# sitecustomize for the newer worker: the same code, told it knows the next format (what the
# next version that brings one would be, as far as the store's record is concerned)
NEWER_CODE = f"import imgwarm.store.format as f\nf.STORE_FORMAT = {NEWER}\n"


@pytest.fixture(params=["local", "s3"])
def queue(request: pytest.FixtureRequest, redis_server: RedisServer,
          tmp_path: Path) -> Queue:
    s3: S3Server | None = request.getfixturevalue("s3_server") if request.param == "s3" else None
    # format_refresh 0: each look reads the record (the store is marked between two jobs
    # here; how long a process keeps a record is tests/versions/test_store_format.py's)
    made = Queue(tmp_path, redis_server, s3, **FAST, format_refresh="0")
    request.addfinalizer(made.stop)
    return made


def _state_of_store(queue: Queue) -> object:
    if queue.s3 is not None:
        return bucket_snapshot(queue.s3.client, queue.bucket)
    return snapshot(queue.workdir / "origin", queue.workdir / "manifest")


def _mark(queue: Queue, number: int) -> str:
    """Mark the store; where it is, as the refusal names it."""
    if queue.s3 is not None:
        mark_s3(queue.s3.client, queue.bucket, "", number, readable_by=STORE_FORMAT)
        return f"origin s3://{queue.bucket}/"
    mark_local(queue.workdir / "origin", number, readable_by=STORE_FORMAT)
    return f"origin {queue.workdir / 'origin'}"


def _newer_worker(queue: Queue, tmp_path: Path) -> Worker:
    hook = tmp_path / "newer"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(NEWER_CODE)
    env = queue.env
    env["PYTHONPATH"] = ":".join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    worker = Worker(env, tmp_path / "newer.log")
    queue.workers.append(worker)
    return worker


def test_an_older_worker_leaves_the_jobs_of_a_newer_store_to_a_newer_worker(
        queue: Queue, tmp_path: Path) -> None:
    for name in ("made", "new"):
        queue.put(f"up/{name}.jpg", jpeg_with_exif(photo(400, 300, seed=len(name)),
                                                   quality=85))
    older = queue.worker()
    assert queue.cli("enqueue", "--wait", "up/made.jpg").returncode == 0
    made = queue.stores().manifests.read("up/made.jpg")
    assert isinstance(made, Manifest)
    where = _mark(queue, NEWER)
    before = _state_of_store(queue)
    assert queue.cli("enqueue", "up/new.jpg").returncode == 0
    takedown = enqueue_delete("up/made.jpg", settings=queue.settings())
    line = refusal(where)
    # each job refused at least twice (put back, taken again), never failed
    wait_for(lambda: older.text().count(line) >= 4, "the older worker to refuse twice each",
             timeout=60)
    assert queue.state("up/new.jpg") in ("queued", "retrying")  # not failed
    assert _celery_state(queue, takedown.id) in ("RETRY", "PENDING", "RECEIVED")
    assert _state_of_store(queue) == before  # nothing written or removed, no failure kept
    assert " ERROR" not in older.text() and "Traceback" not in older.text()
    older.stop()  # the rollout: this machine's worker replaced by the newer version's
    newer = _newer_worker(queue, tmp_path)
    queue.wait_done(["up/new.jpg"], timeout=60)
    assert queue.state("up/new.jpg") == "done"
    record = queue.stores().manifests.read("up/new.jpg")
    assert isinstance(record, Manifest)
    assert "succeeded" in newer.text()
    assert takedown.wait(timeout=60)["key"] == "up/made.jpg"
    assert isinstance(queue.stores().manifests.read("up/made.jpg"), Tombstone)
    origin = queue.stores().origin
    assert not any(origin.exists(v.path) for v in made.variants)  # taken down by the newer
    assert all(origin.exists(v.path) for v in record.variants)
    assert line not in newer.text()


def _celery_state(queue: Queue, job: str) -> str:
    from imgwarm.workers.client import client_app

    return str(client_app(queue.settings()).AsyncResult(job).state)
