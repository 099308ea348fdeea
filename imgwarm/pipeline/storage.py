"""Storage: a root folder of files written atomically, behind one small interface.

A file is written to a hidden temporary name in its final folder, flushed, then renamed,
so a crash leaves either the whole file or nothing under its real name.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Protocol

from imgwarm.exceptions import LayoutError, StorageError
from imgwarm.pipeline.layout import join_under

TEMP_PREFIX = ".tmp-"  # hidden: nginx is told never to serve dot files
TEMP_SUFFIX = ".part"
STALE_TEMP_SECONDS = 3600


class Store(Protocol):
    """What the pipeline needs of a place that keeps files by key."""

    def exists(self, key: str | PurePosixPath) -> bool: ...

    def read(self, key: str | PurePosixPath) -> bytes | None: ...

    def write(self, key: str | PurePosixPath, data: bytes, *, replace: bool = False) -> bool: ...

    def delete(self, key: str | PurePosixPath) -> None: ...


class LocalStore:
    """Files under a local folder; keys are relative POSIX paths."""

    def __init__(self, root: Path, *, max_entries: int = 255, fsync: bool = True) -> None:
        self.root = root
        self.max_entries = max_entries
        self.fsync = fsync

    def path(self, key: str | PurePosixPath) -> Path:
        return join_under(self.root, key)

    def exists(self, key: str | PurePosixPath) -> bool:
        return self.path(key).is_file()

    def read(self, key: str | PurePosixPath) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StorageError(f"cannot read {self.path(key)}: {error.strerror}") from None

    def write(self, key: str | PurePosixPath, data: bytes, *, replace: bool = False) -> bool:
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
            fd, temp = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        except OSError as error:
            raise StorageError(f"cannot write {target}: {error.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if self.fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.chmod(temp, 0o644)  # mkstemp makes 0600; nginx workers must read it
            os.replace(temp, target)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise StorageError(f"cannot write {target}: {error.strerror}") from None
        return True

    def delete(self, key: str | PurePosixPath) -> None:
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
