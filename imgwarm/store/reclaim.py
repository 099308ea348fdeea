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

import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from imgwarm.exceptions import StorageError
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
        _put_back(origin, path, data)
        raise
    if claimed:  # claimed meanwhile: its source may have counted on it
        _put_back(origin, path, data)  # (kept if that source wrote it again itself)
        return None
    return len(data)


def _put_back(origin: Store, path: str, data: bytes) -> None:
    """Write a removed variant back; where that fails, its bytes are kept on local disk and
    the error says where (they are never only in memory when this raises)."""
    try:
        origin.write(path, data)
    except Exception as error:
        rescue = Path(tempfile.mkdtemp(prefix="imgwarm-rescue-"), PurePosixPath(path).name)
        rescue.write_bytes(data)
        raise StorageError(f"{path} was claimed while it was removed, and putting it back "
                           f"failed ({error}): copy {rescue} back to it") from error


def reclaim_listed(origin: Store, references: References, paths: list[str],
                   tick: Callable[[int], None], tops: list[str] | None = None
                   ) -> dict[str, int | None]:
    """Remove variants that a listing of the claims showed named by none; per path, the
    bytes freed (0: not there) or None (claimed meanwhile: put back). ``tick`` counts them.
    A removal that fails does not stop the others, nor the look after them: the first
    error is raised once every removed file was checked (and put back where claimed).
    ``tops``: the first-level folders the paths are in, when known (only theirs listed)."""
    errors: list[BaseException] = []
    spool = tempfile.mkdtemp(prefix="imgwarm-reclaim-")
    lost: list[str] = []  # removed, claimed (or not known not to be), and not put back

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
        """Each on its own: one that fails does not leave the others out."""
        try:
            origin.write(path, Path(spool, str(number)).read_bytes())
        except Exception as error:
            errors.append(error)
            lost.append(f"{path} ({spool}/{number})")

    freed: dict[str, int | None] = {}
    with ThreadPoolExecutor(THREADS) as pool:
        for done, (path, size) in enumerate(pool.map(take, enumerate(paths)), start=1):
            freed[path] = size
            tick(done)
    try:
        try:
            claimed = references.by_variant(tops)  # listed after every removal: misses no claim
        except BaseException:  # cannot tell which were claimed meanwhile: all go back
            for number, path in enumerate(paths):
                if freed[path]:
                    put_back(number, path)
            raise
        for number, path in enumerate(paths):
            if freed[path] and claimed.get(path):
                put_back(number, path)
                freed[path] = None
    finally:
        if lost:  # their bytes stay in the spool, and the error says where
            raise StorageError(f"{len(lost)} claimed variant(s) could not be put back "
                               f"({errors[-1]}): copy them back from the spool: "
                               + ", ".join(lost[:5]) + (" ..." if len(lost) > 5 else ""))
        shutil.rmtree(spool, ignore_errors=True)
    if errors:
        raise errors[0]
    return freed
