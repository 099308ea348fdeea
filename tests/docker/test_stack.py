"""The compose stack as a user runs it (docker/compose.yaml with docker/compose.seaweedfs.yaml,
on stand-in images): photos uploaded through the S3 API become variants that nginx serves with
their type and caching headers from the origin, then NVMe, then RAM; a restart of each service
in turn loses nothing; two workers share the queue."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imgwarm.config import load_settings
from imgwarm.formats import OUTPUTS
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from tests.support import docker
from tests.support.compose import Reply, Stack, free_port, until
from tests.support.corpus import corpus_files
from tests.support.files import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMPOSE = REPO / "docker" / "compose.yaml"
SEAWEEDFS = REPO / "docker" / "compose.seaweedfs.yaml"
BUCKET, KEY, SECRET = "photos", "imgwarm", "stack-test-secret-0123456789"
CACHE_CONTROL = "public, max-age=31536000, immutable"
RAM_MAX_WIDTH = 640
HEALTHY = ("redis", "minio", "worker", "warm", "nginx")  # the services with a health check
# The test's own override: the S3 port published on loopback (uploads through the S3 API),
# health checks every few seconds instead of every half minute (the same checks).
TEST_OVERRIDE = """
services:
  minio:
    ports: ["127.0.0.1:{s3_port}:9000"]  # fixed: a restart keeps it
    healthcheck: {interval: 2s}
  redis:
    healthcheck: {interval: 2s}
  worker:
    healthcheck: {interval: 3s, start_period: 0s}
  warm:
    healthcheck: {interval: 3s, start_period: 0s}
    environment: {IMGWARM_RAM_MAX_WIDTH: "640"}  # RAM for thumbnails: wider stay on NVMe
  nginx:
    healthcheck: {interval: 2s}
"""


def _env_file(folder: Path, http_port: int, images: dict[str, str]) -> Path:
    values = {
        "IMGWARM_S3_BUCKET": BUCKET, "IMGWARM_S3_ENDPOINT_URL": "http://minio:9000",
        "IMGWARM_S3_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET, "IMGWARM_BROKER_URL": "redis://redis:6379/0",
        "IMGWARM_RESULT_BACKEND": "redis://redis:6379/1", "IMGWARM_ORIGINALS_PREFIX": "uploads/",
        "IMGWARM_WIDTHS": "320,640,1280", "IMGWARM_FORMATS": "webp,jpeg",
        "RAM_TIER_SIZE": "64m", "IMGWARM_RAM_BUDGET": "48M",
        # warm's periodic run only when the test restarts it; uploads found by listing
        "WARM_EVERY": "1h", "RECONCILE_EVERY": "3s", "HTTP_PORT": str(http_port), **images,
    }
    path = folder / "stack.env"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack up, every service with a health check healthy, the one-off jobs done."""
    folder = tmp_path_factory.mktemp("stack")
    with docker.engine() as engine:
        images = docker.standins(engine)
        docker.imgwarm_image(engine, images["PYTHON_IMAGE"])
        override = folder / "compose.test.yaml"
        override.write_text(TEST_OVERRIDE.replace("{s3_port}", str(free_port())))
        port = free_port()
        running = Stack(engine, "imgwarmstacktest", [COMPOSE, SEAWEEDFS, override],
                        _env_file(folder, port, images), port)
        running.compose("down", "-v", "--remove-orphans", check=False)  # a run that crashed
        try:
            running.compose("up", "-d", "--no-build", timeout=600)
            running.wait_healthy(*HEALTHY)
            yield running
        finally:
            running.compose("down", "-v", "--remove-orphans", "-t", "20", check=False,
                            timeout=300)


@pytest.fixture(scope="module")
def origin(stack: Stack) -> Iterator[Stores]:
    """The bucket as imgwarm reads it, from here, through the S3 service's published port."""
    endpoint = f"http://127.0.0.1:{stack.port('minio', 9000)}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", KEY)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        settings = load_settings(origin="s3", s3_bucket=BUCKET, s3_endpoint_url=endpoint,
                                 s3_region="us-east-1", widths="320,640,1280")
        yield Stores.for_settings(settings.store)


def _client(origin: Stores) -> Any:
    store: Any = origin.manifests.store
    return store.client


def _put(origin: Stores, key: str, data: bytes) -> None:
    _client(origin).put_object(Bucket=BUCKET, Key=key, Body=data, ContentType="image/jpeg")


def _manifest(origin: Stores, key: str, timeout: float = 180) -> Manifest:
    found = until(lambda: origin.manifests.get(key), timeout)
    assert found is not None, f"no manifest for {key}"
    return found


PHOTOS = corpus_files("Landscape_[1-3].jpg")  # (EXIF orientations: upright variants)
MORE = corpus_files("Landscape_[4-6].jpg")
FOLLOWED = corpus_files("Landscape_8.jpg")[0]


@pytest.fixture(scope="module")
def uploaded(stack: Stack, origin: Stores) -> dict[str, Manifest]:
    """Photos put under uploads/ through the S3 API while warm is stopped (so nothing is in a
    tier yet), each with its manifest once `listen` and a worker made it."""
    stack.compose("stop", "warm")
    keys = {f"uploads/{path.name}": path for path in PHOTOS}
    for key, path in keys.items():
        _put(origin, key, path.read_bytes())
    return {key: _manifest(origin, key) for key in keys}


