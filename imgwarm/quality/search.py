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
    """The next quality inside (low, high): where the scores measured so far say the aim is.
    With a try at both ends of the bracket, a secant through them; with tries on one side
    only, a line from the bracket's tried end, as steep as between it and the try nearest it
    (at most 3 points a step: scores can rise in jumps); halfway when the scores say nothing
    (no try, or a plateau: WebP's score can stay put over a dozen qualities)."""
    if high - low <= 1:
        return high
    guess = (low + high) / 2
    ends = [q for q in (low, high) if q in tried]
    if len(ends) == 2:
        slope = (tried[high][1] - tried[low][1]) / (high - low)
        if slope > 0:
            guess = low + (aim - tried[low][1]) / slope
    elif ends:
        end = ends[0]
        others = sorted((q for q in tried if q != end), key=lambda q: abs(q - end))
        slope = SLOPE
        if others:
            slope = (tried[others[0]][1] - tried[end][1]) / (others[0] - end)
        if slope >= MIN_SLOPE:
            guess = end + (aim - tried[end][1]) / min(slope, MAX_SLOPE)
    return min(max(round(guess), low + 1), high - 1)


def _chosen(tried: dict[int, tuple[bytes, float]], quality: int) -> Chosen:
    data, found = tried[quality]
    return Chosen(data, quality, found, len(tried))
