"""The client side of a queued fan-out (``imgwarm fsck --queue``, ``gc --full --queue``):
every slice of the pass a job on the workers' queue, waited for with progress, and the
slices' reports merged when the last one ends (``lifecycle/fanout.py``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from celery import states as celery_states
from celery.result import AsyncResult

from imgwarm.config import Settings
from imgwarm.lifecycle.fanout import FanOut, merge, settle, slices
from imgwarm.workers.app import SLICE_TASK
from imgwarm.workers.client import _broker, _message, client_app

POLL = 0.5  # seconds between looks at the slices' states
_ENDED = (celery_states.SUCCESS, celery_states.FAILURE, celery_states.REVOKED)


def fan_out(kind: str, settings: Settings, *, shards: int, options: dict[str, Any] | None = None,
            progress: Callable[[str, int, int], None] | None = None,
            timeout: float | None = None) -> FanOut:
    """Queue the ``shards`` slices of ``kind`` ("fsck" or "gc") with ``options`` (small JSON:
    repair, grace, now, dry_run), wait for every one, and merge their reports. A slice that
    met a transient fault is retried by its worker as any job is; one that failed for good
    (or was still not ended after ``timeout`` seconds) is named in ``FanOut.failed``."""
    parts = slices(shards)
    app = client_app(settings)
    # a slice runs long (a share of the store, not one image): its own limits, the queue's
    # visibility timeout (a job unacknowledged after it is handed out again anyway)
    limit = settings.queue.visibility_timeout
    jobs: dict[str, AsyncResult] = {}
    for part in parts:
        job_id = f"imgwarm-{kind}-{uuid.uuid4().hex}"

        def send(part: str = part, job_id: str = job_id) -> None:
            app.send_task(SLICE_TASK, args=[kind, part], kwargs=options or {},
                          task_id=job_id, soft_time_limit=limit * 0.9, time_limit=limit)

        _broker(settings, f"queueing the {kind} slice {part}", send)
        jobs[part] = AsyncResult(job_id, app=app)
    tick = progress or (lambda *_: None)
    ended: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    tick("slices", 0, len(parts))
    while len(ended) + len(failed) < len(parts):
        for part, job in jobs.items():
            if part in ended or part in failed:
                continue
            state = _broker(settings, f"reading the state of slice {part}", _state(job))
            if state == celery_states.SUCCESS:
                ended[part] = dict(job.result)
            elif state in _ENDED:
                failed[part] = _message(f"slice {part}", job.result)
        tick("slices", len(ended) + len(failed), len(parts))
        if len(ended) + len(failed) == len(parts):
            break
        if deadline is not None and time.monotonic() > deadline:
            for part in parts:
                if part not in ended and part not in failed:
                    failed[part] = f"slice {part}: not ended when the wait ran out (it may " \
                                   "still run)"
            break
        time.sleep(POLL)
    fanned = merge(kind, shards, ended, failed)
    settle(fanned, settings, dry_run=bool((options or {}).get("dry_run")))
    return fanned


def _state(job: AsyncResult) -> Callable[[], str]:
    return lambda: str(job.state)
