"""Raw descriptor I/O for the local store: whole reads and writes by read(2) and write(2),
this process's /proc/self/fd folder (made again in a forked child), and the umask read
without changing it."""

from __future__ import annotations

import contextlib
import os


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


UMASK = _umask()  # a file made 0o644 comes out 0o644 unless the umask takes bits away


_PROC_FDS: list[int] = []  # this process's /proc/self/fd folder, once opened


def proc_fds() -> int:
    if not _PROC_FDS:
        _PROC_FDS.append(os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    return _PROC_FDS[0]


def _forget_proc_fds() -> None:
    """In a forked child: the parent's folder lists the parent's descriptors, not ours."""
    if _PROC_FDS:
        with contextlib.suppress(OSError):
            os.close(_PROC_FDS.pop())


os.register_at_fork(after_in_child=_forget_proc_fds)


def read_all(fd: int, size: int) -> bytes:
    """A file's bytes by read(2) (a buffered reader would also ask isatty and lseek); it may
    have grown since fstat gave ``size``."""
    parts = []
    while chunk := os.read(fd, max(size, 1 << 16) + 1):
        parts.append(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
