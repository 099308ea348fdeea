"""Listing a sharded tree: the first level's folders listed side by side, so that an S3 bucket
answers many pages at once instead of one after the other (each page is a round trip); and a
small tree (one page) listed once, not once a folder."""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import PurePosixPath
from typing import TypeVar

from imgwarm.exceptions import StorageError
from imgwarm.store.base import Store
from imgwarm.store.layout import Layout
from imgwarm.store.local import LocalStore

S3_LISTINGS = 16  # listings in flight
PAGE = 1000  # keys in one S3 listing page
LOCAL_LISTINGS = 2  # a local walk is threaded already (LocalStore.files)
T = TypeVar("T")
R = TypeVar("R")


def sharded(store: Store, layout: Layout, under: str = "", *, times: bool = True,
            tops: Iterable[str] | None = None, listings: Listings | None = None
            ) -> Iterator[tuple[PurePosixPath, float]]:
    """Every file in the shard folders below ``under`` (only the first-level folders
    ``tops`` when given: a slice's, or one at a time), with the time it was written (0.0
    unless ``times``: a local file's costs a stat); files beside the shard folders (a
    journal, markers of other kinds) are not listed. Folder after folder, in the order of
    ``tops``: a caller can stream one at a time. On S3, a tree that fits in one page is
    listed once (for the whole tree; or once a pass, the first time ``listings`` is asked
    for it): a small bucket's 128 folders are not 128 round trips."""
    chosen = layout.tops() if tops is None else list(tops)
    local = isinstance(store, LocalStore)
    if not local:
        small = listings.whole(store, under) if listings else \
            (_small(store, under) if tops is None else None)
        if small is not None:
            yield from _by_top(small, under, chosen)
            return
    tops = [f"{under}/{top}" if under else top for top in chosen]

    def listed(top: str) -> list[tuple[PurePosixPath, float]]:
        if times or not local:
            return list(store.stamped(top))
        return [(key, 0.0) for key in store.files(top)]

    threads = LOCAL_LISTINGS if local else S3_LISTINGS
    with ThreadPoolExecutor(threads) as pool:  # (never all at once: map would hold them all)
        waiting: deque[Future[list[tuple[PurePosixPath, float]]]] = deque()
        for top in tops:
            waiting.append(pool.submit(listed, top))
            if len(waiting) > threads:
                yield from waiting.popleft().result()
        while waiting:
            yield from waiting.popleft().result()


class Listings:
    """What one pass over a store has found small: the whole tree under a prefix listed once,
    the first time a folder of it is asked for, and each folder read from it; None where it
    is more than a page (then each folder is listed on its own). Shared by threads."""

    def __init__(self) -> None:
        self._whole: dict[tuple[int, str], list[tuple[PurePosixPath, float]] | None] = {}
        self._lock = threading.Lock()

    def whole(self, store: Store, under: str) -> list[tuple[PurePosixPath, float]] | None:
        if isinstance(store, LocalStore):  # a folder of a local tree costs no round trip
            return None
        with self._lock:  # (one listing, in the order the pass first asks for each tree)
            if (id(store), under) not in self._whole:
                self._whole[id(store), under] = _small(store, under)
            return self._whole[id(store), under]


def _small(store: Store, under: str) -> list[tuple[PurePosixPath, float]] | None:
    """Everything under ``under`` when it fits in one page (two requests at most), else None."""
    found = list(itertools.islice(store.stamped(under), PAGE + 1))
    return found if len(found) <= PAGE else None


def _by_top(found: list[tuple[PurePosixPath, float]], under: str,
            tops: list[str]) -> Iterator[tuple[PurePosixPath, float]]:
    """The files of a whole listing below each of the first-level folders ``tops``, folder
    after folder in that order, as a listing of each folder would give them."""
    depth = len(PurePosixPath(under).parts) if under else 0
    wanted: dict[str, list[tuple[PurePosixPath, float]]] = {top: [] for top in tops}
    for path, when in found:
        if len(path.parts) > depth + 1 and path.parts[depth] in wanted:
            wanted[path.parts[depth]].append((path, when))
    for top in tops:
        yield from sorted(wanted[top])


def listed_times(store: Store) -> bool:
    """Whether a listing gives each file's time for free (S3's pages do; a local file's
    costs a stat, an inode read on a cold disk: ``written`` looks up only the few needed)."""
    return not isinstance(store, LocalStore)


def write_time(store: Store, key: str) -> float:
    """When the file at ``key`` was last written; 0.0 when it is gone (removed meanwhile)."""
    if isinstance(store, LocalStore):
        return store.modified(key) or 0.0
    folder = str(PurePosixPath(key).parent)  # a listing of its folder: S3 has no stat
    return next((when for found, when in store.stamped(folder) if str(found) == key), 0.0)


def empty(store: Store) -> bool:
    """Whether the store holds no file at all (a local root: its first entry; S3: one page)."""
    if isinstance(store, LocalStore):
        try:
            with os.scandir(store.root) as entries:
                return next(entries, None) is None
        except FileNotFoundError:
            return True
        except OSError as error:
            raise StorageError(f"cannot list {store.root}: {error.strerror}") from None
    return next(iter(store.files()), None) is None


def ahead(store: Store, items: Iterable[T], fetch: Callable[[T], R]) -> Iterator[tuple[T, R]]:
    """Each item with ``fetch(item)``, in order, the next few fetched meanwhile in threads
    (a store-wide pass lists folder after folder: one after the other, each listing a
    round trip, a bucket's 128 folders would wait on 384 of them in a row); at most a few
    folders' listings in hand, so memory stays one folder's share times a few."""
    depth = LOCAL_LISTINGS if isinstance(store, LocalStore) else S3_LISTINGS // 2
    with ThreadPoolExecutor(depth) as pool:
        waiting: deque[tuple[T, Future[R]]] = deque()
        for item in items:
            waiting.append((item, pool.submit(fetch, item)))
            if len(waiting) > depth:
                first, found = waiting.popleft()
                yield first, found.result()
        while waiting:
            first, found = waiting.popleft()
            yield first, found.result()
