"""libvips errors: the right text for the right image, in words a user understands.

libvips keeps one error buffer for the whole process. When two threads work at once, the
text behind an exception may be the other image's. So libvips work runs under a shared lock,
and a failure is explained by running the failed step again alone, with the buffer cleared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyvips

from imgwarm.exceptions import CorruptImage, SourceError

# libvips says what failed; these say what it means for the user.
_EXPLAIN = {
    "premature end of JPEG image": "truncated JPEG data",
    "premature end of data segment": "corrupt JPEG data",
    "Unsupported JPEG data precision": "unsupported JPEG coding (only 8-bit JPEG is supported)",
    "JPEG datastream contains no image": "corrupt JPEG header (no image frame)",
    "out of order read": "internal error: out-of-order read",
}
_GENERIC = ("unable to", "error in tile", "VipsImage: ", "vips_region")


def vips_reason(error: pyvips.Error, *, explain: bool = True) -> str:
    """The distinct, meaningful lines of a libvips error, plus what they mean."""
    lines: list[str] = []
    for line in f"{error.message}\n{error.detail or ''}".splitlines():
        line = line.strip()
        if line and line not in lines and not line.startswith(_GENERIC):
            lines.append(line)
    detail = "; ".join(lines[:3]) or (error.message or "libvips failed").strip()
    for needle, meaning in _EXPLAIN.items():
        if explain and needle in detail:
            return f"{meaning} ({detail})"
    return detail


class _SharedOrAlone:
    """A readers-writer lock: any number of images at once, or one explanation alone."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone)
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
            self._cond.wait_for(lambda: not self._alone and not self._shared)
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


LIBVIPS = _SharedOrAlone()


class VipsFailure(CorruptImage):
    """A libvips step failed on a source. Its text may be another thread's: ``explained()``
    gives the SourceError with this source's own."""

    def __init__(self, error: pyvips.Error, retry: Callable[[], object],
                 build: Callable[[str], SourceError], *, explain: bool = True) -> None:
        self.seen = vips_reason(error, explain=explain)
        first = build(self.seen)
        super().__init__(first.source, first.reason)
        self.retry = retry
        self.build = build
        self.explain = explain

    def explained(self) -> SourceError:
        """Run the failed step again with no other libvips work going on (call it outside
        ``LIBVIPS.shared()``), so the error text is this image's own."""
        with LIBVIPS.alone():
            pyvips.Error("")  # reading the buffer clears it
            try:
                self.retry()
            except pyvips.Error as error:
                return self.build(vips_reason(error, explain=self.explain))
        return self.build(self.seen)
