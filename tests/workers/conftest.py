"""Queue fixtures: per test a Queue (tests/support/queues.py) on the session's real
redis-server, with moto's S3 server or a local origin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.queues import FAST, Queue
from tests.support.servers import RedisServer, S3Server


@pytest.fixture
def s3_queue(redis_server: RedisServer, s3_server: S3Server, tmp_path: Path) -> Iterator[Queue]:
    queue = Queue(tmp_path, redis_server, s3_server, **FAST)
    yield queue
    queue.stop()


@pytest.fixture
def local_queue(redis_server: RedisServer, tmp_path: Path) -> Iterator[Queue]:
    queue = Queue(tmp_path, redis_server, None, **FAST)
    yield queue
    queue.stop()
