"""Reclaim: remove variants from the origin unless a source names them.

A source claims a variant (references.py) before it looks whether the file is there: one that
finds it there does not write it again. So a variant is read before it is removed, and the
claims are looked at again after: a claim that came meanwhile gets its file back.

One at a time (``reclaim``), the claims are looked up for the variant before and after: two
look-ups, cheap on a local disk. Many at once on S3 (``reclaim_listed``), the claims are
listed once before (the caller's) and once after every removal, in parallel pages, instead of
two LIST requests a variant; the removed bytes wait in a spool on local disk meanwhile.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from imgwarm.store.base import Store
from imgwarm.store.references import References

THREADS = 16  # requests in flight


def reclaim(origin: Store, references: References, path: str) -> int | None:
    """Remove the variant at ``path``; the bytes freed (0: it was not there), or None when a
    source names it (then it stays, or is put back)."""
    if references.holders(path):
        return None
    data = origin.read(path)
    if data is None:
        return 0
    origin.delete(path)
    if references.holders(path):  # claimed meanwhile: its source may have counted on it
        origin.write(path, data)  # (kept if that source wrote it again itself)
        return None
    return len(data)


def reclaim_listed(origin: Store, references: References, paths: list[str],
                   tick: Callable[[int], None]) -> dict[str, int | None]:
    """Remove variants that a listing of the claims showed named by none; per path, the
    bytes freed (0: not there) or None (claimed meanwhile: put back). ``tick`` counts them."""
    with tempfile.TemporaryDirectory(prefix="imgwarm-reclaim-") as spool:

        def take(numbered: tuple[int, str]) -> tuple[str, int]:
            number, path = numbered
            data = origin.read(path)
            if data is None:
                return path, 0
            Path(spool, str(number)).write_bytes(data)
            origin.delete(path)
            return path, len(data)

        freed: dict[str, int | None] = {}
        with ThreadPoolExecutor(THREADS) as pool:
            for done, (path, size) in enumerate(pool.map(take, enumerate(paths)), start=1):
                freed[path] = size
                tick(done)
        claimed = references.by_variant()  # listed after every removal: misses no claim
        for number, path in enumerate(paths):
            if freed[path] and claimed.get(path):
                origin.write(path, Path(spool, str(number)).read_bytes())
                freed[path] = None
    return freed
