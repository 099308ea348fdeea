"""Local store: a root folder of files written atomically (the Store of ``base.py``).

A file is written unnamed (O_TMPFILE) in its final folder, flushed, then linked under its
name, so a crash leaves either the whole file or nothing at all. Where the file system has
no O_TMPFILE, a hidden temporary name is used and renamed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
import uuid
from pathlib import Path

from imgwarm.exceptions import LayoutError, StorageError, TransientStorageError
from imgwarm.store.base import Key, ObjectTooLarge
from imgwarm.store.layout import join_under

TEMP_PREFIX = ".tmp-"  # hidden: nginx is told never to serve dot files
TEMP_SUFFIX = ".part"
STALE_TEMP_SECONDS = 3600


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

    def path(self, key: Key) -> Path:
        return join_under(self.root, key)

    def exists(self, key: Key) -> bool:
        return self.path(key).is_file()

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None:
        path = self.path(key)
        if not path.is_file():  # not a folder, FIFO or device
            return None
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if limit is not None and size > limit:
                    raise ObjectTooLarge(size)
                return handle.read()
        except (FileNotFoundError, IsADirectoryError):
            return None
        except OSError as error:
            raise StorageError(f"cannot read {self.path(key)}: {error.strerror}") from None

    def describe(self, key: Key) -> str:
        return str(self.path(key))

    def write(self, key: Key, data: bytes, *, replace: bool = False) -> bool:
        """Write atomically; True when a file was written. An existing file is kept unless
        ``replace`` (content-addressed files never need replacing)."""
        target = self.path(key)
        if not replace and target.is_file():
            return False
        try:
            if not target.parent.is_dir():
                target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                self._check_room(target.parent)
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
                os.fchmod(handle.fileno(), 0o644)  # nginx workers must read it
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
