"""Retry by type, in a real worker: a job that meets a TransientError is retried (with
backoff) until it succeeds; one that meets any other error is tried once and fails for good.

The fault is raised inside the worker's own pool process, at the race point between a
source's claims and its files (``optimize.claimed``), by a ``sitecustomize`` module that the
worker's interpreter loads at start (PYTHONPATH): each attempt appends a byte to a file, so
the attempts are counted by what the worker did, not by what it logged."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from imgwarm.manifest import Failure, Manifest
from imgwarm.workers.client import enqueue_all
from tests.support.corpus import GOOD
from tests.support.queues import Queue
from tests.support.servers import Worker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INJECTOR = textwrap.dedent('''
    """A test's fault at a race point of every job this worker runs (tests/workers)."""
    import os

    from imgwarm import exceptions, racepoints

    _ARMED = []  # (each held: a context manager collected would take its hook away)
    _COUNT = os.environ["IMGWARM_TEST_ATTEMPTS"]
    _KIND = getattr(exceptions, os.environ["IMGWARM_TEST_FAULT"])
    _TIMES = int(os.environ["IMGWARM_TEST_FAULT_TIMES"])


    def _arm():
        _ARMED.append(racepoints.at("optimize.claimed", _fail))
        _ARMED[-1].__enter__()


    def _fail():
        with open(_COUNT, "ab") as count:
            count.write(b"x")
        attempt = os.path.getsize(_COUNT)
        _arm()  # for the next attempt
        if attempt <= _TIMES:
            raise _KIND(f"an injected fault, attempt {attempt}")


    _arm()
''')


def _faulty_worker(queue: Queue, tmp_path: Path, fault: str, times: int) -> Path:
    """A worker whose jobs meet ``fault`` at their first ``times`` attempts; the file that
    counts every attempt."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(INJECTOR)
    attempts = tmp_path / "attempts"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**queue.env, "PYTHONPATH": path, "IMGWARM_TEST_ATTEMPTS": str(attempts),
           "IMGWARM_TEST_FAULT": fault, "IMGWARM_TEST_FAULT_TIMES": str(times)}
    queue.workers.append(Worker(env, queue.workdir / "worker.log", "--concurrency", "1"))
    return attempts


def _one_job(queue: Queue, tmp_path: Path, fault: str, times: int) -> tuple[Any, bytes]:
    """One photo's job on a worker whose jobs meet ``fault`` at their first ``times``
    attempts: its result, and the attempts the worker made (a byte each)."""
    queue.put("up/photo.jpg", GOOD[0].path.read_bytes())
    attempts = _faulty_worker(queue, tmp_path, fault, times)
    (job,) = enqueue_all(["up/photo.jpg"], queue.settings())
    return job.wait(timeout=120), attempts.read_bytes()


@pytest.mark.parametrize("fault", ["TransientStorageError", "BrokerError"])
def test_a_transient_fault_is_retried_until_the_job_succeeds(
        local_queue: Queue, tmp_path: Path, fault: str) -> None:
    result, attempts = _one_job(local_queue, tmp_path, fault, times=2)
    assert result.error is None and result.manifest is not None
    assert attempts == b"xxx"  # two faults, then the attempt that succeeded
    assert local_queue.meta("up/photo.jpg")["retries"] == 2
    assert isinstance(local_queue.stores().manifests.read("up/photo.jpg"), Manifest)


@pytest.mark.parametrize("fault", ["StorageError", "SettingsError"])
def test_a_permanent_fault_is_tried_once_and_fails_for_good(
        local_queue: Queue, tmp_path: Path, fault: str) -> None:
    result, attempts = _one_job(local_queue, tmp_path, fault, times=5)
    assert result.manifest is None
    assert result.error is not None and "an injected fault, attempt 1" in result.error
    assert attempts == b"x"  # tried once: not retried
    record = local_queue.stores().manifests.read("up/photo.jpg")
    assert not isinstance(record, Manifest)
    assert record is None or isinstance(record, Failure)
