"""What a watched folder holds for ``imgwarm watch``: which names it takes, which roots it
refuses or passes over, and what changed while no watcher ran (the catch-up's candidates)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from imgwarm.config import Settings
from imgwarm.exceptions import SettingsError
from imgwarm.formats import SOURCE_SUFFIXES
from imgwarm.manifest import Failure, Manifest, Record, Tombstone
from imgwarm.store import Stores
from imgwarm.store.listing import write_time

# What is still being written, by the tools that write in place and rename when done: browsers
# (.crdownload, .part, .download, .opdownload), curl/wget/aria2 (.part, .aria2), WinSCP
# (.filepart), editors (.swp, .swx, x~, .#x: Emacs's lock), Office (~$x), rsync (.x.XXXXXX: a
# dot name). Most do not end in an image suffix anyway; the list says so for those that might.
TEMPORARY_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".download",
                      ".opdownload", ".filepart", ".aria2", ".swp", ".swx", ".bak", ".!qb")


def taken(name: str) -> bool:
    """Whether a file of this name is one to make: an image suffix, no dot or ``~`` first
    (hidden, rsync's and editors' temporary files, imgwarm's own), no temporary ending."""
    lower = name.lower()
    return not (name.startswith((".", "~")) or name.endswith("~")
                or lower.endswith(TEMPORARY_SUFFIXES)
                or os.path.splitext(lower)[1] not in SOURCE_SUFFIXES)


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Folders:
    """The watched folders (real paths) and imgwarm's own roots to pass over inside them."""

    watched: tuple[str, ...]
    skipped: tuple[str, ...]

    @classmethod
    def of(cls, folders: Iterable[os.PathLike[str] | str], settings: Settings) -> Folders:
        """SettingsError (one line) for a folder that is not one, or that holds nothing but
        imgwarm's own files (a root itself, or inside the manifests or a tier)."""
        watched: list[str] = []
        store, cache = settings.store, settings.cache
        own = {"origin_root": store.origin_root, "manifest_root": store.manifest_root,
               "nvme_root": cache.nvme_root, "ram_root": cache.ram_root,
               "cache_state": cache.cache_state}
        roots = {name: os.path.realpath(path) for name, path in own.items()}
        for folder in folders:
            real = os.path.realpath(folder)
            if not os.path.isdir(real):
                raise SettingsError(f"watch: {folder} is not a folder")
            for name, root in roots.items():
                # (inside the origin is fine: an uploads folder beside the shard folders)
                if real == root or (name != "origin_root" and inside(real, root)):
                    raise SettingsError(f"watch: {folder} is imgwarm's own {name} ({root}): "
                                        "watch the folder the uploads land in")
            watched.append(real)
        # a folder inside another given is watched as part of it (one event, one walk)
        tops = [w for w in dict.fromkeys(watched)
                if not any(w != o and inside(w, o) for o in watched)]
        skipped = tuple(sorted({r for r in roots.values() if any(inside(r, w) for w in tops)}))
        return cls(tuple(tops), skipped)

    def takes(self, path: str) -> bool:
        """A path (real) this watcher makes: under a watched folder, not under one of
        imgwarm's roots, of a name that is taken, in no hidden folder."""
        folder = next((w for w in self.watched if inside(path, w)), None)
        if folder is None or path == folder or any(inside(path, s) for s in self.skipped):
            return False
        parts = PurePosixPath(os.path.relpath(path, folder)).parts
        return taken(parts[-1]) and not any(p.startswith(".") for p in parts[:-1])

    def within(self, path: str) -> str:
        """The watched folder that holds ``path`` (a link in it must stay inside it)."""
        return next(w for w in self.watched if inside(path, w))

    def files(self) -> Iterator[tuple[str, os.stat_result]]:
        """Every file taken under the folders, with its stat (links are not followed)."""
        for top in self.watched:
            for folder, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and not any(inside(os.path.join(folder, d), s)
                                             for s in self.skipped))
                for name in sorted(names):
                    path = os.path.join(folder, name)
                    if not self.takes(path):
                        continue
                    try:
                        info = os.lstat(path)
                    except OSError:
                        continue  # gone meanwhile: its event says so
                    if stat.S_ISREG(info.st_mode):
                        yield path, info


def open_for_writing() -> set[tuple[int, int]]:
    """(device, inode) of every file a process of ours holds open for writing, from /proc:
    the catch-up leaves those to the close event that will come. Others' processes cannot be
    seen; where /proc is not there, none are."""
    found: set[tuple[int, int]] = set()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                    flags = next((int(line.split()[1], 8) for line in info
                                  if line.startswith("flags:")), 0)
                if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
                    target = os.stat(f"/proc/{pid}/fd/{fd}")
                    if stat.S_ISREG(target.st_mode):
                        found.add((target.st_dev, target.st_ino))
            except (OSError, ValueError, IndexError):
                continue
    return found


def changed(folders: Folders, stores: Stores, since: float,
            key_of: Callable[[str], str]) -> Iterator[str]:
    """Files to make: no record yet, or one older than the file's change time (written, or
    moved in, since it was made: the ctime, as a move or a copy that keeps the old mtime
    still sets it). Left out: empty files, files changed after ``since`` (the watcher
    started: their events come) and files open for writing now (their close comes)."""
    writing: set[tuple[int, int]] | None = None  # (read once a file asks: a /proc walk)
    manifests = stores.manifests
    for path, info in folders.files():
        if info.st_ctime >= since or not info.st_size:
            continue
        writing = open_for_writing() if writing is None else writing
        if (info.st_dev, info.st_ino) in writing:
            continue
        key = key_of(path)
        record = manifests.read(key)
        if record is None:
            yield path
            continue
        made = write_time(manifests.store, str(manifests.key_path(key)))
        if made < info.st_ctime and not _same(path, record):
            yield path


def _same(path: str, record: Record | None) -> bool:
    """Whether the file holds the bytes its record was made from (a file whose ctime moved
    without a write, by chmod or chown, is not made again at every start: the record of a
    source found unchanged is not rewritten)."""
    if not isinstance(record, Manifest | Failure) or record.source_sha256 is None:
        return False
    try:  # a regular file only: a FIFO swapped in would block, a link would lead elsewhere
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with open(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return False
            return hashlib.file_digest(handle, "sha256").hexdigest() == record.source_sha256
    except OSError:
        return False  # (its make says what is wrong)


def gone(folders: Folders, stores: Stores,
         path_of: Callable[[str], str | None]) -> Iterator[str]:
    """Files under the folders whose record stands (a manifest, a failure) and that are
    gone: removed while no watcher ran."""
    for record in stores.manifests.everything():
        path = None if isinstance(record, Tombstone) else path_of(record.key)
        if path is not None and folders.takes(path) and not os.path.lexists(path):
            yield path
