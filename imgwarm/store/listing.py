"""Listing a sharded tree: the first level's folders listed side by side, so that an S3 bucket
answers many pages at once instead of one after the other (each page is a round trip)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

from imgwarm.exceptions import StorageError
from imgwarm.store.base import Store
from imgwarm.store.layout import Layout
from imgwarm.store.local import LocalStore

S3_LISTINGS = 16  # listings in flight
LOCAL_LISTINGS = 2  # a local walk is threaded already (LocalStore.files)


def sharded(store: Store, layout: Layout, under: str = "", *, times: bool = True
            ) -> Iterator[tuple[PurePosixPath, float]]:
    """Every file in the shard folders below ``under``, with the time it was written (0.0
    unless ``times``: a local file's costs a stat); files beside the shard folders (a
    journal, markers of other kinds) are not listed."""
    tops = [f"{under}/{top}" if under else top for top in layout.tops()]
    local = isinstance(store, LocalStore)

    def listed(top: str) -> list[tuple[PurePosixPath, float]]:
        if times or not local:
            return list(store.stamped(top))
        return [(key, 0.0) for key in store.files(top)]

    with ThreadPoolExecutor(LOCAL_LISTINGS if local else S3_LISTINGS) as pool:
        for found in pool.map(listed, tops):
            yield from found


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
