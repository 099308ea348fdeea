"""A fresh S3 store started by two real workers at once (real redis-server, moto's S3 server
and SeaweedFS) starts with its references built, whichever job writes first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.store.references import BUILT
from imgwarm.workers.client import enqueue_all
from tests.support.listening import photo
from tests.support.queues import Queue
from tests.support.s3 import s3_params, s3_server
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# limits no busy machine reaches (no worker is killed here)
LIMITS = {"visibility_timeout": "120", "task_soft_time_limit": "60", "task_time_limit": "90",
          "retry_backoff_max": "2"}


@pytest.fixture(params=s3_params())
def queue(request: pytest.FixtureRequest, redis_server: RedisServer,
          tmp_path: Path) -> Iterator[Queue]:
    started = Queue(tmp_path, redis_server, s3_server(request, request.param),  # type: ignore[arg-type]
                    **LIMITS, s3_region="us-east-1")
    yield started
    started.stop()


def test_two_workers_on_a_fresh_store_leave_it_built(queue: Queue) -> None:
    keys = [f"up/{n}.jpg" for n in range(8)]
    for n, key in enumerate(keys):
        queue.put(key, photo(n, (64, 48)))
    queue.worker("--concurrency", "2")
    queue.worker("--concurrency", "2")  # four processes that may each write first
    jobs = enqueue_all(keys, queue.settings())
    results = [job.wait(timeout=120) for job in jobs]
    assert all(r.manifest is not None for r in results), [r.error for r in results]
    stores = queue.stores()
    assert stores.manifests.store.exists(BUILT), queue.log()[-3000:]
    assert stores.manifests.references.built()
    claimed = {digest for _, digest, _ in stores.manifests.references.claimed()}
    assert len(claimed) == len(keys)  # every source's claims: no marker lost either
