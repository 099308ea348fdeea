"""Listing a sharded tree: the first level's folders listed side by side, so that an S3 bucket
answers many pages at once instead of one after the other (each page is a round trip)."""

from __future__ import annotations

import os
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
LOCAL_LISTINGS = 2  # a local walk is threaded already (LocalStore.files)
T = TypeVar("T")
R = TypeVar("R")


def sharded(store: Store, layout: Layout, under: str = "", *, times: bool = True,
            tops: Iterable[str] | None = None) -> Iterator[tuple[PurePosixPath, float]]:
    """Every file in the shard folders below ``under`` (only the first-level folders
    ``tops`` when given: a slice's, or one at a time), with the time it was written (0.0
    unless ``times``: a local file's costs a stat); files beside the shard folders (a
    journal, markers of other kinds) are not listed. Folder after folder, in the order of
    ``tops``: a caller can stream one at a time."""
    chosen = layout.tops() if tops is None else list(tops)
    tops = [f"{under}/{top}" if under else top for top in chosen]
    local = isinstance(store, LocalStore)

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


def listed_times(store: Store) -> bool:
    """Whether a listing gives each file's time for free (S3's pages do; a local file's
    costs a stat, an inode read on a cold disk: ``written`` looks up only the few needed)."""
    return not isinstance(store, LocalStore)


def written(store: Store, key: str) -> float:
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
