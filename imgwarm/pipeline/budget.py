"""Memory budget: decodes reserve the memory they will need; the sum stays under ``max_memory``.

The budget is shared by every imgwarm process of the user on the machine (the threads of
``imgwarm optimize`` and the pool processes of ``imgwarm worker`` alike): it is a file whose
bytes are units of memory, and a reservation holds open-file-description locks on as many of
them as it needs. The kernel drops the locks of a process that dies, so a worker killed
mid-job never leaks its share. One reservation gathers its units at a time (a gate lock), so
a large one is not starved by small ones. Where OFD locks are missing (not Linux), the budget
is kept per process.
"""

from __future__ import annotations

import fcntl
import os
import struct
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

UNIT = 1 << 20  # one lockable byte per MiB
_OFD = hasattr(fcntl, "F_OFD_SETLK")


def _flock(kind: int, start: int, length: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padding.
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0)


class _Units:
    """Lockable units of a shared file; each holder has its own open file description."""

    def __init__(self, path: Path, count: int) -> None:
        self.path = path
        self.count = count

    def _lock(self, fd: int, unit: int, *, wait: bool) -> bool:
        command = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
        try:
            fcntl.fcntl(fd, command, _flock(fcntl.F_WRLCK, unit, 1))
        except (BlockingIOError, PermissionError):
            return False
        return True

    @contextmanager
    def hold(self, units: int) -> Iterator[None]:
        gate = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        held = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            self._lock(gate, 0, wait=True)  # one gatherer at a time; unit 0 is the gate
            taken: set[int] = set()
            while len(taken) < units:
                for unit in range(1, self.count + 1):
                    if len(taken) == units:
                        break
                    if unit not in taken and self._lock(held, unit, wait=False):
                        taken.add(unit)
                if len(taken) < units:  # wait for a holder to finish, then look again
                    busy = next(u for u in range(1, self.count + 1) if u not in taken)
                    self._lock(held, busy, wait=True)
                    taken.add(busy)
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
        self._shared: _Units | _Local = _Local(self.units)
        if _OFD:
            where = path or Path(tempfile.gettempdir()) / f"imgwarm-{os.getuid()}.memory"
            try:
                os.close(os.open(where, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
                self._shared = _Units(where, self.units)
            except OSError:
                pass  # an unwritable temp folder: the budget is per process

    @contextmanager
    def reserve(self, amount: int) -> Iterator[None]:
        """Block until ``amount`` bytes (at most the limit) are free, hold them meanwhile."""
        units = min(self.units, max(1, -(-amount // UNIT)))
        with self._shared.hold(units):
            yield


@lru_cache(maxsize=4)
def budget(limit: int) -> MemoryBudget:
    """The process's budget for a limit (one per setting value)."""
    return MemoryBudget(limit)
