"""EXIF read safely: every entry is checked against the block's own length before piexif sees it.

piexif builds a struct format string as long as an entry's declared count, and copies the
values of every entry even when many point at the same bytes: a 1 KB file declaring 2^27
bytes took 4.5 GB. A block whose entries declare more data than the block holds (together,
so that overlapping entries count as often as they are read) is not EXIF a camera wrote; it
is read as no EXIF at all. What piexif then allocates is a small multiple of the block.
"""

from __future__ import annotations

import struct
from typing import Any

import piexif

ExifDict = dict[str, Any]

# Bytes per value of each TIFF type (1 BYTE .. 12 DOUBLE); piexif reads these twelve.
_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}
_EXIF_POINTER, _GPS_POINTER, _INTEROP_POINTER = 0x8769, 0x8825, 0xA005
# piexif reads a one-value entry of any integer type as a plain int, and follows it as an IFD
# pointer whatever the type: every one of them is followed here too.
_INTEGER_FORMATS = {1: "B", 3: "H", 4: "L", 6: "b", 8: "h", 9: "l"}


class _Unsafe(Exception):
    pass


class _Walk:
    """The IFDs piexif reads (0th, Exif, GPS, Interop, 1st), with the bytes their values take."""

    def __init__(self, tiff: bytes) -> None:
        self.tiff = tiff
        self.endian = "<" if tiff[:2] == b"II" else ">"
        self.total = 0  # value bytes read, counting every entry

    def unpack(self, fmt: str, at: int) -> int:
        size = struct.calcsize(self.endian + fmt)
        if at < 0 or at + size > len(self.tiff):
            raise _Unsafe
        return int(struct.unpack(self.endian + fmt, self.tiff[at:at + size])[0])

    def ifd(self, at: int) -> dict[int, int]:
        """Check one IFD; returns its pointer-like entries (tag -> value) for the walk."""
        count = self.unpack("H", at)
        if at + 2 + 12 * count > len(self.tiff):
            raise _Unsafe
        pointers: dict[int, int] = {}
        for i in range(count):
            entry = at + 2 + 12 * i
            tag, kind, number = (self.unpack("H", entry), self.unpack("H", entry + 2),
                                 self.unpack("L", entry + 4))
            size = number * _TYPE_SIZE.get(kind, 1)
            if size > len(self.tiff):
                raise _Unsafe  # declares more than the whole block holds
            if size > 4:
                offset = self.unpack("L", entry + 8)
                self.total += max(0, min(size, len(self.tiff) - offset))
            if self.total > len(self.tiff):
                raise _Unsafe  # entries read the same bytes over and over
            if kind in _INTEGER_FORMATS and number == 1:
                pointers[tag] = self.unpack(_INTEGER_FORMATS[kind], entry + 8)
        return pointers

    def check(self) -> None:
        if self.tiff[:2] not in (b"II", b"MM"):
            raise _Unsafe
        first = self.unpack("L", 4)
        ifd0 = self.ifd(first)
        exif = self.ifd(ifd0[_EXIF_POINTER]) if _EXIF_POINTER in ifd0 else {}
        if _GPS_POINTER in ifd0:
            self.ifd(ifd0[_GPS_POINTER])
        if _INTEROP_POINTER in exif:
            self.ifd(exif[_INTEROP_POINTER])
        count = self.unpack("H", first)
        next_ifd = self.unpack("L", first + 2 + 12 * count)
        if next_ifd:
            self.ifd(next_ifd)


def bounded(tiff: bytes) -> bool:
    """True when every entry piexif would read fits in the block, all together."""
    try:
        _Walk(tiff).check()
    except _Unsafe:
        return False
    return True


def read_exif(tiff: bytes | None) -> ExifDict | None:
    """The EXIF of a TIFF block (from the first APP1 Exif segment), as piexif reads it; None
    when there is none, it is unreadable, or its entries claim more data than it holds."""
    if not tiff or not bounded(tiff):
        return None
    try:
        exif: ExifDict = piexif.load(tiff)
    except Exception:  # piexif raises anything from struct.error to ValueError on junk
        return None
    return exif

