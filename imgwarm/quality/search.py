"""Auto quality: the lowest encoder quality whose SSIMULACRA2 score reaches the target.

Scores rise with quality (nearly always: the search tolerates a step that does not), so the
quality is found inside a bracket that narrows, starting where a hint says (the quality the
previous, narrower width of the same image and format needed: neighbouring widths need
nearly the same) and going next where a secant through the scores so far puts the middle of
the band (bisection when it cannot say). A quality whose score lands in [target, target +
tolerance] ends the search at once; otherwise it narrows to the lowest quality that reaches
the target. When
even 100 does not (lossy WebP keeps colour at half resolution and tops out near 65-70 on
small, colourful photos), 100 is taken and its score said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy

from imgwarm.quality.ssimulacra2 import score

LOWEST, HIGHEST = 1, 100
START = 80  # the first quality tried without a hint
SLOPE = 0.8  # score points a quality step, typical near the default target (measured)
MIN_SLOPE = 0.05


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

    low, high = LOWEST - 1, HIGHEST + 1  # at low and below: fails; at high and above: reaches
    quality = min(max(hint or START, LOWEST), HIGHEST)
    aim = target + tolerance / 2
    while high - low > 1:
        found = attempt(quality)
        if target <= found <= target + tolerance:
            return _chosen(tried, quality)
        if found >= target:
            high = quality
        else:
            low = quality
        quality = _next(tried, low, high, aim)
    best = high if high <= HIGHEST else HIGHEST
    attempt(best)
    return _chosen(tried, best)


def _next(tried: dict[int, tuple[bytes, float]], low: int, high: int, aim: float) -> int:
    """The next quality inside (low, high): where the scores measured so far say the aim is
    (a secant through the two nearest, or a typical slope from one), else halfway."""
    if high - low <= 1:
        return high
    known = sorted((q, s) for q, (_, s) in tried.items() if low <= q <= high)
    guess: float
    if len(known) >= 2:
        (q1, s1), (q2, s2) = known[0], known[-1]
        slope = (s2 - s1) / (q2 - q1) if s2 != s1 else SLOPE
        guess = q1 + (aim - s1) / max(slope, MIN_SLOPE)
    elif known:
        q1, s1 = known[0]
        guess = q1 + (aim - s1) / SLOPE
    else:
        guess = (low + high) / 2
    return min(max(round(guess), low + 1), high - 1)


def _chosen(tried: dict[int, tuple[bytes, float]], quality: int) -> Chosen:
    data, found = tried[quality]
    return Chosen(data, quality, found, len(tried))
