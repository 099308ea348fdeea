"""Sizes and durations as people write them: ``512K``, ``300M``, ``2G``, ``80%``; ``30s``,
``10m``, ``24h``, ``7d``. K = 1024."""

from __future__ import annotations

import re
from dataclasses import dataclass

# ASCII only (re.ASCII: no other digits, no case folding of the Kelvin sign into K), at most
# 15 digits: a size or duration that fits a float exactly.
_NUMBER = r"([0-9]{1,15}(?:\.[0-9]{1,6})?)"
_SIZE = re.compile(rf"^\s*{_NUMBER}\s*(?:([KMGT])(?:i?B)?|B?)\s*$", re.IGNORECASE | re.ASCII)
_PERCENT = re.compile(rf"^\s*{_NUMBER}\s*%\s*$", re.ASCII)
_DURATION = re.compile(rf"^\s*{_NUMBER}\s*(s|m|h|d)?\s*$", re.IGNORECASE | re.ASCII)
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Size:
    """A number of bytes, or a share of a file system's size."""

    bytes: int | None = None
    percent: float | None = None

    def of(self, total: int) -> int:
        """The bytes this stands for, on a file system of ``total`` bytes."""
        return self.bytes if self.bytes is not None else int(total * (self.percent or 0) / 100)

    def __str__(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else str(self.bytes)


def parse_size(text: str) -> Size:
    """``2G`` -> 2 GiB; ``80%`` -> a share. ValueError says the forms."""
    found = _SIZE.match(text)
    if found:
        return Size(bytes=int(float(found.group(1)) * _FACTORS[(found.group(2) or "").upper()]))
    found = _PERCENT.match(text)
    if found and 0 < float(found.group(1)) <= 100:
        return Size(percent=float(found.group(1)))
    raise ValueError(f"{text!r} is not a size: give bytes, or a number with K, M, G or T "
                     "(K = 1024), or a percentage of the file system (1%..100%)")


def parse_duration(text: str) -> float:
    """``24h`` -> 86400.0 seconds; a bare number is seconds. ValueError says the forms."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration: give a number with s, m, h or d "
                         "(e.g. 30s, 10m, 24h, 7d)")
    return float(found.group(1)) * _SECONDS[(found.group(2) or "s").lower()]
