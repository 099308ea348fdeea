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


# Never a root: the file system's own top, and folders that hold the system's or everyone's
# files (a root there would write shard folders among them, and nginx would serve them).
SYSTEM_FOLDERS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
    "/usr/local", "/var", "/var/tmp", "/var/lib", "/var/log", "/dev/shm", "/run/shm",
    "/var/cache"})
# Nor anything under these: the kernel's views, devices, the system's programs and settings
# (/dev/shm is the exception: the RAM tier's private folder is made there).
SYSTEM_TREES = ("/proc", "/sys", "/dev", "/boot", "/etc", "/bin", "/sbin", "/lib", "/lib32",
                "/lib64", "/libx32", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32",
                "/usr/lib64", "/usr/libexec", "/usr/include")
SHARED_MEMORY = "/dev/shm/"


def not_system(path: Path, what: str) -> None:
    """SettingsError when ``path`` (links followed) is ``/``, a system folder, or a folder
    under one (/etc, /usr/lib, /proc...): a root is a folder of imgwarm's own."""
    real = os.path.realpath(path)
    tree = next((t for t in SYSTEM_TREES if real.startswith(t + "/")), None)
    if real.startswith(SHARED_MEMORY):
        tree = None
    if real == "/":
        shown = "the whole file system (/)"
    elif real in SYSTEM_FOLDERS:
        shown = "a system folder" + (f" ({real})" if real != str(path) else "")
    elif tree is not None:
        shown = f"under a system folder ({tree})"
    else:
        return
    raise SettingsError(f"{what} {path} is {shown}: a root must be a folder of imgwarm's own; "
                        "give another path (under /srv/imgwarm, or a home folder)")


def check_root(path: Path, what: str, *, any_owner: bool = False) -> None:
    """SettingsError unless ``path`` can be a root: not a system folder, no folder above it
    that another user could swap, and, when it exists, this user's and not writable by group
    or others. Nothing is made (``make_private`` makes a missing one). ``any_owner``: whoever
    owns it and the folders above (root writing the config of a service that runs as another
    user); what group or others may write is still refused."""
    not_system(path, what)
    check_ancestors(path, what, any_owner=any_owner)
    check_private(path, what, any_owner=any_owner)


def apart(folders: dict[str, Path]) -> None:
    """SettingsError when two of the named folders are one, or one holds the other (after
    links are followed): each would take the other's files for its own. ``/`` or a system
    folder is refused first: it holds every other folder, and is never a root."""
    for name, folder in folders.items():
        not_system(folder, name)
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


def check_private(path: Path, what: str, *, any_owner: bool = False) -> None:
    """SettingsError unless ``path`` (when it exists) is a real folder owned by this user
    (any user: ``any_owner``) and not writable by group or others. Checked without following
    a link."""
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
    if info.st_uid != uid and not any_owner:
        raise SettingsError(
            f"{what} {path} is owned by uid {info.st_uid}, not by this user ({uid}): another "
            f"user made it and could decide what is served; remove it (rm -rf {path}) or "
            f"give another path")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SettingsError(
            f"{what} {path} is writable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): anyone could change what is served; "
            f"chmod go-w {path}")


def check_ancestors(path: Path, what: str, *, any_owner: bool = False) -> None:
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
        foreign = info.st_uid not in (uid, 0) and not any_owner
        if foreign or (open_to_others and not info.st_mode & stat.S_ISVTX):
            raise SettingsError(
                f"{what} {path}: the folder {folder} above it is "
                + (f"owned by uid {info.st_uid}" if foreign else
                   f"writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})")
                + ": another user could replace what is served; use a folder of your own "
                "(or root's) that only you can write")


def missing_folders(path: Path) -> list[Path]:
    """The folders of ``path`` (absolute) that are not there, outermost first."""
    missing: list[Path] = []
    here = Path(os.path.abspath(path))
    while not os.path.lexists(here):
        missing.append(here)
        here = here.parent
    return missing[::-1]


def make_private(path: Path, what: str, *, mode: int = 0o755) -> None:
    """Make ``path`` and the parents it lacks (each ``mode``, whatever the umask), checking
    the folder if it is there and every one above it: never a folder another user made or
    may write. (0755, not 0700: nginx's workers, another user, read the files.)"""
    not_system(path, what)
    check_ancestors(path, what)
    missing = missing_folders(path)
    if not missing:
        check_private(path, what)
    for folder in missing:
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
        except OSError as error:
            raise SettingsError(f"cannot make {what} {folder}: {error.strerror}") from None
        check_private(folder, what)
        os.chmod(folder, mode, follow_symlinks=False)
