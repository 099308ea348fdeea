"""What warm wrote: a tier file's identity (device, inode, modification time in ns, size),
taken once warm placed it and kept in the index, so that a file found there later is trusted
only while it is still that very file. A file of the same size that warm did not write (one
planted before the root was found, or put in its place since) does not match, and is
replaced rather than served or copied on."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import NamedTuple

from imgwarm.cache.tiers import Tier
from imgwarm.exceptions import LayoutError


class Identity(NamedTuple):
    """A file's identity, as ``lstat`` gives it."""

    dev: int
    ino: int
    mtime_ns: int
    size: int


def identity_of(tier: Tier, path: str) -> Identity | None:
    """The identity of the regular file at ``path`` in the tier (a link is none)."""
    try:
        info = os.lstat(tier.path(path))
    except (OSError, LayoutError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return Identity(info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def identities(tier: Tier, paths: Iterable[str]) -> dict[str, Identity]:
    """The identities of those of ``paths`` that are regular files in the tier."""
    found = {path: identity_of(tier, path) for path in paths}
    return {path: known for path, known in found.items() if known is not None}


def unchanged(tier: Tier, recorded: dict[str, Identity]) -> set[str]:
    """Of the files recorded as written, those still the very files warm wrote."""
    return {path for path, known in recorded.items() if identity_of(tier, path) == known}
