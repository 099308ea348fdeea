"""Roots: the folders imgwarm writes and nginx serves, kept apart from one another and private
to the user who runs imgwarm (a root another local user made, or may write, decides what
nginx serves under URLs cached for a year)."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from imgwarm.exceptions import SettingsError

if TYPE_CHECKING:
    from imgwarm.config import Settings


def apart(folders: dict[str, Path]) -> None:
    """SettingsError when two of the named folders are one, or one holds the other (after
    links are followed): each would take the other's files for its own."""
    real = {name: os.path.realpath(folder) for name, folder in folders.items()}
    for (a, path_a), (b, path_b) in itertools.combinations(real.items(), 2):
        if path_a == path_b or path_a.startswith(path_b.rstrip("/") + "/") or \
                path_b.startswith(path_a.rstrip("/") + "/"):
            raise SettingsError(f"{a} ({folders[a]}) and {b} ({folders[b]}) must be apart: "
                                "one holds the other")


def stores_roots(settings: Settings) -> dict[str, Path]:
    """The folders of this machine's stores, by setting name: what a served folder must keep
    apart from (the origin and manifest roots only when they are local folders)."""
    found = {"cache_state": settings.cache.cache_state, "ram_root": settings.cache.ram_root,
             "nvme_root": settings.cache.nvme_root}
    if settings.store.origin == "local":
        found |= {"origin_root": settings.store.origin_root,
                  "manifest_root": settings.store.manifest_root}
    return found


def check_private(path: Path, what: str) -> None:
    """SettingsError unless ``path`` (when it exists) is a real folder owned by this user and
    not writable by group or others. Checked without following a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise SettingsError(f"{what} {path}: {error.strerror}") from None
    uid = os.geteuid()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SettingsError(f"{what} {path} is not a folder but a "
                            f"{'link' if stat.S_ISLNK(info.st_mode) else 'file'}: remove it, "
                            "or give another path")
    if info.st_uid != uid:
        raise SettingsError(
            f"{what} {path} is owned by uid {info.st_uid}, not by this user ({uid}): another "
            f"user made it and could decide what is served; remove it (rm -rf {path}) or "
            f"give another path")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SettingsError(
            f"{what} {path} is writable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): anyone could change what is served; "
            f"chmod go-w {path}")


def check_ancestors(path: Path, what: str) -> None:
    """SettingsError when a folder above ``path`` could let another user swap it: each must be
    this user's or root's, and writable by group or others only with the sticky bit (as /tmp
    and /dev/shm are: there only an entry's owner may rename or remove it)."""
    uid = os.geteuid()
    for folder in Path(os.path.abspath(path)).parents:
        try:
            info = os.stat(folder)
        except OSError:
            continue
        open_to_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if info.st_uid not in (uid, 0) or (open_to_others and not info.st_mode & stat.S_ISVTX):
            raise SettingsError(
                f"{what} {path}: the folder {folder} above it is "
                + (f"owned by uid {info.st_uid}" if info.st_uid not in (uid, 0) else
                   f"writable by others (mode {stat.S_IMODE(info.st_mode):04o})")
                + ": another user could replace what is served; use a folder of your own "
                "(or root's) that only you can write")


def make_private(path: Path, what: str, *, mode: int = 0o755) -> None:
    """Make ``path`` and the parents it lacks (each ``mode``, whatever the umask), checking
    the folder if it is there and every one above it: never a folder another user made or
    may write. (0755, not 0700: nginx's workers, another user, read the files.)"""
    check_ancestors(path, what)
    missing: list[Path] = []
    here = Path(os.path.abspath(path))
    while not os.path.lexists(here):
        missing.append(here)
        here = here.parent
    if not missing:
        check_private(path, what)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
        except OSError as error:
            raise SettingsError(f"cannot make {what} {folder}: {error.strerror}") from None
        check_private(folder, what)
        os.chmod(folder, mode, follow_symlinks=False)
