"""Listing a sharded tree: the first level's folders listed side by side, so that an S3 bucket
answers many pages at once instead of one after the other (each page is a round trip)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

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
