"""Memory budget: decodes reserve the memory they will need; the sum stays under ``max_memory``.

The budget is shared by every imgwarm process of the user on the machine (the threads of
``imgwarm optimize`` and the pool processes of ``imgwarm worker`` alike): it is a file whose
bytes are units of memory, and a reservation holds open-file-description locks on as many of
them as it needs. The kernel drops the locks of a process that dies, so a worker killed
mid-job never leaks its share. One reservation gathers its units at a time (a gate lock), so
a large one is not starved by small ones; it takes units as they come free.

The file lives in a folder only its user can enter (``$TMPDIR/imgwarm-UID``, mode 0700), so
that nobody else can lock it (and hang imgwarm) or swap it for a link. Where that cannot be
had (someone else's folder in the way, no OFD locks: not Linux), the budget is kept per
process, with a warning.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import stat
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

UNIT = 1 << 20  # one lockable byte per MiB
_OFD = hasattr(fcntl, "F_OFD_SETLK")


class _Unavailable(Exception):
    """The shared budget cannot be used; the reason is the message."""


def _flock(kind: int, start: int, length: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padding.
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0)


def private_file(folder: Path, name: str) -> Path:
    """``folder/name``, after making sure ``folder`` is this user's alone (0700, not a link);
    _Unavailable says why not."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise _Unavailable(f"cannot make {folder}: {error.strerror}") from None
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise _Unavailable(f"{folder} is not a folder of this user's alone")
    return folder / name


class _Units:
    """Lockable units of a shared file; each holder has its own open file description."""

    def __init__(self, path: Path, count: int) -> None:
        self.path = path
        self.count = count

    def _open(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise _Unavailable(f"cannot open {self.path}: {error.strerror}") from None
        if os.fstat(fd).st_uid != os.getuid():
            os.close(fd)
            raise _Unavailable(f"{self.path} belongs to someone else")
        return fd

    @staticmethod
    def _lock(fd: int, unit: int, *, wait: bool = False) -> bool:
        command = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
        try:
            fcntl.fcntl(fd, command, _flock(fcntl.F_WRLCK, unit, 1))
        except (BlockingIOError, PermissionError):
            return False
        except OSError as error:  # ENOLCK and the like: the kernel will not keep locks
            raise _Unavailable(f"cannot lock {os.readlink(f'/proc/self/fd/{fd}')}: "
                               f"{error.strerror}") from None
        return True

    @contextmanager
    def hold(self, units: int) -> Iterator[None]:
        gate = self._open()
        try:
            held = self._open()
        except BaseException:
            os.close(gate)
            raise
        try:
            self._lock(gate, 0, wait=True)  # one gatherer at a time; unit 0 is the gate
            taken: set[int] = set()
            pause = 0.005
            while True:  # take units as they come free, whoever frees them
                for unit in range(1, self.count + 1):
                    if len(taken) == units:
                        break
                    if unit not in taken and self._lock(held, unit):
                        taken.add(unit)
                if len(taken) == units:
                    break
                time.sleep(pause)
                pause = min(0.1, pause * 2)
            os.close(gate)
            gate = -1
            yield
        finally:
            if gate >= 0:
                os.close(gate)
            os.close(held)  # drops every unit this reservation holds


class _Local:
    """The same, within one process (threads)."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.cond = threading.Condition()
        self.gate = threading.Lock()

    @contextmanager
    def hold(self, units: int) -> Iterator[None]:
        with self.gate, self.cond:
            self.cond.wait_for(lambda: self.free >= units)
            self.free -= units
        try:
            yield
        finally:
            with self.cond:
                self.free += units
                self.cond.notify_all()


class MemoryBudget:
    """At most ``limit`` bytes reserved at once, across the user's imgwarm processes."""

    def __init__(self, limit: int, path: Path | None = None) -> None:
        self.limit = limit
        self.units = max(1, limit // UNIT)
        self._local = _Local(self.units)
        self._shared: _Units | None = None
        if not _OFD:
            return self._fall_back("this system has no open-file-description locks")
        try:
            where = path or private_file(
                Path(tempfile.gettempdir()) / f"imgwarm-{os.getuid()}", "memory")
            self._shared = _Units(where, self.units)
            os.close(self._shared._open())
        except _Unavailable as error:
            self._shared = None
            self._fall_back(str(error))

    def _fall_back(self, reason: str) -> None:
        warnings.warn(f"imgwarm: the memory budget (max_memory) is kept per process, not "
                      f"shared with the user's other imgwarm processes: {reason}",
                      RuntimeWarning, stacklevel=3)

    @contextmanager
    def reserve(self, amount: int) -> Iterator[None]:
        """Block until ``amount`` bytes (at most the limit) are free, hold them meanwhile."""
        units = min(self.units, max(1, -(-amount // UNIT)))
        if self._shared is not None:
            try:
                with self._shared.hold(units):
                    yield
                return
            except _Unavailable as error:  # before anything was held: this one goes local
                self._shared = None
                self._fall_back(str(error))
        with self._local.hold(units):
            yield


@lru_cache(maxsize=4)
def budget(limit: int) -> MemoryBudget:
    """The process's budget for a limit (one per setting value)."""
    return MemoryBudget(limit)


@lru_cache(maxsize=1)
def libc() -> Any:
    """The C library, through ctypes; None where it cannot be loaded."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
_MMAP_THRESHOLD = 4 << 20


def steady_malloc() -> None:
    """For a process that makes sources one after another: every allocation of 4 MiB or more
    (image buffers; line buffers stay in the heap) is its own mapping, unmapped when freed.
    glibc otherwise raises that threshold (up to 32 MiB) each time a large block is freed,
    and later decodes' buffers land in malloc's arenas, where freed space is reused piecemeal
    and the peak grows with history: a 7.9-megapixel GIF took 308 MiB above an idle worker
    after 195 other GIFs, 190 alone, 175 with this (its estimate: 220; 254 with a 16 MiB
    threshold, 303 with malloc_trim alone); making corpus photos took 1.05x the time (median
    of five runs each on a quiet machine: 6.69 s against 6.38). Nothing is done where there
    is no mallopt (not glibc)."""
    mallopt = getattr(libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def give_back() -> None:
    """Return what a finished job freed to the system (glibc's malloc_trim), so that a process
    between jobs is back at its idle size, as the budget counts it. Without it, libvips'
    threads' malloc arenas kept what a large decode had freed: a worker making 500 fuzzed GIFs
    one after another at max_memory=256M grew to 617 MiB, each decode within its estimate.
    Where there is no malloc_trim (not glibc), nothing is done."""
    trim = getattr(libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
