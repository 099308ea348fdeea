"""Sizes and durations as people write them: ``512K``, ``300M``, ``2G``, ``80%``; ``30s``,
``10m``, ``24h``, ``7d``. K = 1024."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$", re.IGNORECASE)
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


def parse_size(text: str | int, *, percent: bool = True) -> Size:
    """``2G`` -> 2 GiB; ``80%`` -> a share (when allowed). ValueError says the forms."""
    if isinstance(text, int):
        return Size(bytes=text)
    found = _SIZE.match(text)
    if found:
        return Size(bytes=int(float(found.group(1)) * _FACTORS[found.group(2).upper()]))
    found = _PERCENT.match(text)
    if percent and found and 0 < float(found.group(1)) <= 100:
        return Size(percent=float(found.group(1)))
    forms = "bytes, or a number with K, M, G or T (K = 1024)" + (
        ", or a percentage of the file system (1%..100%)" if percent else "")
    raise ValueError(f"{text!r} is not a size: give {forms}")


def parse_duration(text: str | float) -> float:
    """``24h`` -> 86400.0 seconds; a bare number is seconds. ValueError says the forms."""
    if isinstance(text, int | float):
        return float(text)
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration: give a number with s, m, h or d "
                         "(e.g. 30s, 10m, 24h, 7d)")
    return float(found.group(1)) * _SECONDS[(found.group(2) or "s").lower()]
