"""Local store: a root folder of files written atomically (the Store of ``base.py``).

A file is written unnamed (O_TMPFILE) in its final folder, flushed, then linked under its
name, so a crash leaves either the whole file or nothing at all. Where the file system has
no O_TMPFILE, a hidden temporary name is used and renamed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from imgwarm.exceptions import LayoutError, ObjectTooLarge, StorageError, TransientStorageError
from imgwarm.roots import missing_folders
from imgwarm.store.base import Key
from imgwarm.store.fdio import UMASK as _UMASK
from imgwarm.store.fdio import proc_fds as _proc_fds
from imgwarm.store.fdio import read_all as _read_all
from imgwarm.store.fdio import write_all as _write_all
from imgwarm.store.layout import join_under, safe_relative

TEMP_PREFIX = ".tmp-"  # hidden: nginx is told never to serve dot files
TEMP_SUFFIX = ".part"
STALE_TEMP_SECONDS = 3600
# Folders are made 0755 at most whatever the umask: a group or others that could write one
# could put files where nginx serves them (the umask may still take more away).
FOLDER_MODE = 0o755
WALK_THREADS = 4  # measured cold and warm: more spend longer on the interpreter lock


def _unlistable(error: OSError) -> None:
    """A folder that cannot be read fails the listing: its files must not pass for gone."""
    raise StorageError(f"cannot list {error.filename}: {error.strerror}")


def make_folders(folder: Path) -> None:
    """``folder`` and the parents it lacks, each FOLDER_MODE (Path.mkdir makes parents with
    the umask's mode: 0775 under a web app's usual 002, a folder its group could write)."""
    for each in missing_folders(folder):
        with contextlib.suppress(FileExistsError):
            os.mkdir(each, FOLDER_MODE)


def _temporary(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


class _FolderGone(StorageError):
    """The folder was removed while a file was written into it (``prune`` of an empty one)."""


def _write_error(target: Path, error: OSError) -> StorageError:
    """A full disk or quota may be freed: queued jobs retry on it; anything else is final."""
    if error.errno == errno.ENOENT:
        return _FolderGone(f"cannot write {target}: its folder was removed meanwhile")
    kind = TransientStorageError if error.errno in (errno.ENOSPC, errno.EDQUOT) else StorageError
    return kind(f"cannot write {target}: {error.strerror}")


class LocalStore:
    """Files under a local folder; keys are relative POSIX paths.

    Every file operation goes through the descriptor of the file's folder, and that folder is
    checked to be inside the root where it was opened (its /proc/self/fd link): a folder swapped
    for a symlink that leads out, at any moment, is refused, and nothing is read, written or
    removed through it. A file that is itself a symlink is read only when it resolves inside."""

    def __init__(self, root: Path, *, max_entries: int = 255, fsync: bool = True) -> None:
        self.root = root
        self.max_entries = max_entries
        self.fsync = fsync
        self._proc = Path("/proc/self/fd").is_dir()
        self._tmpfile = hasattr(os, "O_TMPFILE") and self._proc
        self._real_root: str | None = None
        # the store's format gate (store/format.py), asked before each read and write;
        # None for the gate's own store and for stores that are no origin (tiers)
        self.guard: Callable[[str], None] | None = None

    def _guard(self, mode: str) -> None:
        if self.guard is not None:
            self.guard(mode)

    def path(self, key: Key) -> Path:
        """The file of a key under the root (checked as a key; the folders on the way are
        checked where a file is opened)."""
        return self.root / safe_relative(key)

    def _inside(self, fd: int, shown: Path | str) -> None:
        """Refuse (LayoutError) a descriptor whose file or folder is not inside the root."""
        if not self._proc:
            join_under(self.root, os.path.relpath(shown, self.root))
            return
        real = os.readlink(f"/proc/self/fd/{fd}")
        if self._real_root is None:  # the root exists by now: where it is, once
            self._real_root = os.path.realpath(self.root)
        root = self._real_root
        if real != root and not real.startswith(root.rstrip("/") + "/"):
            raise LayoutError(f"refusing {shown}: it resolves outside {self.root} ({real})")

    def _folder(self, folder: Path, *, make: bool = False) -> int:
        """The descriptor of ``folder``, checked inside the root; made first when ``make``.
        FileNotFoundError when it does not exist (and not ``make``)."""
        return self._opened_folder(folder, make=make)[0]

    def _opened_folder(self, folder: Path, *, make: bool) -> tuple[int, bool]:
        """``_folder``, and whether this call made it (then it is known to be empty)."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        made = False
        try:
            fd = os.open(folder, flags)
        except FileNotFoundError:
            if not make:
                raise
            try:
                os.mkdir(folder, FOLDER_MODE)
                made = True
            except FileNotFoundError:  # its parents first
                make_folders(folder.parent)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, FOLDER_MODE)
                    made = True
            except FileExistsError:  # another writer's, meanwhile
                pass
            fd = os.open(folder, flags)
        try:
            self._inside(fd, folder)
        except BaseException:
            os.close(fd)
            raise
        return fd, made

    def exists(self, key: Key) -> bool:
        self._guard("read")
        return self.path(key).is_file()

    def size(self, key: Key) -> int | None:
        info = self._stat(key)
        return info.st_size if info is not None and stat.S_ISREG(info.st_mode) else None

    def modified(self, key: Key) -> float | None:
        """When the file at ``key`` was last written; None when there is none."""
        info = self._stat(key)
        return info.st_mtime if info is not None else None

    def _stat(self, key: Key) -> os.stat_result | None:
        self._guard("read")
        try:
            return os.stat(self.path(key), follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise StorageError(f"cannot look up {self.path(key)}: {error.strerror}") from None

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None:
        """The bytes of a regular file; None when there is none. LayoutError when the file, or
        a folder on its way, resolves outside the root."""
        self._guard("read")
        path = self.path(key)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block the open
        try:
            try:
                fd = os.open(path, flags | os.O_NOFOLLOW)
            except OSError as error:
                if error.errno != errno.ELOOP:
                    raise
                fd = os.open(path, flags)  # a symlink: read where it leads, if inside
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as error:
            raise StorageError(f"cannot read {path}: {error.strerror}") from None
        try:
            self._inside(fd, path)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # not a folder, FIFO or device
                return None
            if limit is not None and info.st_size > limit:
                raise ObjectTooLarge(info.st_size)
            try:
                return _read_all(fd, info.st_size)
            except OSError as error:
                raise StorageError(f"cannot read {path}: {error.strerror}") from None
        finally:
            os.close(fd)

    def describe(self, key: Key) -> str:
        return str(self.path(key))

    def write(self, key: Key, data: bytes, *, replace: bool = False) -> bool:
        """Write atomically; True when a file was written. An existing file is kept unless
        ``replace`` (content-addressed files never need replacing)."""
        self._guard("write")
        target = self.path(key)
        for attempt in range(2):
            try:
                folder, made = self._opened_folder(target.parent, make=True)
            except OSError as error:
                raise _write_error(target, error) from None
            try:
                return self._write_in(folder, target, data, replace, empty=made)
            except _FolderGone:
                if attempt:
                    raise
            finally:
                os.close(folder)
        raise AssertionError("unreachable")

    def _write_in(self, folder: int, target: Path, data: bytes, replace: bool, *,
                  empty: bool = False) -> bool:
        """``empty``: the folder was made for this file (nothing to look for, room for it)."""
        name = target.name
        there = False
        if not empty:
            with contextlib.suppress(FileNotFoundError):
                there = stat.S_ISREG(os.stat(name, dir_fd=folder).st_mode)
        if there and not replace:
            return False
        temp = None
        try:
            if not there and not empty:  # replacing adds no entry to the folder
                self._check_room(folder, target.parent)
            fd = self._unnamed(folder)
            if fd is None:
                temp = f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644,
                             dir_fd=folder)
        except OSError as error:
            raise _write_error(target, error) from None
        try:
            try:
                _write_all(fd, data)
                if self.fsync:
                    os.fsync(fd)
                if _UMASK & 0o644:  # nginx workers must read it
                    os.fchmod(fd, 0o644)
                if temp is None:
                    return self._link(fd, folder, name, replace)
            finally:
                os.close(fd)
            if not replace:
                try:  # a new name: linked, so that a file already there wins
                    os.link(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
                except FileExistsError:
                    return False
                finally:
                    os.unlink(temp, dir_fd=folder)
                return True
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as error:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=folder)
            raise _write_error(target, error) from None
        return True

    def _unnamed(self, folder: int) -> int | None:
        """An unnamed file in ``folder`` (O_TMPFILE): a process killed while writing it leaves
        nothing behind. None where the file system cannot (then a named temp file is used)."""
        if not self._tmpfile:
            return None
        try:
            return os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o644, dir_fd=folder)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            self._tmpfile = False
            return None

    @staticmethod
    def _link(fd: int, folder: int, name: str, replace: bool) -> bool:
        """Give the unnamed file its name in ``folder``. A new name is linked directly (atomic;
        an existing file wins, having the same content); a replaced one goes through a temp
        name."""
        # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N; os.link only asks for it with a dir fd.
        proc = _proc_fds()
        if not replace:
            try:
                os.link(str(fd), name, src_dir_fd=proc, dst_dir_fd=folder,
                        follow_symlinks=True)
            except FileExistsError:
                return False
            return True
        temp = f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
        os.link(str(fd), temp, src_dir_fd=proc, dst_dir_fd=folder, follow_symlinks=True)
        try:
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
        return True

    def create(self, key: Key, data: bytes) -> bool:
        """Write ``data`` only where no file is (a hard link that fails on one: atomic
        against any number of writers); True when this call wrote it."""
        return self.write(key, data)

    def delete(self, key: Key) -> None:
        self._guard("write")
        path = self.path(key)
        try:
            folder = self._folder(path.parent)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.name, dir_fd=folder)
        except IsADirectoryError:  # a key is a file's: never a folder's traceback
            raise StorageError(f"cannot delete {key}: it is a folder, not a file") from None
        finally:
            os.close(folder)

    def prune(self, folder: Key) -> None:
        """Remove ``folder`` if it is empty (a marker's, once its last marker went): left, each
        would count as an entry of its parent. A writer that had just opened it makes it
        again (``write`` tries twice)."""
        self._guard("write")
        path = self.path(folder)
        try:
            parent = self._folder(path.parent)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            os.rmdir(path.name, dir_fd=parent)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise StorageError(f"cannot remove {path}: {error.strerror}") from None
        finally:
            os.close(parent)

    def files(self, under: str = "") -> Iterator[PurePosixPath]:
        """Every file under ``under`` (temp files aside), in sorted order. The top folders are
        walked WALK_THREADS at a time: on a cold disk each folder read is a wait."""
        self._guard("read")
        top = self.path(under) if under else self.root
        if under and os.path.islink(top):
            return  # a link to a folder is not followed
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as error:
            raise StorageError(f"cannot list {top}: {error.strerror}") from None
        prefix = os.path.relpath(top, self.root)
        prefix = "" if prefix == "." else prefix + "/"
        folders = []
        for entry in entries:
            if entry.is_dir():  # as os.walk: a link to a folder is not followed, nor listed
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif not _temporary(entry.name):
                yield PurePosixPath(prefix + entry.name)
        if not folders:  # a leaf folder (a marker's): no pool to start
            return
        with ThreadPoolExecutor(WALK_THREADS) as pool:
            pending: deque[Future[list[str]]] = deque()
            for folder in folders:
                pending.append(pool.submit(self._walked, folder))
                if len(pending) >= 2 * WALK_THREADS:
                    yield from map(PurePosixPath, pending.popleft().result())
            while pending:
                yield from map(PurePosixPath, pending.popleft().result())

    def stamped(self, under: str = "") -> Iterator[tuple[PurePosixPath, float]]:
        for key in self.files(under):
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile: not there
                yield key, os.stat(self.root / key, follow_symlinks=False).st_mtime

    def _walked(self, top: str) -> list[str]:
        found: list[str] = []
        for folder, dirs, files in os.walk(top, onerror=_unlistable):  # links not followed
            relative = os.path.relpath(folder, self.root)
            dirs.sort()
            found.extend(f"{relative}/{name}" for name in sorted(files) if not _temporary(name))
        return found

    def _check_room(self, folder: int, shown: Path) -> None:
        """Refuse to grow a folder past the entry limit (the temp file counts as the +1).
        Temp files a crash left behind are cleared first when they are in the way."""
        count = len(os.listdir(folder))
        if count + 1 > self.max_entries and self._clear_stale_temps(folder):
            count = len(os.listdir(folder))
        if count + 1 > self.max_entries:
            raise LayoutError(
                f"folder {shown} already holds {count} entries (max_dir_entries = "
                f"{self.max_entries}); add shard_levels for a store this large"
            )

    @staticmethod
    def _clear_stale_temps(folder: int) -> bool:
        """Remove temp files older than STALE_TEMP_SECONDS (a live writer's are younger)."""
        cleared = False
        cutoff = time.time() - STALE_TEMP_SECONDS
        for name in os.listdir(folder):
            if _temporary(name):
                with contextlib.suppress(OSError):
                    if os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(name, dir_fd=folder)
                        cleared = True
        return cleared
