"""The queued fan-out of fsck and gc --full on real workers (a real redis-server, real
``imgwarm worker`` processes, the real CLI): the slices' merged report is what one whole
pass reports, on a store with a finding of every kind."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imgwarm.store import Stores
from imgwarm.store.references import REFS
from tests.support.listening import photo
from tests.support.queues import Queue
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# a slice's limits come from the visibility timeout: long enough for a busy machine
LIMITS = {"visibility_timeout": "300", "task_soft_time_limit": "60", "task_time_limit": "90",
          "retry_backoff_max": "2"}
LATER = time.time() + 3 * 86400  # the clock of every pass: every claim is old, grace over
FILES = 2  # a tiny source's variants: one width, WebP and JPEG
VOLATILE = {"seconds", "shard", "shards", "failed_slices", "tiers"}


def same(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between runs of the same pass (time, slicing)."""
    return {k: v for k, v in report.items() if k not in VOLATILE}


def made_store(root: Path, redis: RedisServer) -> Queue:
    """A local store of 8 sources made by the CLI, then broken in every way fsck names:
    a variant file gone (missing), a claim gone (unclaimed), a record gone (its claims
    dangling, its variants named by none: gc's), a record damaged."""
    root.mkdir()
    queue = Queue(root, redis, None, **LIMITS)
    sources = root / "src"
    sources.mkdir()
    for n in range(8):
        (sources / f"{n}.jpg").write_bytes(photo(n, (64, 48)))
    done = queue.cli("optimize", *(str(sources / f"{n}.jpg") for n in range(8)))
    assert done.returncode == 0, done.stderr
    stores = queue.stores()
    manifests = sorted(stores.manifests.everything(), key=lambda m: m.key)
    origin, records = stores.origin, stores.manifests.store
    origin.delete(manifests[0].variants[0].path)  # missing
    records.delete(f"{REFS}/{manifests[1].variants[0].path}/"
                   f"{stores.manifests.key_path(manifests[1].key).stem}")  # unclaimed
    records.delete(stores.manifests.key_path(manifests[2].key))  # dangling, unnamed
    records.write(stores.manifests.key_path(manifests[3].key), b"{not json",
                  replace=True)  # damaged
    return queue


def copied(queue: Queue, to: Path, redis: RedisServer) -> Queue:
    """Another queue on a copy of the store (times kept: claims as old as the original's)."""
    to.mkdir()
    for folder in ("origin", "manifest"):
        shutil.copytree(queue.workdir / folder, to / folder)
    return Queue(to, redis, None, **LIMITS)


@pytest.fixture
def store(tmp_path: Path, redis_server: RedisServer) -> Iterator[Queue]:
    queue = made_store(tmp_path / "a", redis_server)
    yield queue
    queue.stop()


def run_json(queue: Queue, *args: str) -> tuple[int, dict[str, Any]]:
    done = queue.cli(*args, "--now", str(LATER), "--json")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_fsck_on_the_workers_in_three_slices_reports_what_a_whole_fsck_does(
        store: Queue) -> None:
    whole_exit, whole = run_json(store, "fsck")
    assert whole_exit == 1
    assert {kind: whole[kind]["count"] for kind in ("missing", "unclaimed", "dangling",
                                                    "damaged")} == \
        {"missing": 1, "unclaimed": 1, "dangling": FILES, "damaged": 1}
    store.worker("--concurrency", "2")
    store.worker("--concurrency", "1")
    queued_exit, queued = run_json(store, "fsck", "--queue", "--shards", "3")
    assert (queued_exit, queued["shards"], queued["failed_slices"]) == (1, 3, {})
    assert same(queued) == same(whole)
    assert len([line for line in store.log().splitlines()
                if "imgwarm.slice" in line and "succeeded" in line]) == 3


def test_gc_full_on_the_workers_removes_what_a_whole_gc_full_does(
        store: Queue, tmp_path: Path, redis_server: RedisServer) -> None:
    other = copied(store, tmp_path / "b", redis_server)
    try:
        whole_exit, whole = run_json(store, "gc", "--full", "--grace", "0")
        assert whole_exit == 0 and whole["removed"] == FILES  # the unnamed source's
        references = Stores.for_settings(other.settings().store).manifests.references
        references.store.delete("references.json")  # as a store never built: the slices
        assert not references.built()  # together build it, none alone (tests/lifecycle/
        other.worker("--concurrency", "2")  # test_shard.py: a slice never marks it)
        queued_exit, queued = run_json(other, "gc", "--full", "--grace", "0", "--queue",
                                       "--shards", "3")
        assert (queued_exit, queued["failed_slices"]) == (0, {})
        assert same(queued) == same(whole)
        left = {str(p) for p in Stores.for_settings(other.settings().store).origin.files()}
        assert left == {str(p) for p in store.stores().origin.files()}
        assert Stores.for_settings(other.settings().store).manifests.references.built()
    finally:
        other.stop()


def test_slices_that_fail_are_named_and_the_exit_is_1(store: Queue, tmp_path: Path) -> None:
    """Workers whose origin is refused (a folder others may write: check_root) fail every
    slice for good: the summary names each slice and why, and says 1."""
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    good = store.values["origin_root"]
    store.values["origin_root"] = str(unsafe)
    store.worker("--concurrency", "2")  # started with the refused origin
    store.values["origin_root"] = good
    code, queued = run_json(store, "fsck", "--queue", "--shards", "2")
    assert code == 1
    assert sorted(queued["failed_slices"]) == ["1/2", "2/2"]
    assert all(str(unsafe) in why for why in queued["failed_slices"].values())
    done = store.cli("fsck", "--queue", "--shards", "2", "--now", str(LATER))
    assert "FAILED: 1/2, 2/2" in done.stdout


def test_bad_options_of_the_queue_are_one_line_and_exit_2(store: Queue) -> None:
    done = store.cli("fsck", "--queue", "--shards", "0")
    assert done.returncode == 2 and "--shards" in done.stderr
    done = store.cli("gc", "--queue")
    assert done.returncode == 2 and "--queue needs --full" in done.stderr