def _check_served(reply: Reply, variant: Any, tier: str | None = None) -> None:
    """Served whole, with its type, the immutable caching and (when given) from ``tier``;
    decoded by Pillow to the manifest's dimensions."""
    assert reply.status == 200, (variant.path, reply.status, reply.body[:200])
    assert reply.headers["content-type"] == OUTPUTS[variant.format].media_type, variant.path
    assert reply.headers["cache-control"] == CACHE_CONTROL, variant.path
    if tier is not None:
        assert reply.headers.get("x-cache-tier") == tier, (variant.path, reply.headers)
    with Image.open(io.BytesIO(reply.body)) as image:
        assert image.size == (variant.width, variant.height), variant.path
        assert (image.format or "").lower() == variant.format, variant.path
    assert len(reply.body) == variant.bytes, variant.path


def _variants(manifests: dict[str, Manifest]) -> list[Any]:
    found = [v for m in manifests.values() for v in m.variants]
    assert len(found) == len(manifests) * 6  # 3 widths, 2 formats
    return found


def _placed(variant: Any) -> str:
    """The tier warm puts a variant in once it is hot: RAM up to the RAM tier's widest."""
    return "ram" if variant.width <= RAM_MAX_WIDTH else "nvme"


def _all_placed(stack: Stack, manifests: dict[str, Manifest], timeout: float = 120) -> None:
    """Every variant served from the tier warm places it in (waiting for warm to have)."""
    variants = _variants(manifests)
    assert {_placed(v) for v in variants} == {"ram", "nvme"}
    done = until(lambda: None if any(
        stack.get("/" + v.path).headers.get("x-cache-tier") != _placed(v) for v in variants)
        else True, timeout)
    tiers = {v.path: (v.width, stack.get("/" + v.path).headers.get("x-cache-tier"))
             for v in variants}
    assert done, f"not where warm places them: {tiers}"
    for variant in variants:
        _check_served(stack.get("/" + variant.path), variant, _placed(variant))


def test_every_service_comes_up_healthy_and_the_jobs_finish(stack: Stack) -> None:
    for service in HEALTHY:
        for container in stack.ids(service):
            assert stack.state(container) == "healthy", service
    for job in ("bucket", "nginx-config"):
        assert [stack.state(c) for c in stack.ids(job)] == ["exited 0"], job
    assert stack.get("/").status == 404  # nginx answers; the config serves variants only


def test_uploads_are_served_from_the_origin_before_warm(
        stack: Stack, uploaded: dict[str, Manifest]) -> None:
    for variant in _variants(uploaded):
        _check_served(stack.get("/" + variant.path), variant, "origin")


def test_uploads_reach_nvme_and_the_thumbnails_ram(
        stack: Stack, origin: Stores, uploaded: dict[str, Manifest]) -> None:
    """warm, started, runs once: every variant asked for above is hot in nginx's access log:
    the thumbnails (up to RAM_MAX_WIDTH) to RAM, all fitting in its budget, the wider to
    NVMe. An upload while it runs comes by the events stream, placed alike."""
    stack.compose("start", "warm")
    _all_placed(stack, uploaded)
    key = f"uploads/{FOLLOWED.name}"
    _put(origin, key, FOLLOWED.read_bytes())
    _all_placed(stack, {key: _manifest(origin, key)})


def test_a_restart_of_each_service_loses_nothing(
        stack: Stack, origin: Stores, uploaded: dict[str, Manifest]) -> None:
    photo = PHOTOS[0].read_bytes()
    # redis: a job queued while no worker runs is still there after Redis restarts (its
    # append-only file); a key outside uploads/, so no listing queues it again
    stack.compose("stop", "worker")
    _put(origin, "queued/redis.jpg", photo)
    stack.exec("listen", "imgwarm", "enqueue", "queued/redis.jpg")
    stack.compose("restart", "redis")
    stack.wait_healthy("redis")
    stack.compose("start", "worker")
    _manifest(origin, "queued/redis.jpg")
    # a worker restarted while a job is queued: it completes
    _put(origin, "queued/worker.jpg", photo)
    stack.exec("listen", "imgwarm", "enqueue", "queued/worker.jpg")
    stack.compose("restart", "worker")
    _manifest(origin, "queued/worker.jpg")
    # the S3 server: originals, variants and manifests kept (its volume)
    stack.compose("restart", "minio")
    stack.wait_healthy("minio")
    for key, manifest in uploaded.items():
        assert origin.manifests.get(key) == manifest
    # listen: an upload after its restart is still found
    stack.compose("restart", "listen")
    _put(origin, "uploads/after-restart.jpg", photo)
    _manifest(origin, "uploads/after-restart.jpg")
    # warm: its index is kept (the state volume): its first run after the restart finds
    # every variant placed already and copies nothing again
    before = len(stack.compose("logs", "--no-color", "warm").stdout.splitlines())
    stack.compose("restart", "warm")
    stack.wait_healthy("warm")
    runs = [line for line in stack.compose("logs", "--no-color", "warm").stdout.splitlines()
            [before:] if "warm: ram " in line]
    assert runs and " ram +0 " in runs[0] and " nvme +0 " in runs[0], runs
    _all_placed(stack, uploaded)
    # nginx: the tiers are volumes, not its own
    stack.compose("restart", "nginx")
    stack.wait_healthy("nginx")
    _all_placed(stack, uploaded)
    for service in HEALTHY:
        stack.wait_healthy(service)


def test_two_workers_answer_and_share_the_jobs(stack: Stack, origin: Stores) -> None:
    stack.compose("up", "-d", "--no-build", "--no-recreate", "--scale", "worker=2", "worker")
    assert len(stack.ids("worker")) == 2
    stack.wait_healthy("worker")
    for index in (1, 2):
        done = stack.exec("worker", "imgwarm", "health", "--role", "worker", index=index,
                          check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    keys = {f"queued/{path.name}": path for path in MORE}
    for key, path in keys.items():
        _put(origin, key, path.read_bytes())
    stack.exec("listen", "imgwarm", "enqueue", *keys)
    for key in keys:
        _manifest(origin, key)
