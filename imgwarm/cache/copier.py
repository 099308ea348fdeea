"""Copier: files from the origin (or the NVMe tier) into a tier, many at once.

A small file's copy is mostly system calls (open, read, mkdir, link) with a little Python
between them, and a first warm makes tens of thousands. Threads share one interpreter lock and
slow each other down on a fast file system; so from a local origin the copies run in forked
processes (as rsync's sender and receiver do), each taking a slice of a batch. From S3 they run
in threads: there the time is spent waiting on the network, and a boto3 client must not cross
a fork.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from imgwarm.cache.tiers import Tier
from imgwarm.exceptions import LayoutError, StorageError, TransientStorageError
from imgwarm.store import Store

S3_THREADS = 16  # downloads in flight: a bounded pool
PROCESSES_PER_CORE = 2  # one reads while the other waits on the disk


class Item(NamedTuple):
    """One file to copy."""

    path: str
    size: int
    targets: tuple[str, ...]  # the tiers to write it to, in order
    source: str | None = None  # a tier to read it from first (whole there), else the origin


@dataclass(frozen=True)
class Full:
    """The tier's file system is full: placement in it stops."""

    message: str


@dataclass(frozen=True)
class Failed:
    """This file could not be read or written (the others go on)."""

    message: str


# True: placed, whole; False: the origin has no such file (or not that size)
Result = bool | Full | Failed

_PR_SET_PDEATHSIG = 1
_state: dict[str, Any] = {}  # a worker process's tiers and origin (given once, at its start)


class Copier:
    def __init__(self, tiers: Sequence[Tier], origin: Store, *, local: bool,
                 drop: Sequence[int] = ()) -> None:
        """``drop``: descriptors the forked processes must not keep (the run's lock: a
        process left behind by a killed run would hold it otherwise)."""
        self.tiers = {t.name: t for t in tiers}
        self.origin = origin
        self.pool: Executor
        if local:
            import multiprocessing  # here: a run with nothing to copy starts without them
            from concurrent.futures import ProcessPoolExecutor

            self.workers = (os.cpu_count() or 1) * PROCESSES_PER_CORE
            self.pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("fork"),
                initializer=_start, initargs=(self.tiers, origin, tuple(drop)))
            # forked now, all of them (a fork pool starts every process on its first task),
            # before this process starts threads whose locks a child would inherit taken
            self.pool.submit(os.getpid).result()
        else:
            self.workers = S3_THREADS
            self.pool = ThreadPoolExecutor(S3_THREADS)
        self.local = local

    def place(self, items: list[Item]) -> list[tuple[Result, ...]]:
        """Copy each item into its tiers; the results of an item in the order of its tiers,
        the items in order."""
        return self.start(items)()

    def start(self, items: list[Item]) -> Callable[[], list[tuple[Result, ...]]]:
        """``place`` in the background: the call it returns waits for the results."""
        if not self.local:
            futures = [self.pool.submit(place_one, self.tiers, self.origin, item)
                       for item in items]
            return lambda: [f.result() for f in futures]
        step = -(-len(items) // self.workers) or 1
        parts = [self.pool.submit(_place_slice, items[i:i + step])
                 for i in range(0, len(items), step)]
        return lambda: [r for part in parts for r in part.result()]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _start(tiers: dict[str, Tier], origin: Store, drop: tuple[int, ...]) -> None:
    _state["tiers"], _state["origin"] = tiers, origin
    for fd in drop:
        with contextlib.suppress(OSError):
            os.close(fd)
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # Linux: die with the run
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _place_slice(items: list[Item]) -> list[tuple[Result, ...]]:
    return [place_one(_state["tiers"], _state["origin"], item) for item in items]


def place_one(tiers: dict[str, Tier], origin: Store, item: Item) -> tuple[Result, ...]:
    """Read one file once (from its source tier, when it has one and the file is whole
    there, else the origin) and write it to each of its tiers."""
    path, size, targets, source = item
    try:
        data = tiers[source].read(path) if source is not None else None
        if data is None or len(data) != size:
            data = origin.read(path)
    except LayoutError:
        data = None
    except StorageError as error:  # a read error, after the store's own retries
        return tuple(Failed(str(error)) for _ in targets)
    if data is None or len(data) != size:
        return tuple(False for _ in targets)
    return tuple(_write(tiers[name], path, data) for name in targets)


def _write(tier: Tier, path: str, data: bytes) -> Result:
    """Write one file, atomically (the tier's write). A file already under the name is
    replaced whatever its size: warm did not write it (the index says it is not there), so
    nothing says what it holds."""
    try:
        tier.write(path, data, replace=True)
    except TransientStorageError as error:  # a full disk or quota (local._write_error)
        return Full(f"{tier.name} tier full at {tier.root}: {error}")
    except (StorageError, LayoutError) as error:  # a folder full, a file it cannot write
        return Failed(str(error))
    return True
