"""Auto quality: the lowest encoder quality whose SSIMULACRA2 score reaches the target.

Scores rise with quality (nearly always: the search tolerates a step that does not), so the
quality is found by bisection on 1..100, starting where a hint says (the quality the
previous, narrower width of the same image and format needed: neighbouring widths need
nearly the same). A quality whose score lands in [target, target + tolerance] ends the search
at once; otherwise the search narrows to the lowest quality that reaches the target. When
even 100 does not (lossy WebP keeps colour at half resolution and tops out near 65-70 on
small, colourful photos), 100 is taken and its score said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy

from imgwarm.quality.ssimulacra2 import score

LOWEST, HIGHEST = 1, 100


@dataclass(frozen=True)
class Chosen:
    data: bytes
    quality: int
    score: float
    tries: int  # encodes made to find it


def lowest_quality(encode: Callable[[int], bytes], decode: Callable[[bytes], numpy.ndarray],
                   reference: numpy.ndarray, *, target: float, tolerance: float,
                   hint: int | None = None) -> Chosen:
    """The encoding at the lowest quality whose score against ``reference`` reaches
    ``target`` (and at most ``tolerance`` above it where one quality step allows)."""
    tried: dict[int, tuple[bytes, float]] = {}

    def attempt(quality: int) -> float:
        if quality not in tried:
            data = encode(quality)
            tried[quality] = (data, score(reference, decode(data)))
        return tried[quality][1]

    low, high = LOWEST - 1, HIGHEST + 1  # below low: fails; high and above: reaches
    quality = min(max(hint or 75, LOWEST), HIGHEST)
    while high - low > 1:
        found = attempt(quality)
        if target <= found <= target + tolerance:
            return _chosen(tried, quality)
        if found >= target:
            high = quality
        else:
            low = quality
        quality = (low + high) // 2 if high - low > 1 else high
    best = high if high <= HIGHEST else HIGHEST
    attempt(best)
    return _chosen(tried, best)


def _chosen(tried: dict[int, tuple[bytes, float]], quality: int) -> Chosen:
    data, found = tried[quality]
    return Chosen(data, quality, found, len(tried))
