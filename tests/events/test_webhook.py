"""The signed webhook against a receiver over real HTTP that checks each signature as the
docs tell applications to: a job's event POSTed by the real `imgwarm notify`, a 500 retried
with the same event id after the job had ended, a restart resuming what was not delivered."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import redis

from imgwarm.config import load_settings
from imgwarm.events.out import Outbox, deleted
from imgwarm.events.webhook import GROUP, Deliverer, sign, verify
from imgwarm.workers.client import enqueue_all
from tests.support.events_out import Receiver, restart_redis
from tests.support.images import jpeg_with_exif, photo
from tests.support.queues import FAST, Queue
from tests.support.servers import IMGWARM, RedisServer, clean_env, wait_for

SECRET = "whsec-test-0123456789"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver(SECRET)
    yield made
    made.stop()


def group_made(url: str) -> bool:
    client = redis.Redis.from_url(url)
    try:
        return any(g["name"] == GROUP.encode() for g in client.xinfo_groups("imgwarm:events"))
    except redis.ResponseError:
        return False
    finally:
        client.close()


@pytest.mark.integration
@pytest.mark.slow
def test_a_jobs_event_is_signed_retried_after_a_500_and_never_holds_the_job(
        redis_server: RedisServer, tmp_path: Path, receiver: Receiver) -> None:
    queue = Queue(tmp_path, redis_server, None, **FAST, widths="320,640",
                  notify_url=receiver.url, notify_secret=SECRET)
    receiver.answers = [500]
    notify = subprocess.Popen([str(IMGWARM), "notify"], env=queue.env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: group_made(queue.values["broker_url"]), "notify's group")
        queue.put("up/hook.jpg", jpeg_with_exif(photo(640, 480), quality=85))
        queue.worker("--concurrency", "1")
        [job] = enqueue_all(["up/hook.jpg"], queue.settings())
        manifest = job.wait(timeout=120).manifest
        assert manifest is not None
        wait_for(lambda: [r.status for r in receiver.got] == [500, 200],
                 "the event delivered on its second try")
        ended = datetime.fromisoformat(queue.meta("up/hook.jpg")["date_done"])
    finally:
        notify.terminate()
        _, err = notify.communicate(timeout=30)
        queue.stop()
    assert notify.returncode == 0, err
    first, second = receiver.got
    assert first.verified and second.verified
    ids = {r.headers["X-Imgwarm-Event-Id"] for r in receiver.got}
    assert len(ids) == 1 and {json.loads(r.body)["id"] for r in receiver.got} == ids
    assert first.headers["Content-Type"] == "application/json"
    event = json.loads(second.body)
    assert event["type"] == "published" and event["key"] == "up/hook.jpg"
    assert [v["path"] for v in event["variants"]] == [v.path for v in manifest.variants]
    # the job had ended (its result stored) before the retry came: it never waited on it
    assert ended.timestamp() < second.at
    assert "HTTP 500; again in" in err.decode()


@pytest.mark.integration
def test_a_restart_resumes_the_events_not_delivered(redis_server: RedisServer, tmp_path: Path,
                                                    receiver: Receiver) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/{900}"
    redis.Redis.from_url(url).flushdb()
    env = clean_env(IMGWARM_EVENTS_REDIS_URL=url, IMGWARM_NOTIFY_URL=receiver.url,
                    IMGWARM_NOTIFY_SECRET=SECRET, IMGWARM_ORIGIN_ROOT=str(tmp_path / "o"),
                    IMGWARM_MANIFEST_ROOT=str(tmp_path / "m"))

    def once() -> dict[str, int]:
        done = subprocess.run([str(IMGWARM), "notify", "--once", "--json"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    assert once()["delivered"] == 0  # the first start makes the group, at the end
    settings = load_settings(events_redis_url=url, origin_root=tmp_path / "o",
                             manifest_root=tmp_path / "m")
    entry = Outbox(settings, explicit_only=True).add(deleted("up/gone.jpg", ["ab/cd.webp"]))
    receiver.answers = [503]
    assert once() == {"delivered": 0, "failed": 1, "dropped": 0, "waiting": 1}
    assert once() == {"delivered": 1, "failed": 0, "dropped": 0, "waiting": 0}
    assert [r.status for r in receiver.got] == [503, 200]
    assert {r.headers["X-Imgwarm-Event-Id"] for r in receiver.got} == {entry}
    assert json.loads(receiver.got[1].body)["removed"] == ["ab/cd.webp"]
    assert once()["delivered"] == 0  # acknowledged: never sent again


def test_verify_takes_only_the_signed_bytes_within_the_tolerance() -> None:
    body = b'{"id":"1-0","type":"published"}'
    now = int(time.time())
    header = sign(SECRET, body, now)
    assert header.startswith(f"t={now},v1=") and verify(SECRET, header, body)
    assert not verify("another secret", header, body)
    assert not verify(SECRET, header, body.replace(b"published", b"deleted"))
    assert not verify(SECRET, sign(SECRET, body, now - 301), body)  # a replay, too old
    assert verify(SECRET, sign(SECRET, body, now - 301), body, tolerance=600)
    assert not verify(SECRET, "t=notanumber,v1=00", body)
    assert not verify(SECRET, "", body)
    # a second v1 (a secret being rolled) is accepted when either matches
    assert verify(SECRET, f"{header},v1={'0' * 64}", body)


@pytest.mark.integration
def test_the_deliverer_finds_a_restarted_redis_again(tmp_path: Path,
                                                     receiver: Receiver) -> None:
    """A Redis of its own, restarted empty under a running deliverer: one line when it goes,
    one when it is back, and an event added afterwards is delivered."""
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    lines: list[str] = []
    stop = threading.Event()
    try:
        settings = load_settings(events_redis_url=server.url, notify_url=receiver.url,
                                 notify_secret=SECRET, origin_root=tmp_path / "o",
                                 manifest_root=tmp_path / "m")
        deliverer = Deliverer(settings, stop=stop, say=lines.append)
        running = threading.Thread(target=deliverer.run, daemon=True)
        running.start()
        wait_for(lambda: group_made(server.url), "the deliverer's group")
        outbox = Outbox(settings, explicit_only=True)
        outbox.add(deleted("up/one.jpg", []))
        wait_for(lambda: len(receiver.got) == 1, "the first event")
        restart_redis(server)
        wait_for(lambda: any("back after" in line for line in lines), "the stream back")
        outbox.add(deleted("up/two.jpg", []))
        wait_for(lambda: len(receiver.got) == 2, "an event added after the restart")
        said = list(lines)  # (before the server is stopped for good below)
    finally:
        stop.set()
        server.stop()
    assert [json.loads(r.body)["key"] for r in receiver.got] == ["up/one.jpg", "up/two.jpg"]
    assert all(r.verified for r in receiver.got)
    assert sum("away" in line for line in said) == 1, said
