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

from imgwarm.quality.ssimulacra2 import Reference

LOWEST, HIGHEST = 1, 100
START = 80  # the first quality tried without a hint
SLOPE = 0.8  # score points a quality step, typical near the default target (measured)
MIN_SLOPE, MAX_SLOPE = 0.3, 3.0


@dataclass(frozen=True)
class Chosen:
    data: bytes
    quality: int
    score: float
    tries: int  # encodes made to find it


def lowest_quality(encode: Callable[[int], bytes], decode: Callable[[bytes], numpy.ndarray],
                   reference: Reference, *, target: float, tolerance: float,
                   hint: int | None = None) -> Chosen:
    """The encoding at the lowest quality whose score against ``reference`` reaches
    ``target`` (and at most ``tolerance`` above it where one quality step allows)."""
    tried: dict[int, tuple[bytes, float]] = {}

    def attempt(quality: int) -> float:
        if quality not in tried:
            data = encode(quality)
            tried[quality] = (data, reference.score(decode(data)))
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
    """The next quality inside (low, high): where the scores measured so far say the aim is,
    else halfway. With a try on each side of the target, a secant through the bracket's ends;
    with tries on one side only, through the two nearest the aim, its slope kept within what
    images show (0.3 to 3 points a step: scores can rise in jumps)."""
    if high - low <= 1:
        return high
    ends = [(q, tried[q][1]) for q in (low, high) if q in tried]
    near = sorted(((q, s) for q, (_, s) in tried.items()), key=lambda t: abs(t[1] - aim))
    guess: float
    if len(ends) == 2:
        (q1, s1), (q2, s2) = ends
        guess = q1 + (aim - s1) * (q2 - q1) / max(s2 - s1, MIN_SLOPE)
    elif near:
        q1, s1 = near[0]
        slope = SLOPE
        if len(near) >= 2 and near[1][1] != s1:
            slope = min(max((near[1][1] - s1) / (near[1][0] - q1), MIN_SLOPE), MAX_SLOPE)
        guess = q1 + (aim - s1) / slope
    else:
        guess = (low + high) / 2
    return min(max(round(guess), low + 1), high - 1)


def _chosen(tried: dict[int, tuple[bytes, float]], quality: int) -> Chosen:
    data, found = tried[quality]
    return Chosen(data, quality, found, len(tried))
