"""libvips errors and warnings: the right text for the right image, in words a user knows.

libvips keeps one error buffer for the whole process, and reports warnings through one log.
When two threads work at once, the text behind an exception may be the other image's. So
libvips work runs under a shared lock, and a failed image is looked at again alone.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pyvips

# libvips says what failed; these say what it means for the user.
_EXPLAIN = {
    "premature end of JPEG image": "truncated JPEG data",
    "premature end of data segment": "corrupt JPEG data",
    "Unsupported JPEG data precision": "unsupported JPEG coding (only 8-bit JPEG is supported)",
    "JPEG datastream contains no image": "corrupt JPEG header (no image frame)",
    "out of order read": "internal error: out-of-order read",
}
_GENERIC = ("unable to", "error in tile", "VipsImage: ", "vips_region", "read gave")
# libjpeg warnings that leave every pixel intact: the file breaks a rule, not the picture.
_BENIGN = ("extraneous bytes before marker", "Invalid SOS parameters for sequential JPEG")
_WARNING_COUNT = re.compile(r"read gave (\d+) warnings")


def _lines(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^VIPS:", "", line.strip()).strip()
        if line and line not in lines and not line.startswith(_GENERIC):
            lines.append(line)
    return lines


def vips_reason(error: pyvips.Error, *, explain: bool = True) -> str:
    """The distinct, meaningful lines of a libvips error, plus what they mean."""
    lines = _lines(f"{error.message}\n{error.detail or ''}")
    detail = "; ".join(lines[:3]) or (error.message or "libvips failed").strip()
    for needle, meaning in _EXPLAIN.items():
        if explain and needle in detail:
            return f"{meaning} ({detail})"
    return detail


def _is_benign(line: str) -> bool:
    return any(b in line for b in _BENIGN)


def benign(reason: str) -> bool:
    """True when every libjpeg complaint in ``reason`` is a harmless one."""
    complaints = [line for line in re.split(r"[;\n]", reason) if "Corrupt JPEG data" in line
                  or "VipsJpeg" in line]
    return bool(complaints) and all(map(_is_benign, complaints))


def clear_errors() -> None:
    pyvips.Error("")  # reading libvips' error buffer clears it


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class Warnings:
    """What libvips warned about during a decode: its messages, and the most warnings any
    one read of the file counted (the header and the pixels are read apart, each counts)."""

    def __init__(self, messages: list[str]) -> None:
        text = "\n".join(messages)
        self.count = max((int(n) for n in _WARNING_COUNT.findall(text)), default=0)
        self.lines = _lines(text)

    def harmless(self) -> bool:
        """All warnings shown are benign, and none went unshown (libvips shows the first)."""
        return all(map(_is_benign, self.lines)) and self.count <= max(1, len(self.lines))


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """libvips' warnings while the block runs (meaningful only under ``LIBVIPS.alone()``)."""
    logger = logging.getLogger("pyvips")
    handler = _Collect()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class _SharedOrAlone:
    """A readers-writer lock: any number of images at once, or one image alone. A request to
    be alone is served before new shared work starts, so a failed image does not wait for the
    batch to end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._alone and not self._shared)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


LIBVIPS = _SharedOrAlone()


def configure_libvips(parallel_sources: int) -> None:
    """For a process that makes several sources at once: libvips logs every warning it
    survives (we report errors ourselves); one libvips thread per source keeps
    (sources x threads) within the cores; no operation cache saves memory."""
    logging.getLogger("pyvips").setLevel(logging.CRITICAL)
    pyvips.cache_set_max(0)
    if parallel_sources > 1:
        pyvips.concurrency_set(1)
