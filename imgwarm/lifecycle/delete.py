"""Delete: take a source down, at once, everywhere.

In order, each step safe to run again (a delete killed anywhere is finished by the next):

1. the tombstone replaces the source's manifest in the manifest store, and the journal says
   so: from here on no picture tag, preload map or ``warm`` names its variants;
2. the source's claims on its variants are released (references.py);
3. each variant leaves the origin unless another source names it (the same bytes under the
   same name): ``reclaim``; where the references were never built (a store older than them,
   or one that lost them), none is removed: gc's first run builds them and removes those;
4. with ``original``, the original itself goes (else it is left to the application).

Cache servers learn of it from the journal: their next ``warm`` removes the files from their
tiers. Browsers and CDNs that cached an immutable URL are out of imgwarm's reach
(docs/lifecycle.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imgwarm.exceptions import NotAnOriginal, StorageError, UnknownSource
from imgwarm.manifest import Manifest, Record, Tombstone
from imgwarm.racepoints import reached
from imgwarm.store import Stores, check_source_key, local_key
from imgwarm.store.format import WRITE
from imgwarm.store.local import LocalStore
from imgwarm.store.reclaim import reclaim


@dataclass
class Deletion:
    """What a delete did."""

    key: str
    already: bool = False  # a tombstone was there: this run finished or repeated it
    removed: list[str] = field(default_factory=list)  # variant paths gone from the origin
    kept: list[str] = field(default_factory=list)  # named by another source: left
    freed: int = 0  # bytes
    original: bool = False  # the original was removed
    # left for gc: the store's references are not built, so who else names them is unknown
    pending: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)  # the tombstone's: taken down, all of them
    back: bool = False  # when_gone, and the original is there again: nothing taken down

    def to_object(self) -> dict[str, Any]:
        return {"key": self.key, "ok": True, "already": self.already, "removed": self.removed,
                "kept": self.kept, "pending": self.pending, "bytes": self.freed,
                "original": self.original, "back": self.back}

    def line(self) -> str:
        if self.back:
            return f"kept      {self.key}: its original is there again (uploaded anew)"
        text = f"deleted   {self.key}: {len(self.removed)} variant(s), {self.freed:,} bytes"
        text += f"; {len(self.kept)} kept (named by another source)" if self.kept else ""
        text += (f"; {len(self.pending)} left for gc (this store's references are not built: "
                 "run imgwarm gc once)") if self.pending else ""
        text += "; original removed" if self.original else ""
        return text + (" (finished an earlier delete)" if self.already else "")


def resolve_key(key: str | os.PathLike[str], stores: Stores) -> str:
    """The manifest key a delete is given: a local file that was optimized is known by its
    real path; anything else must be a safe origin key (LayoutError names it, before
    anything is deleted). What ``imgwarm delete`` and ``imgwarm.delete`` both take."""
    found = local_key(Path(key))
    if stores.manifests.read(found) is not None:
        return found
    check_source_key(str(key))
    return str(key)


def delete(key: str, stores: Stores, *, original: bool = False, when_gone: bool = False,
           now: float | None = None) -> Deletion:
    """Take the source at ``key`` down (see the module's docstring). Raises LayoutError for an
    unsafe key, UnknownSource when nothing is known of it (and ``original`` is not asked),
    NotAnOriginal when ``original`` names a folder (before anything is written),
    StorageError when the origin or manifest store fails (run it again: it goes on).

    ``when_gone``: the takedown of a bucket event saying the original was removed. Jobs run
    in any order, so it checks first: an original that is there again (uploaded anew since)
    is not taken down (``back``); a key never made gets a tombstone all the same, so that a
    make still running from its upload does not publish it after this. FormatTooNew first
    when the store is newer than this code writes."""
    stores.check(WRITE)
    local_file = os.path.isabs(key)  # a local source's key is its absolute path
    if not local_file:
        check_source_key(key)
    manifests = stores.manifests
    if when_gone and not original and _original_exists(key, stores, local_file):
        return Deletion(key, back=True)
    previous = manifests.read(key)
    if previous is None and (local_file or not original) and not when_gone:
        raise UnknownSource(f"{key}: no manifest, failure or tombstone here (nothing deleted)")
    if original:  # before the tombstone: a delete refused leaves nothing behind
        _check_original(key, stores, local_file)
    done = Deletion(key, already=isinstance(previous, Tombstone))
    paths = [p for p in _named(previous) if stores.layout.holds(p)]  # never an original
    done.variants = paths
    wanted = original or (isinstance(previous, Tombstone) and previous.original)
    if not isinstance(previous, Tombstone) or wanted != previous.original:
        tomb = Tombstone(key=key, deleted=now or time.time(), variants=paths, original=wanted)
        manifests.put(tomb, previous)  # releases the claims and notes them dropped
    else:
        manifests.references.release(key, paths)  # a run killed before it did
    reached("delete.tombstoned")
    if not manifests.references.built():
        # Who else names a variant is known only from the references: without them (a store
        # made before them, or that lost them) a twin's files would go. gc's first run builds
        # them, reading every manifest, and removes what no other source names, at once.
        done.pending = paths
        return _finish_original(done, key, stores, local_file, wanted)
    for path in paths:
        freed = reclaim(stores.origin, manifests.references, path)
        if freed is None:
            done.kept.append(path)
        elif freed:  # (0: gone already, by an earlier run)
            done.removed.append(path)
            done.freed += freed
        manifests.references.forget_dropped(path)  # gone, or named: nothing for gc
    return _finish_original(done, key, stores, local_file, wanted)


def _finish_original(done: Deletion, key: str, stores: Stores, local_file: bool,
                     wanted: bool) -> Deletion:
    if wanted:
        _remove_original(key, stores, local_file)
        done.original = True
    return done


def _original_exists(key: str, stores: Stores, local_file: bool) -> bool:
    return os.path.isfile(key) if local_file else stores.origin.exists(key)


def _named(record: Record | None) -> list[str]:
    if isinstance(record, Manifest):
        return sorted({v.path for v in record.variants})
    return sorted(set(record.variants)) if isinstance(record, Tombstone) else []


def _check_original(key: str, stores: Stores, local_file: bool) -> None:
    origin = stores.origin
    if local_file:
        folder = os.path.isdir(key)
    elif isinstance(origin, LocalStore):
        folder = origin.path(key).is_dir()
    else:  # S3 has no folders: a key with no object but objects under it is one
        folder = not origin.exists(key) and next(iter(origin.files(key)), None) is not None
    if folder:
        raise NotAnOriginal(f"{key}: a folder, not an original file (deleting the original "
                            "removes one file); nothing deleted")


def _remove_original(key: str, stores: Stores, local_file: bool) -> None:
    if not local_file:
        stores.origin.delete(key)
        return
    try:  # a local source: the file it was made from (its key is the file's real path)
        os.unlink(key)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise StorageError(f"cannot remove the original {key}: {error.strerror}") from None
