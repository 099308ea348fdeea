"""Tiers: the folders a cache server answers from, RAM (a tmpfs) then NVMe, each a Store with
exactly the origin's layout, so that one nginx ``try_files $uri`` finds a file in any of them.

A tier carries an identity file; the index remembers it. A tmpfs is empty after a reboot, and a
disk may be swapped or wiped: a tier whose identity is missing or different is taken as empty
and filled again. The RAM tier must be on a tmpfs (checked on the mount it is on), or it is not
in RAM at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imgwarm.exceptions import SettingsError
from imgwarm.nesting import check_nesting
from imgwarm.roots import apart, make_private
from imgwarm.store.local import LocalStore

if TYPE_CHECKING:
    from imgwarm.config import Settings

IDENTITY = ".imgwarm-tier"  # a dot file: nginx serves no dot files


def _libc_syncfs() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_syncfs = _libc_syncfs()


def filesystem_type(path: Path) -> str:
    """The type of the file system ``path`` is (or would be) on, from the mount table."""
    target = os.path.realpath(path)
    while not os.path.exists(target):
        target = os.path.dirname(target)
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
            for line in table:
                fields = line.split()
                point = fields[4].replace("\\040", " ")
                separator = fields.index("-")
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[separator + 1]
    except (OSError, ValueError, IndexError):
        return "unknown"
    return kind


class Tier(LocalStore):
    """A tier: a local store (no fsync a file: ``warm`` syncs once at the end of a run) with an
    identity, a file system to measure, and a name (``ram``, ``nvme``)."""

    def __init__(self, name: str, root: Path, *, max_entries: int) -> None:
        super().__init__(root, max_entries=max_entries, fsync=False)
        self.name = name

    def identity(self) -> str | None:
        try:
            text = (self.root / IDENTITY).read_text()
            check_nesting(text, 2)  # {"id": ..., "tier": ...}
            return str(json.loads(text)["id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def new_identity(self) -> str:
        """Give the tier a new identity (after it was found empty or strange)."""
        self.root.mkdir(parents=True, exist_ok=True)
        value = uuid.uuid4().hex
        body = json.dumps({"id": value, "tier": self.name}).encode()
        self.write(IDENTITY, body, replace=True)
        return value

    def sync(self) -> None:
        """Flush what was written to this tier's file system (syncfs: not every disk's)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if _syncfs is None or _syncfs(fd) != 0:
                os.sync()
        finally:
            os.close(fd)

    def space(self) -> tuple[int, int]:
        """(total, free) bytes of the tier's file system."""
        self.root.mkdir(parents=True, exist_ok=True)
        info = os.statvfs(self.root)
        return info.f_blocks * info.f_frsize, info.f_bavail * info.f_frsize

    def block_size(self) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
        return os.statvfs(self.root).f_bsize or 4096

    def size_of(self, key: str) -> int | None:
        with contextlib.suppress(OSError):
            return self.path(key).stat().st_size
        return None


@dataclass
class Tiers:
    ram: Tier
    nvme: Tier

    @classmethod
    def open(cls, ram_root: Path, nvme_root: Path, *, max_entries: int,
             allow_non_tmpfs: bool, others: dict[str, Path] | None = None) -> Tiers:
        """The tiers, refused when the RAM root is not on a tmpfs, or when a tier and another
        folder (``others``: the cache state, the origin) are one inside the other: ``--full``
        would take the other's files for strays."""
        kind = filesystem_type(ram_root)
        if kind != "tmpfs" and not allow_non_tmpfs:
            raise SettingsError(
                f"the RAM tier {ram_root} is on {kind}, not tmpfs: it would not be in RAM. "
                f"Mount one (mount -t tmpfs -o size=4G,mode=0755 tmpfs {ram_root}) or set "
                "ram_root "
                "(IMGWARM_RAM_ROOT) to a folder on one (/dev/shm is); ram_allow_non_tmpfs "
                "(IMGWARM_RAM_ALLOW_NON_TMPFS) takes it anyway")
        apart({"ram_root": ram_root, "nvme_root": nvme_root, **(others or {})})
        # whoever owns a tier root, or may write it or swap a folder above it, decides what
        # nginx serves under URLs cached for a year: refused, and made private when missing
        make_private(ram_root, "the RAM tier (ram_root)")
        make_private(nvme_root, "the NVMe tier (nvme_root)")
        return cls(Tier("ram", ram_root, max_entries=max_entries),
                   Tier("nvme", nvme_root, max_entries=max_entries))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.ram, self.nvme))


def open_tiers(settings: Settings) -> Tiers:
    """This cache server's tiers, checked apart from its other folders."""
    cache = settings.cache
    others = {"cache_state": cache.cache_state}
    if settings.store.origin == "local":
        others |= {"origin_root": settings.store.origin_root,
                   "manifest_root": settings.store.manifest_root}
    return Tiers.open(cache.ram_root, cache.nvme_root, max_entries=settings.store.max_dir_entries,
                      allow_non_tmpfs=cache.ram_allow_non_tmpfs, others=others)
