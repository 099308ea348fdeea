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
from pathlib import Path

import pyvips
from pyvips import vips_lib

from imgwarm.exceptions import CorruptImage

# libvips says what failed; these say what it means for the user.
_EXPLAIN = {
    "premature end of JPEG image": "truncated JPEG data",
    "premature end of data segment": "corrupt JPEG data",
    "Unsupported JPEG data precision": "unsupported JPEG coding (only 8-bit JPEG is supported)",
    "Unsupported color conversion": "unsupported JPEG coding (its colour components)",
    "Unsupported JPEG process": "unsupported JPEG coding (lossless or hierarchical)",
    "Unknown Adobe color transform": "unsupported JPEG coding (an unknown Adobe colour "
    "transform: the colours cannot be known)",
    "JPEG datastream contains no image": "corrupt JPEG header (no image frame)",
    "out of order read": "internal error: out-of-order read",
    "Premature end of JPEG file": "truncated JPEG data",
    # Any other libjpeg complaint about the picture data (see decode.py for why it refuses).
    "Corrupt JPEG data": "corrupt JPEG data",
    "has not been built in: HEVC": "unsupported: an HEVC-coded HEIC image, and this build of "
    "libheif has no HEVC decoder (libde265); convert it to JPEG or AVIF first",
}
# Lines that say nothing of the file: libvips' own plumbing, and its probing of a small file
# for the loader's sniffing (every HEIF error under 1 KB began "bad seek to 1024").
_GENERIC = ("unable to", "error in tile", "VipsImage: ", "vips_region", "read gave",
            "source: bad seek to")


def _lines(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^VIPS:", "", line.strip()).strip()
        if line and line not in lines and not line.startswith(_GENERIC):
            lines.append(line)
    return lines


def vips_reason(error: pyvips.Error, *, meaning: bool = True, decoding: str | None = None) -> str:
    """The distinct, meaningful lines of a libvips error, plus what they mean. ``decoding``:
    the name of the format whose pixels the loader was reading (with fail_on="warning", any
    warning stops it), said as damage to them whatever the loader's words."""
    lines = _lines(f"{error.message}\n{error.detail or ''}")
    if decoding is not None:
        detail = "; ".join(lines[:3])
        if detail and meaning and explain(detail) != detail:
            return explain(detail)
        damage = f"corrupt or truncated {decoding} data"
        return f"{damage} ({detail})" if detail else damage
    detail = "; ".join(lines[:3]) or (error.message or "libvips failed").strip()
    return explain(detail) if meaning else detail


def _from_pyvips_errors(error: BaseException) -> bool:
    """Was it raised where pyvips reads libvips' error text (not by some other decode)?"""
    trace, last = error.__traceback__, None
    while trace is not None:
        last, trace = trace.tb_frame.f_code.co_filename, trace.tb_next
    return last is not None and Path(last).parts[-2:] == ("pyvips", "error.py")


@contextmanager
def readable_errors() -> Iterator[None]:
    """libvips calls whose error text may hold a file's raw bytes (libheif quotes a brand or
    FourCC as found). pyvips decodes libvips' error buffer as UTF-8: on any other byte it
    raises UnicodeDecodeError, leaving the buffer full, so that every later error of the
    process fails alike. That becomes the pyvips.Error it would have been, the odd bytes as
    escapes, and the buffer is cleared."""
    try:
        yield
    except UnicodeDecodeError as error:
        if not isinstance(error.object, bytes) or not _from_pyvips_errors(error):
            raise
        vips_lib.vips_error_clear()
        text = error.object.decode("utf-8", "backslashreplace")
        raise pyvips.Error("unable to call libvips", text) from None


def explain(detail: str) -> str:
    """A decoder's complaint, with what it means for the user in front."""
    for needle, meaning in _EXPLAIN.items():
        if needle in detail:
            return f"{meaning} ({detail})"
    return detail


class VipsComplaint(CorruptImage):
    """A refusal whose text comes from libvips' one error buffer: under threads it may be
    another image's, so the image is looked at again alone (make.py)."""


def clear_errors() -> None:
    vips_lib.vips_error_clear()  # (not through pyvips: it cannot read every buffer)


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
    # 0: libvips' default (VIPS_CONCURRENCY, else one a core), for a worker that was started
    # ahead for several sources and then given the only one
    pyvips.concurrency_set(1 if parallel_sources > 1 else 0)
