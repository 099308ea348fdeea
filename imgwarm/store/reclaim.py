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

from imgwarm.racepoints import reached
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
    reached("reclaim.read")
    origin.delete(path)
    try:
        claimed = bool(references.holders(path))
    except BaseException:  # cannot tell whether it was claimed meanwhile: put it back
        origin.write(path, data)
        raise
    if claimed:  # claimed meanwhile: its source may have counted on it
        origin.write(path, data)  # (kept if that source wrote it again itself)
        return None
    return len(data)


def reclaim_listed(origin: Store, references: References, paths: list[str],
                   tick: Callable[[int], None]) -> dict[str, int | None]:
    """Remove variants that a listing of the claims showed named by none; per path, the
    bytes freed (0: not there) or None (claimed meanwhile: put back). ``tick`` counts them.
    A removal that fails does not stop the others, nor the look after them: the first
    error is raised once every removed file was checked (and put back where claimed)."""
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="imgwarm-reclaim-") as spool:

        def take(numbered: tuple[int, str]) -> tuple[str, int]:
            number, path = numbered
            try:
                data = origin.read(path)
                if data is None:
                    return path, 0
                Path(spool, str(number)).write_bytes(data)
            except Exception as error:  # (list.append: safe from the threads)
                errors.append(error)
                return path, 0
            try:
                origin.delete(path)
            except Exception as error:  # it may be gone all the same: checked with the rest
                errors.append(error)
            return path, len(data)

        def put_back(number: int, path: str) -> None:
            origin.write(path, Path(spool, str(number)).read_bytes())

        freed: dict[str, int | None] = {}
        with ThreadPoolExecutor(THREADS) as pool:
            for done, (path, size) in enumerate(pool.map(take, enumerate(paths)), start=1):
                freed[path] = size
                tick(done)
        try:
            claimed = references.by_variant()  # listed after every removal: misses no claim
        except BaseException:  # cannot tell which were claimed meanwhile: all go back
            for number, path in enumerate(paths):
                if freed[path]:
                    put_back(number, path)
            raise
        for number, path in enumerate(paths):
            if freed[path] and claimed.get(path):
                put_back(number, path)
                freed[path] = None
    if errors:
        raise errors[0]
    return freed
