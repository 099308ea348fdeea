"""Fill: every record of a local manifest store read and parsed by several processes (a first
or ``--full`` warm), each a shard folder at a time, while the calling process writes the index
and starts the copies: on a first warm of a large store, parsing JSON is the work, not the disk.

Folders are handed out a few at a time per process and their records taken back in the same
order, so that memory holds a bounded number of folders' records whatever the store's size.
A process that dies (killed, out of memory) stops the run with one line; nothing is lost: the
index keeps what was set, and the next run lists every record again (the journal's cursor is
moved only after a listing ends).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import PurePosixPath
from typing import Any

from imgwarm.exceptions import LayoutError, StorageError
from imgwarm.manifest import Record, parse_record
from imgwarm.racepoints import reached
from imgwarm.store.local import LocalStore
from imgwarm.store.manifests import ManifestStore, sound

WINDOW = 4  # folders a process has in hand (queued or being read)
_PR_SET_PDEATHSIG = 1
_state: dict[str, Any] = {}  # a reading process's manifest store (given once, at its start)

Read = tuple[list[Record], list[PurePosixPath]]  # a folder's records, and its damaged ones


def processes_for(setting: int) -> int:
    """The processes a fill uses: the setting, or one a core (0)."""
    return setting or os.cpu_count() or 1


def records(manifests: ManifestStore, processes: int, *, drop: Sequence[int] = ()
            ) -> Iterator[Record]:
    """Every record, as ``ManifestStore.everything`` gives them (damaged ones noted in
    ``manifests.damaged``), read by ``processes`` forked processes from a local store; from
    S3, or with one process, ``everything`` itself (threads: a boto3 client must not cross a
    fork). ``drop``: descriptors the processes must not keep (the run's lock)."""
    store = manifests.store
    if processes <= 1 or not isinstance(store, LocalStore):
        yield from manifests.everything()
        return
    import multiprocessing  # here: a run that lists nothing forks nothing

    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"),
                               initializer=_start, initargs=(manifests, tuple(drop)))
    try:
        pool.submit(os.getpid).result()  # forked now, before this process starts threads
        pending: deque[Future[Read]] = deque()
        for folder in _folders(store, manifests.layout.tops()):
            pending.append(pool.submit(_read, folder))
            if len(pending) >= processes * WINDOW:
                yield from _taken(pending.popleft(), manifests)
        while pending:
            yield from _taken(pending.popleft(), manifests)
    except BrokenProcessPool:
        raise StorageError("a process reading the manifest store ended unexpectedly "
                           "(killed?): the run stopped; the next run reads every record "
                           "again") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _folders(store: LocalStore, tops: list[str]) -> Iterator[str]:
    """The second-level shard folders there are (the first level's 128 would be too coarse
    at 100M sources: each would hold 800,000 records)."""
    for top in tops:
        try:
            with os.scandir(store.path(top)) as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            raise StorageError(f"cannot list {store.path(top)}: {error.strerror}") from None
        yield from (f"{top}/{name}" for name in names)


def _taken(future: Future[Read], manifests: ManifestStore) -> list[Record]:
    found, damaged = future.result()
    manifests.damaged.extend(damaged)
    return found


def _start(manifests: ManifestStore, drop: tuple[int, ...]) -> None:
    _state["manifests"] = manifests
    for fd in drop:
        with contextlib.suppress(OSError):
            os.close(fd)
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # Linux: die with the run
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _read(folder: str) -> Read:
    """The records of one shard folder, as ``ManifestStore.everything`` reads each: a
    damaged one noted, a stray (not where its key puts it) or an odd name passed over."""
    manifests: ManifestStore = _state["manifests"]
    found: list[Record] = []
    damaged: list[PurePosixPath] = []
    for path in manifests.store.files(folder):
        if path.suffix != ".json":
            continue
        try:
            raw = manifests.store.read(path)
        except LayoutError:
            continue
        if raw is None:
            continue
        record = sound(parse_record(raw))
        if record is None:
            damaged.append(path)
        elif manifests.key_path(record.key) == path:
            found.append(record)
    reached("fill.read")
    return found, damaged
