"""The queue end to end: real redis-server, moto's S3 over HTTP, real `imgwarm worker`
processes and the real CLI. What is checked is what users see: job results, objects in the
bucket (decoded, hashed, with their headers), files on disk, states, the workers' logs."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from imgwarm.manifest import Failure, Manifest
from imgwarm.store.changes import FOLDER as JOURNAL
from imgwarm.store.local import TEMP_PREFIX
from imgwarm.store.origin import S3_MANIFEST_FOLDER
from imgwarm.store.references import DROPPED, REFS
from imgwarm.workers.client import enqueue_all
from imgwarm.workers.task import starts_key
from tests.support.corpus import BAD, CASES, GOOD, Run
from tests.support.files import all_files
from tests.support.printing import hostile_ultra_hdr
from tests.support.queues import Queue, check_s3_outputs
from tests.support.servers import IMGWARM, RedisServer, S3Server, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOW_ENOUGH = {"visibility_timeout": "120", "task_soft_time_limit": "60",
               "task_time_limit": "90", "retry_backoff_max": "2"}


def corpus_key(name: str) -> str:
    return f"corpus/{name}"


@dataclass
class CorpusQueue:
    queue: Queue
    exit_code: int
    results: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def corpus_queue(corpus: Path, redis_server: RedisServer, s3_server: S3Server,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusQueue]:
    """The whole corpus uploaded to the bucket, then `imgwarm enqueue --wait --json` on a
    worker of concurrency 2."""
    queue = Queue(tmp_path_factory.mktemp("queue"), redis_server, s3_server, **SLOW_ENOUGH)
    for case in CASES:
        queue.put(corpus_key(case.path.name), case.path.read_bytes())
    queue.worker("--concurrency", "2")
    code, results = queue.cli_json("enqueue", "--wait",
                                   *(corpus_key(c.path.name) for c in CASES))
    yield CorpusQueue(queue, code, results)
    queue.stop()


def test_corpus_jobs_end_as_in_process(corpus_queue: CorpusQueue, corpus_run: Run) -> None:
    """Every good file gives the very variants `imgwarm optimize` gives in-process; every
    bad one fails with one line naming its key; exit 1 as some failed."""
    assert corpus_queue.exit_code == (1 if BAD else 0)
    assert set(corpus_queue.results) == {corpus_key(c.path.name) for c in CASES}
    for case in GOOD:
        got = corpus_queue.results[corpus_key(case.path.name)]
        expected = corpus_run.results[case.path.name]
        assert got["ok"] is True, got
        assert got["variants"] == expected["variants"]
        assert (got["width"], got["height"]) == (expected["width"], expected["height"])
    for case in BAD:
        got = corpus_queue.results[corpus_key(case.path.name)]
        assert got["ok"] is False
        assert got["error"].startswith(f"{corpus_key(case.path.name)}: ")
        assert "\n" not in got["error"]


def test_corpus_variants_in_s3_are_whole_with_headers(corpus_queue: CorpusQueue) -> None:
    queue = corpus_queue.queue
    assert queue.s3 is not None
    stores = queue.stores()
    manifests = [stores.manifests.get(corpus_key(c.path.name)) for c in GOOD]
    assert all(isinstance(m, Manifest) for m in manifests)
    check_s3_outputs(queue.s3, queue.bucket, [m for m in manifests if m], originals="corpus/")
    head = queue.s3.client.head_object(
        Bucket=queue.bucket, Key=S3_MANIFEST_FOLDER + str(stores.manifests.key_path(
            corpus_key(GOOD[0].path.name))))
    assert head["ContentType"] == "application/json"


def test_bad_files_fail_once_with_their_reason(corpus_queue: CorpusQueue) -> None:
    queue = corpus_queue.queue
    manifests = queue.stores().manifests
    for case in BAD:
        key = corpus_key(case.path.name)
        error = corpus_queue.results[key]["error"]
        record = manifests.read(key)
        assert isinstance(record, Failure), f"{key}: no failure recorded"
        assert error == f"{key}: {record.failed}"
        assert queue.meta(key)["retries"] == 0
        assert queue.received(key) == 1, f"{key} was taken more than once"
        assert queue.state(key) == "failed"
    shown = queue.cli("status", *(corpus_key(c.path.name) for c in BAD))
    assert shown.returncode == 1
    for case in BAD:
        assert f"failed    {corpus_queue.results[corpus_key(case.path.name)]['error']}" in (
            shown.stderr)


def test_enqueueing_again_is_a_no_op(corpus_queue: CorpusQueue) -> None:
    queue = corpus_queue.queue
    assert queue.s3 is not None

    def snapshot() -> dict[str, tuple[str, Any]]:
        listing = queue.s3.client.get_paginator("list_objects_v2").paginate(Bucket=queue.bucket)
        return {o["Key"]: (o["ETag"], o["LastModified"])
                for page in listing for o in page.get("Contents", [])}

    before = snapshot()
    time.sleep(1.1)  # a rewrite would carry a later LastModified
    keys = [corpus_key(c.path.name) for c in CASES]  # the bad ones too: refused again
    code, again = queue.cli_json("enqueue", "--wait", *keys)
    assert code == corpus_queue.exit_code
    assert again == corpus_queue.results
    assert snapshot() == before  # not one variant, manifest or failure record rewritten
    assert queue.log().count("'reused': True") >= len(GOOD)


def backend_state(queue: Queue, key: str) -> str:
    return str(queue.meta(key).get("status"))


def test_s3_fault_mid_run_is_retried_to_success(s3_queue: Queue, s3_server: S3Server) -> None:
    photos = sorted(GOOD, key=lambda c: c.path.stat().st_size, reverse=True)[:12]
    keys = [f"up/{c.path.name}" for c in photos]
    for case, key in zip(photos, keys, strict=True):
        s3_queue.put(key, case.path.read_bytes())
    s3_queue.worker("--concurrency", "2")
    jobs = enqueue_all(keys, s3_queue.settings())
    wait_for(lambda: any(backend_state(s3_queue, k) == "SUCCESS" for k in keys),
             "a first job to succeed")
    s3_server.stop()
    try:
        wait_for(lambda: any(backend_state(s3_queue, k) == "RETRY" for k in keys),
                 "a job to retry while S3 is down", timeout=60)
    finally:
        s3_server.start()
    results = [job.wait(timeout=180) for job in jobs]
    assert [r.error for r in results] == [None] * len(keys)
    assert max(s3_queue.meta(k)["retries"] for k in keys) >= 1
    assert "Retry in" in s3_queue.log()
    manifests = [r.manifest for r in results if r.manifest]
    check_s3_outputs(s3_server, s3_queue.bucket, manifests, originals="up/")


@pytest.mark.parametrize("origin", ["s3", "local"])
def test_killed_worker_jobs_all_complete_exactly_once(origin: str,
                                                      request: pytest.FixtureRequest) -> None:
    queue: Queue = request.getfixturevalue(f"{origin}_queue")
    queue.values["widths"] = "320,640"
    photos = list(itertools.islice(itertools.cycle(GOOD), 50))
    keys = [f"batch/{i:02d}-{case.path.name}" for i, case in enumerate(photos)]
    for case, key in zip(photos, keys, strict=True):
        queue.put(key, case.path.read_bytes())
    first = queue.worker("--concurrency", "2")
    jobs = enqueue_all(keys, queue.settings())

    def done() -> int:
        return sum(backend_state(queue, k) == "SUCCESS" for k in keys)

    wait_for(lambda: done() >= 4, "a few jobs to finish")
    first.kill()
    assert done() < len(keys), "the batch ended before the kill: nothing was tested"
    queue.worker("--concurrency", "2")
    results = [job.wait(timeout=240) for job in jobs]
    assert [r.error for r in results] == [None] * len(keys)
    # The jobs the killed worker held were handed out again (after visibility_timeout).
    assert any(queue.received(k) >= 2 for k in keys)

    manifests = [r.manifest for r in results if r.manifest]
    broker = redis.Redis.from_url(queue.values["broker_url"])
    # acks late: a job's result is stored before its message is acknowledged
    wait_for(lambda: broker.llen("imgwarm") == 0 and broker.hlen("unacked") == 0,
             "the queue and the unacknowledged messages to be empty", timeout=30)
    if queue.s3 is not None:
        stored = queue.s3.keys(queue.bucket, S3_MANIFEST_FOLDER)
        bodies = {k: queue.s3.client.get_object(Bucket=queue.bucket, Key=k)["Body"].read()
                  for k in stored}
        journal = S3_MANIFEST_FOLDER + JOURNAL + "/"
        records = [Manifest.model_validate_json(b) for k, b in bodies.items()
                   if k.endswith(".json") and k.count("/") > 3]  # in the shard folders
        changed = {json.loads(b)["key"] for k, b in bodies.items() if k.startswith(journal)}
        check_s3_outputs(queue.s3, queue.bucket, manifests, originals="batch/")
        assert [p.name for p in queue.workdir.rglob("*")] == ["worker.log"]  # nothing on disk
    else:
        root = queue.workdir / "manifest"
        records = [Manifest.model_validate_json(p.read_bytes()) for p in all_files(root)
                   if p.relative_to(root).parts[0] not in (JOURNAL, REFS, DROPPED)
                   and p.parent != root]
        changed = {json.loads(line)["key"] for p in all_files(root / JOURNAL)
                   for line in p.read_text().splitlines()}
        origin = queue.workdir / "origin"
        variants = {str(p.relative_to(origin)) for p in all_files(origin)
                    if p.relative_to(origin).parts[0] != "batch"}
        assert variants == {v.path for m in manifests for v in m.variants}
        leftovers = [p for p in queue.workdir.rglob(f"{TEMP_PREFIX}*")]
        assert leftovers == []
    assert sorted(r.key for r in records) == sorted(keys)  # one manifest per key
    assert changed == set(keys)  # and the journal names each, for `warm` to follow
    assert {r.key: r for r in records} == {m.key: m for m in manifests}
    # No source was made twice: a job run again after the kill found it made (a run killed
    # just after writing its manifest is not in the log as having made it: hence <= 1).
    assert max(queue.made(job.id) for job in jobs) == 1
    assert sum(queue.made(job.id) for job in jobs) >= len(jobs) - 2  # 2 were in hand


def test_a_worker_killed_inside_the_restore_sweep_delays_lost_jobs_briefly(
        local_queue: Queue) -> None:
    """Race (seen on CI): a worker SIGKILLed while its sweep held kombu's restore lock left
    the lock for kombu's default 5 minutes, and the jobs it held waited that long. Here the
    worker dies mid-job and its lock is left as the sweep leaves it (same key, the expiry the
    app gives it); the job must still be handed out and end well within those 5 minutes."""
    from imgwarm.workers.app import make_app

    biggest = max(GOOD, key=lambda c: c.path.stat().st_size)
    local_queue.put("up/held.jpg", biggest.path.read_bytes())
    first = local_queue.worker("--concurrency", "1")
    (job,) = enqueue_all(["up/held.jpg"], local_queue.settings())
    starts = redis.Redis.from_url(local_queue.values["broker_url"])
    wait_for(lambda: starts.get(starts_key(job.id)), "the job to start")
    first.kill()
    transport = make_app(local_queue.settings().queue, "worker").conf.broker_transport_options
    expire = transport["unacked_mutex_expire"]
    # (not nx: the dead worker may really have died holding it; this takes its place)
    assert starts.set("unacked_mutex", "the dead worker's token", ex=expire)
    local_queue.worker("--concurrency", "1")
    result = job.wait(timeout=120)  # kombu's default expiry (300 s) would run this out
    assert result.error is None and result.manifest is not None
    assert local_queue.received("up/held.jpg") == 2
    assert {v.width for v in result.manifest.variants} <= {320, 680, 860, 1080, 1290, 1920}


def test_a_job_that_keeps_killing_its_worker_process_fails_for_good(local_queue: Queue) -> None:
    """A pool process killed mid-job puts the job back (task_reject_on_worker_lost); after
    task_max_lost such deaths the job fails for good, with the reason, instead of looping."""
    biggest = max(GOOD, key=lambda c: c.path.stat().st_size)
    local_queue.put("up/heavy.jpg", biggest.path.read_bytes())
    worker = local_queue.worker("--concurrency", "1")
    (job,) = enqueue_all(["up/heavy.jpg"], local_queue.settings())
    starts = redis.Redis.from_url(local_queue.values["broker_url"])
    key = starts_key(job.id)
    for attempt in (1, 2, 3):
        wait_for(lambda n=attempt: int(starts.get(key) or 0) == n, f"start number {attempt}")
        (child,) = wait_for(worker.pool, "the pool process")
        os.kill(child, signal.SIGKILL)
    result = job.wait(timeout=120)
    assert result.error == ("up/heavy.jpg: its worker process died 3 times while making it "
                            "(out of memory, or a crash); not tried again (task_max_lost)")
    record = local_queue.stores().manifests.read("up/heavy.jpg")
    assert isinstance(record, Failure) and "died 3 times" in record.failed
    assert local_queue.received("up/heavy.jpg") == 4
    # Queued again (say, after adding memory), it gets its chances back, and succeeds.
    again = enqueue_all(["up/heavy.jpg"], local_queue.settings())[0].wait(timeout=120)
    assert again.manifest is not None, again.error


def test_a_job_over_the_soft_time_limit_fails_with_that_reason(local_queue: Queue) -> None:
    from imgwarm.samples import photo

    # AVIF at effort 10 takes seconds a variant; the limit lands between two of them.
    local_queue.values |= {"task_soft_time_limit": "1", "task_time_limit": "30",
                           "visibility_timeout": "60", "formats": "avif,webp,jpeg",
                           "avif_effort": "10"}
    local_queue.put("up/huge.jpg", photo(3000, 2000).jpegsave_buffer(Q=95))
    local_queue.worker("--concurrency", "1")
    done = local_queue.cli("enqueue", "--wait", "up/huge.jpg")
    assert done.returncode == 1
    reason = "took longer than 1 s (task_soft_time_limit)"
    assert done.stderr.splitlines()[0] == f"FAILED up/huge.jpg: {reason}"
    record = local_queue.stores().manifests.read("up/huge.jpg")
    assert isinstance(record, Failure) and record.failed == reason and not record.certain


def test_wait_timeout_counts_unended_jobs_as_failed(local_queue: Queue) -> None:
    done = local_queue.cli("enqueue", "--wait", "--timeout", "1", "--json", "a.jpg", "b.jpg")
    assert done.returncode == 1  # no worker: neither ended
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["error"] for r in results] == [
        f"{k}: not ended when the wait ran out (it may still run)" for k in ("a.jpg", "b.jpg")]
    assert local_queue.state("a.jpg") == "queued"


def test_status_says_queued_then_done_failed_or_unknown(local_queue: Queue) -> None:
    from imgwarm.samples import photo

    local_queue.put("in/photo.jpg", photo(640, 480).jpegsave_buffer())
    local_queue.put("in/broken.jpg", b"\xff\xd8\xff\xe0 not really a JPEG")
    queued = local_queue.cli("enqueue", "in/photo.jpg", "in/broken.jpg")
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout.split() == ["queued", "in/photo.jpg", "queued", "in/broken.jpg"]
    shown = local_queue.cli("status", "--json", "in/photo.jpg")
    assert (shown.returncode, json.loads(shown.stdout)["state"]) == (0, "queued")

    local_queue.worker("--concurrency", "1")
    local_queue.wait_done(["in/photo.jpg", "in/broken.jpg"])
    done = local_queue.cli("status", "--json", "in/photo.jpg")
    found = json.loads(done.stdout)
    assert (done.returncode, found["state"], found["ok"]) == (0, "done", True)
    assert [v["width"] for v in found["variants"]] == [320, 320, 640, 640]
    assert (local_queue.workdir / "origin" / found["variants"][0]["path"]).is_file()

    failed = local_queue.cli("status", "in/broken.jpg", "in/never.jpg")
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0].startswith("failed    in/broken.jpg: ")
    assert lines[1] == "unknown   in/never.jpg"
    # Once job states have expired, the manifest store still knows both ends.
    redis.Redis.from_url(local_queue.values["result_backend"]).flushdb()
    later = local_queue.cli("status", "in/photo.jpg", "in/broken.jpg")
    assert later.stdout.startswith("done      in/photo.jpg  640x480 -> ")
    assert later.stderr.splitlines()[0] == lines[0]


def test_enqueue_refuses_unsafe_keys_before_queueing(local_queue: Queue) -> None:
    for key in ["../etc/passwd", "/etc/passwd", "a/../../b.jpg", "bell\x07.jpg", "csi\x9b2J.jpg",
                "evil\u202egpj.exe", ".imgwarm/manifests/x.json", "a/.tmp-x.part"]:
        done = local_queue.cli("enqueue", "fine.jpg", key)
        assert done.returncode == 2, key
        assert "refusing key" in done.stderr
    broker = redis.Redis.from_url(local_queue.values["broker_url"])
    assert broker.llen("imgwarm") == 0


def test_enqueue_fails_fast_when_redis_is_down(local_queue: Queue) -> None:
    from tests.support.servers import free_port

    down = f"redis://127.0.0.1:{free_port()}/0"
    local_queue.values |= {"broker_url": down, "result_backend": down}
    done = local_queue.cli("enqueue", "--wait", "a.jpg", "b.jpg", timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "cannot reach the broker" in done.stderr and "nothing was queued" in done.stderr

    from imgwarm import enqueue
    from imgwarm.exceptions import BrokerError

    with pytest.raises(BrokerError, match="nothing was queued"):
        enqueue("a.jpg", settings=local_queue.settings())


def test_enqueue_fails_when_redis_accepts_but_never_answers(local_queue: Queue) -> None:
    with socket.socket() as silent:  # connections queue up in the backlog, unanswered
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        local_queue.values |= {"broker_url": url, "result_backend": url,
                               "broker_timeout": "1"}
        done = local_queue.cli("enqueue", "a.jpg", timeout=60)
        shown = local_queue.cli("status", "a.jpg", timeout=60)
    assert done.returncode == 1
    assert "cannot reach the broker" in done.stderr and "nothing was queued" in done.stderr
    assert shown.returncode == 1 and "cannot reach the broker" in shown.stderr


def test_waiting_outlasts_the_broker_timeout(local_queue: Queue) -> None:
    """--wait keeps waiting on a job that takes longer than broker_timeout to end."""
    from imgwarm.samples import photo

    local_queue.values["broker_timeout"] = "1"
    local_queue.put("in/late.jpg", photo(640, 480).jpegsave_buffer())
    waiting = subprocess.Popen([str(IMGWARM), "enqueue", "--wait", "in/late.jpg"],
                               env=local_queue.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    wait_for(lambda: local_queue.state("in/late.jpg") == "queued", "the job to be queued")
    time.sleep(3)  # three broker timeouts with no worker
    local_queue.worker("--concurrency", "1")
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert out.startswith("done      in/late.jpg")


def test_python_enqueue_carries_the_credits(local_queue: Queue) -> None:
    import piexif

    from imgwarm import enqueue
    from imgwarm.samples import photo

    local_queue.put("up/bike.jpg", photo(800, 600).jpegsave_buffer())
    local_queue.worker("--concurrency", "1")
    job = enqueue("up/bike.jpg", description="Червоний велосипед", copyright="© Ann",
                  settings=local_queue.settings())
    result = job.wait(timeout=120)
    assert result.manifest is not None, result.error
    assert result.manifest.description == "Червоний велосипед"
    jpeg = next(v for v in result.manifest.variants if v.format == "jpeg")
    exif = piexif.load(str(local_queue.workdir / "origin" / jpeg.path))
    assert exif["0th"][piexif.ImageIFD.ImageDescription].decode() == "Червоний велосипед"
    assert exif["0th"][piexif.ImageIFD.Copyright].decode() == "© Ann"


def test_optimize_in_process_on_s3_keys(s3_queue: Queue, corpus: Path) -> None:
    assert s3_queue.s3 is not None
    photo = GOOD[0].path
    s3_queue.put(f"up/{photo.name}", photo.read_bytes())
    code, results = s3_queue.cli_json("optimize", f"up/{photo.name}", "up/missing.jpg")
    assert code == 1
    assert results["up/missing.jpg"]["error"].startswith("up/missing.jpg: no such original")
    found = results[f"up/{photo.name}"]
    assert found["ok"] is True
    manifest = s3_queue.stores().manifests.get(f"up/{photo.name}")
    assert manifest is not None
    assert [v.model_dump() for v in manifest.variants] == found["variants"]
    check_s3_outputs(s3_queue.s3, s3_queue.bucket, [manifest], originals="up/")


def test_a_queued_delete_takes_the_source_down(local_queue: Queue) -> None:
    from imgwarm import enqueue, enqueue_delete
    from imgwarm.manifest import Tombstone
    from imgwarm.samples import photo

    local_queue.put("up/ad-3/bike.jpg", photo(800, 600).jpegsave_buffer())
    local_queue.worker("--concurrency", "1")
    made = enqueue("up/ad-3/bike.jpg", settings=local_queue.settings()).wait(timeout=120)
    assert made.manifest is not None, made.error
    done = enqueue_delete("up/ad-3/bike.jpg", original=True,
                          settings=local_queue.settings()).wait(timeout=120)
    assert done["ok"] is True and done["original"] is True, done
    assert sorted(done["removed"]) == sorted(v.path for v in made.manifest.variants)
    origin = local_queue.workdir / "origin"
    assert not [v for v in made.manifest.variants if (origin / v.path).exists()]
    assert not (origin / "up/ad-3/bike.jpg").exists()
    assert isinstance(local_queue.stores().manifests.read("up/ad-3/bike.jpg"), Tombstone)
    unknown = enqueue_delete("up/never.jpg", settings=local_queue.settings()).wait(timeout=60)
    assert unknown["ok"] is False and "up/never.jpg: no manifest" in unknown["error"]


def test_what_a_library_prints_in_a_job_is_its_warning_not_the_log(local_queue: Queue) -> None:
    """libultrahdr prints a hostile gain map's XMP to fd 1: in a pool process that is the
    worker's log, unless captured (issue 38, item 3)."""
    local_queue.put("up/hostile.jpg", hostile_ultra_hdr())
    local_queue.worker("--concurrency", "1")
    done = local_queue.cli("enqueue", "--wait", "up/hostile.jpg")
    assert done.returncode == 0, done.stderr
    record = local_queue.stores().manifests.read("up/hostile.jpg")
    assert isinstance(record, Manifest)
    (printed,) = [w for w in record.warnings if w.startswith("a library printed")]
    assert "<!DOCTYPE x" in printed and "\\x1B[31mEVIL" in printed
    # (the log says the result, warning included: what must not be there is the raw lines)
    raw = [line for line in local_queue.log().splitlines()
           if line.startswith(("ERROR:Expected", "- line:1:"))]
    assert raw == [] and "\x1b" not in local_queue.log()


def test_the_pool_holds_no_more_processes_than_max_memory(redis_server: RedisServer,
                                                          tmp_path: Path) -> None:
    """Each pool process holds its idle memory (68 MiB): at max_memory=64M, --concurrency 16
    starts one, and the log says why."""
    from tests.support.queues import FAST

    queue = Queue(tmp_path, redis_server, None, max_memory="64M", **FAST)
    try:
        worker = queue.worker("--concurrency", "16")
        assert len(worker.pool()) == 1
        assert "imgwarm: 1 worker(s), not 16: max_memory (64 MiB)" in worker.text()
    finally:
        queue.stop()
