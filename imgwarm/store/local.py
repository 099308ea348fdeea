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
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from imgwarm.exceptions import LayoutError, StorageError, TransientStorageError
from imgwarm.store.base import Key, ObjectTooLarge
from imgwarm.store.layout import join_under, safe_relative

TEMP_PREFIX = ".tmp-"  # hidden: nginx is told never to serve dot files
TEMP_SUFFIX = ".part"
STALE_TEMP_SECONDS = 3600
WALK_THREADS = 8
CHECKED_FOLDERS = 65536  # folders remembered as inside the root (then checked again)


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, for a moment, in every
    thread); when unknown, assume the strictest so that permissions are always set."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o777


_UMASK = _umask()  # a file made 0o644 comes out 0o644 unless the umask takes bits away


def _temporary(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def _write_error(target: Path, error: OSError) -> StorageError:
    """A full disk or quota may be freed: queued jobs retry on it; anything else is final."""
    kind = TransientStorageError if error.errno in (errno.ENOSPC, errno.EDQUOT) else StorageError
    return kind(f"cannot write {target}: {error.strerror}")


class LocalStore:
    """Files under a local folder; keys are relative POSIX paths."""

    def __init__(self, root: Path, *, max_entries: int = 255, fsync: bool = True) -> None:
        self.root = root
        self.max_entries = max_entries
        self.fsync = fsync
        self._tmpfile = hasattr(os, "O_TMPFILE") and Path("/proc/self/fd").is_dir()
        self._checked: set[PurePosixPath] = set()

    def path(self, key: Key) -> Path:
        """The file of a key, inside the root: refused when a folder on the way is a symlink
        that leads out (see ``read`` for the file itself)."""
        relative = safe_relative(key)
        self._check_folders(relative.parent)
        return self.root / relative

    def _check_folders(self, folder: PurePosixPath) -> None:
        """Resolving every folder of a path is most of the cost of a small file's write, so
        folders found inside are remembered (bounded) and only the new part of a path is
        looked at: one lstat a level, a full resolution only where a symlink is met."""
        todo = []
        while folder not in self._checked and folder.name:
            todo.append(folder)
            folder = folder.parent
        if len(self._checked) + len(todo) > CHECKED_FOLDERS:
            self._checked.clear()
        for step in reversed(todo):
            try:
                mode = os.lstat(self.root / step).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return  # the rest does not exist: mkdir makes it, as folders
            if stat.S_ISLNK(mode):
                join_under(self.root, step)  # LayoutError when it leads out
            self._checked.add(step)

    def exists(self, key: Key) -> bool:
        return self.path(key).is_file()

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None:
        """The bytes of a regular file; None when there is none. The file itself is opened
        without following a symlink; one found there is resolved, and refused if it leads out."""
        path = self.path(key)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block the open
        try:
            try:
                fd = os.open(path, flags | os.O_NOFOLLOW)
            except OSError as error:
                if error.errno != errno.ELOOP:
                    raise
                fd = os.open(join_under(self.root, key), flags)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as error:
            raise StorageError(f"cannot read {path}: {error.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # not a folder, FIFO or device
                return None
            if limit is not None and info.st_size > limit:
                raise ObjectTooLarge(info.st_size)
            try:
                return handle.read()
            except OSError as error:
                raise StorageError(f"cannot read {path}: {error.strerror}") from None

    def describe(self, key: Key) -> str:
        return str(self.path(key))

    def write(self, key: Key, data: bytes, *, replace: bool = False) -> bool:
        """Write atomically; True when a file was written. An existing file is kept unless
        ``replace`` (content-addressed files never need replacing)."""
        target = self.path(key)
        if not replace and target.is_file():
            return False
        try:
            if not (replace and target.exists()):  # replacing adds no entry to the folder
                try:
                    self._check_room(target.parent)
                except FileNotFoundError:  # a new folder: empty
                    target.parent.mkdir(parents=True, exist_ok=True)
            fd = self._unnamed(target.parent)
            temp = None
            if fd is None:
                fd, temp = tempfile.mkstemp(
                    dir=target.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX
                )
        except OSError as error:
            raise _write_error(target, error) from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if self.fsync:
                    os.fsync(handle.fileno())
                if temp is not None or _UMASK & 0o644:  # nginx workers must read it
                    os.fchmod(handle.fileno(), 0o644)
                if temp is None:
                    return self._link(handle.fileno(), target, replace)
            os.replace(temp, target)
        except OSError as error:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            raise _write_error(target, error) from None
        return True

    def _unnamed(self, folder: Path) -> int | None:
        """An unnamed file in ``folder`` (O_TMPFILE): a process killed while writing it leaves
        nothing behind. None where the file system cannot (then a named temp file is used)."""
        if not self._tmpfile:
            return None
        try:
            return os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o644)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            self._tmpfile = False
            return None

    @staticmethod
    def _link(fd: int, target: Path, replace: bool) -> bool:
        """Give the unnamed file its name. A new name is linked directly (atomic; an existing
        file wins, having the same content); a replaced one goes through a temp name."""
        # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N; os.link only asks for it with a dir fd.
        proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
        try:
            if not replace:
                try:
                    os.link(str(fd), target, src_dir_fd=proc, follow_symlinks=True)
                except FileExistsError:
                    return False
                return True
            temp = target.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}")
            os.link(str(fd), temp, src_dir_fd=proc, follow_symlinks=True)
        finally:
            os.close(proc)
        try:
            os.replace(temp, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return True

    def delete(self, key: Key) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    def files(self, under: str = "") -> Iterator[PurePosixPath]:
        """Every file under ``under`` (temp files aside), in sorted order. The top folders are
        walked WALK_THREADS at a time: on a cold disk each folder read is a wait."""
        top = self.path(under) if under else self.root
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        prefix = os.path.relpath(top, self.root)
        prefix = "" if prefix == "." else prefix + "/"
        folders = []
        for entry in entries:
            if entry.is_dir():  # as os.walk: a link to a folder is not followed, nor listed
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif not _temporary(entry.name):
                yield PurePosixPath(prefix + entry.name)
        with ThreadPoolExecutor(WALK_THREADS) as pool:
            pending: deque[Future[list[str]]] = deque()
            for folder in folders:
                pending.append(pool.submit(self._walked, folder))
                if len(pending) >= 2 * WALK_THREADS:
                    yield from map(PurePosixPath, pending.popleft().result())
            while pending:
                yield from map(PurePosixPath, pending.popleft().result())

    def _walked(self, top: str) -> list[str]:
        found: list[str] = []
        for folder, dirs, files in os.walk(top):  # links are not followed out of the root
            relative = os.path.relpath(folder, self.root)
            dirs.sort()
            found.extend(f"{relative}/{name}" for name in sorted(files) if not _temporary(name))
        return found

    def _check_room(self, folder: Path) -> None:
        """Refuse to grow a folder past the entry limit (the temp file counts as the +1).
        Temp files a crash left behind are cleared first when they are in the way."""
        count = self._entries(folder)
        if count + 1 > self.max_entries and self._clear_stale_temps(folder):
            count = self._entries(folder)
        if count + 1 > self.max_entries:
            raise LayoutError(
                f"folder {folder} already holds {count} entries (max_dir_entries = "
                f"{self.max_entries}); add shard_levels for a store this large"
            )

    @staticmethod
    def _entries(folder: Path) -> int:
        with os.scandir(folder) as entries:
            return sum(1 for _ in entries)

    @staticmethod
    def _clear_stale_temps(folder: Path) -> bool:
        """Remove temp files older than STALE_TEMP_SECONDS (a live writer's are younger)."""
        cleared = False
        cutoff = time.time() - STALE_TEMP_SECONDS
        for temp in folder.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()
                    cleared = True
        return cleared
