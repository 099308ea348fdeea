"""Cache boxes that follow the events stream: two boxes (each its own tiers and state, one
origin) running the real `imgwarm warm --follow`, real Celery workers, a real Redis. An upload
reaches both NVMe tiers without any periodic run, a takedown leaves both at once; a follower
killed while events arrive catches up when started again, and a Redis restarted empty is
found again, with what was made while it was away caught from the journal."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from imgwarm.config import Settings, load_settings
from imgwarm.events.follow import Follower, group_name
from imgwarm.events.out import Outbox, deleted, failed
from imgwarm.manifest import Manifest
from imgwarm.workers.client import enqueue_all, enqueue_delete
from tests.support.events_out import Box, restart_redis
from tests.support.images import jpeg_with_exif, photo
from tests.support.invariants import check, real_stores, snapshot, tiers_match_index, verdict
from tests.support.queues import Queue
from tests.support.servers import IMGWARM, RedisServer, free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def queue(local_queue: Queue) -> Queue:
    return local_queue


@pytest.fixture
def boxes(queue: Queue, ram: Path) -> Iterator[list[Box]]:
    both = [Box(queue, "box-a", ram, "--json"), Box(queue, "box-b", ram, "--json")]
    yield both
    for box in both:
        box.stop()


def upload(queue: Queue, keys: list[str], seed: int = 0) -> list[Manifest]:
    for i, key in enumerate(keys):
        queue.put(key, jpeg_with_exif(photo(640, 480, seed=seed + i), quality=85))
    results = [job.wait(timeout=120) for job in enqueue_all(keys, queue.settings())]
    assert [r.error for r in results] == [None] * len(keys)
    return [r.manifest for r in results if r.manifest is not None]


def on_every_box(boxes: list[Box], manifests: list[Manifest], what: str) -> None:
    wait_for(lambda: all(box.holds(m) for box in boxes for m in manifests),
             f"{what} on every box's NVMe", timeout=60)


def test_an_upload_reaches_both_boxes_and_a_takedown_leaves_both(
        queue: Queue, boxes: list[Box]) -> None:
    queue.worker("--concurrency", "2")
    for box in boxes:
        box.start()  # each runs once at start (the journal), then waits on the stream
    [first, second] = upload(queue, ["up/a.jpg", "up/b.jpg"])
    on_every_box(boxes, [first, second], "the uploads")
    health = subprocess.run([str(IMGWARM), "health", "--role", "warm"], env=boxes[0].env,
                            capture_output=True, text=True, timeout=60)
    assert health.returncode == 0, health.stdout + health.stderr  # no period: never overdue
    assert all("--every" not in " ".join(map(str, box.process.args)) for box in boxes
               if box.process is not None)
    stores = real_stores(queue.settings())
    before = snapshot(stores, [b.nvme for b in boxes] + [b.ram for b in boxes])

    enqueue_delete("up/a.jpg", settings=queue.settings()).wait(timeout=60)
    gone = [v.path for v in first.variants]
    wait_for(lambda: not any(box.has_any(gone) for box in boxes),
             "the takedown to leave both boxes' tiers", timeout=60)
    assert all(box.holds(second) for box in boxes)  # the other photo stays
    problems = check(stores, before)
    for box in boxes:
        assert box.stop() == 0, box.text()  # SIGTERM: the run in hand ends, exit 0
        problems += tiers_match_index(box_settings(queue, box))
    assert not problems, verdict(problems, "follow-takedown")


def box_settings(queue: Queue, box: Box) -> Settings:
    return queue.settings().updated(nvme_root=box.nvme, ram_root=box.ram,
                                    cache_state=box.root / "state")


def test_a_follower_killed_while_events_arrive_catches_up_when_started_again(
        queue: Queue, boxes: list[Box]) -> None:
    queue.worker("--concurrency", "2")
    first, second = boxes
    for box in boxes:
        box.start()
    early = upload(queue, ["up/k0.jpg"])
    on_every_box(boxes, early, "the first upload")
    taken = early[0]
    enqueue_delete("up/k0.jpg", settings=queue.settings()).wait(timeout=60)
    keys = [f"up/k{i}.jpg" for i in range(1, 7)]
    for i, key in enumerate(keys):
        queue.put(key, jpeg_with_exif(photo(640, 480, seed=10 + i), quality=85))
    jobs = enqueue_all(keys, queue.settings())
    wait_for(lambda: second.runs() >= 4, "the other box to run on the batch's first events")
    stores = real_stores(queue.settings())
    before = snapshot(stores, [b.nvme for b in boxes] + [b.ram for b in boxes])
    first.kill()  # SIGKILL, while the events of the batch arrive
    manifests = [job.wait(timeout=120).manifest for job in jobs]
    assert all(manifests)
    first.start()  # its run at start, and its own pending entries read again
    on_every_box(boxes, [m for m in manifests if m], "every upload")
    gone = [v.path for v in taken.variants]
    assert not any(box.has_any(gone) for box in boxes), "a taken-down variant came back"
    problems = check(stores, before)
    for box in boxes:
        assert box.stop() == 0, box.text()
        problems += tiers_match_index(box_settings(queue, box))
    assert not problems, verdict(problems, "follow-kill")


def test_followers_find_a_restarted_redis_and_catch_up_from_the_journal(
        queue: Queue, boxes: list[Box], redis_server: RedisServer, tmp_path: Path) -> None:
    worker = queue.worker("--concurrency", "2")
    for box in boxes:
        box.start()
    on_every_box(boxes, upload(queue, ["up/r0.jpg"]), "the first upload")
    worker.stop()
    redis_server.stop()
    # made while Redis is away, in-process: its event is lost, its journal entry is not
    source = tmp_path / "sources" / "while-away.jpg"
    source.parent.mkdir()
    source.write_bytes(jpeg_with_exif(photo(640, 480, seed=21), quality=85))
    made = subprocess.run([str(IMGWARM), "optimize", "--json", str(source)], env=queue.env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    wait_for(lambda: all("away" in box.text() for box in boxes),
             "each follower to notice Redis away")
    restart_redis(redis_server)  # empty: the stream and both groups are gone
    away = real_stores(queue.settings()).manifests.get(str(source.resolve()))
    assert isinstance(away, Manifest)
    on_every_box(boxes, [away], "what was made while Redis was away")
    queue.worker("--concurrency", "2")
    on_every_box(boxes, upload(queue, ["up/r1.jpg"], seed=30), "an upload after the restart")
    problems = check(real_stores(queue.settings()))
    for box in boxes:
        assert box.stop() == 0, box.text()
        problems += tiers_match_index(box_settings(queue, box))
    assert not problems, verdict(problems, "follow-redis-restart")


def test_a_burst_wakes_one_run_and_a_restart_reads_its_pending_entries_again(
        redis_server: RedisServer, tmp_path: Path) -> None:
    """The Follower itself on a real Redis: 250 events in a burst are one wake (one run),
    a follower gone before its run ended finds them again as its own pending entries, and
    only what it acknowledged after a run is gone; failures alone wake nothing."""
    url = f"redis://127.0.0.1:{redis_server.port}/901"
    client = redis.Redis.from_url(url)
    client.flushdb()
    settings = load_settings(events_redis_url=url, cache_state=tmp_path / "state",
                             origin_root=tmp_path / "o", manifest_root=tmp_path / "m")
    follower = Follower(settings)
    assert follower.wait(0) is False  # the group made at "$": nothing for it yet
    outbox = Outbox(settings, explicit_only=True)
    for i in range(250):
        outbox.add(deleted(f"up/{i}.jpg", []))
    assert follower.wait(1.0) is True and len(follower.taken) == 250
    follower.close()  # killed before its run ended: nothing acknowledged
    again = Follower(settings)
    assert again.wait(0) is True and len(again.taken) == 250
    again.ran(True)
    assert client.xpending("imgwarm:events", group_name(settings))["pending"] == 0
    assert again.wait(0) is False
    outbox.add(failed("up/bad.jpg", "not an image"))
    assert again.wait(1.0) is False  # a failure changes no tier: acknowledged, no run
    assert client.xpending("imgwarm:events", group_name(settings))["pending"] == 0
    outbox.add(deleted("up/7.jpg", []))
    assert again.wait(1.0) is True
    again.ran(False)  # the run failed: what woke it stays pending, for the run tried again
    outbox.add(failed("up/bad.jpg", "not an image"))
    assert again.wait(1.0) is False
    assert client.xpending("imgwarm:events", group_name(settings))["pending"] == 1
    again.ran(True)
    assert client.xpending("imgwarm:events", group_name(settings))["pending"] == 0
    again.close()


def test_with_redis_away_from_the_start_the_periodic_runs_go_on(
        queue: Queue, ram: Path) -> None:
    """--follow --every with no Redis to be had: one line says so, the runs every second go
    on (the journal needs no Redis), SIGTERM ends it with 0."""
    queue.values["events_redis_url"] = f"redis://127.0.0.1:{free_port()}/0"
    box = Box(queue, "box-away", ram, "--every", "1s")
    box.start()
    wait_for(lambda: box.runs() >= 3, "three periodic runs with the stream away")
    assert box.stop() == 0, box.text()
    assert box.text().count("events stream imgwarm:events away") == 1, box.text()
