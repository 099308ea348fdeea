"""Event fixtures: one queue set-up (its Redis database, a bucket on moto's server, one real
worker) shared by the tests of a module, each test with keys of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.queues import FAST, Queue
from tests.support.servers import RedisServer, S3Server


@pytest.fixture(scope="module")
def events_queue(redis_server: RedisServer, s3_server: S3Server,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    queue = Queue(tmp_path_factory.mktemp("events"), redis_server, s3_server, **FAST,
                  widths="160,320")
    queue.worker("--concurrency", "2")
    yield queue
    queue.stop()


@pytest.fixture
def local_queue(redis_server: RedisServer, tmp_path: Path) -> Iterator[Queue]:
    """A queue of a test's own on a local origin (its workers started by the test)."""
    queue = Queue(tmp_path, redis_server, None, **FAST, widths="320,640")
    yield queue
    queue.stop()
