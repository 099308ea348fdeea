"""Variants: which widths to make for a source (a fixed list, or a ladder by bytes)."""

from __future__ import annotations

import itertools
import math

# Chromium takes the narrowest srcset candidate at least as wide as the slot needs (checked in
# tests/serve/test_ladder.py): consecutive widths at most this ratio apart mean the file a
# browser takes has at most 1.5x the pixels its slot needs.
PIXEL_SLACK = 1.5
MAX_RATIO = math.sqrt(PIXEL_SLACK)


def plan_widths(source_width: int, source_height: int, widths: list[int],
                max_side: int) -> list[int]:
    """Every configured width below the largest that can be made, plus that largest: the
    source width, capped at the largest setting and so that the height stays within
    ``max_side`` (the smallest limit of the output formats: a 1000x60000 strip is made 273
    wide). Never upscales. Empty when not even one pixel of width fits."""
    fitting = source_width * max_side // source_height
    largest = min(source_width, max(widths), fitting, max_side)
    if largest < 1:
        return []
    return sorted({w for w in widths if w < largest} | {largest})


def fallback_at(made: list[int], wanted: list[int]) -> set[int]:
    """The widths among ``made`` (ascending) the fallback is made at: for each ``wanted``
    width the narrowest made at least as wide, and the widest; every one when none is
    wanted."""
    if not wanted:
        return set(made)
    return {made[-1], *(next(w for w in made if w >= want) for want in wanted
                        if want <= made[-1])}


def ladder(low: tuple[int, int], high: tuple[int, int], step: int,
           most: int) -> list[int]:
    """The widths from ``low`` to ``high`` (each (width, bytes of its file)) whose files are
    about ``step`` bytes apart, as Cloudinary's responsive breakpoints are, and never more than
    MAX_RATIO apart in width; at most ``most`` widths (the byte step grows to fit; when even
    the ratio alone needs more, ``most`` widths evenly spaced by ratio, over it). Bytes between
    the two ends follow the power law through them (a photo's bytes grow as width**1.4..2.1),
    so every width lies between the ends."""
    (w0, b0), (w1, b1) = low, high
    if w1 <= w0:
        return [w1]

    def width_at(size: float) -> float:
        if b1 > b0 > 0:
            return float(w0 * (w1 / w0) ** (math.log(size / b0) / math.log(b1 / b0)))
        return w0 + (w1 - w0) * (size - b0) / (b1 - b0)  # (an empty end: by width alone)

    # (more gaps than widths allowed could only be cut: a tiny step costs nothing more)
    gaps = min(max(1, math.ceil((b1 - b0) / max(step, 1))), most - 1) if b1 > b0 else 1
    while True:
        marks = [width_at(b0 + (b1 - b0) * n / gaps) for n in range(1, gaps)]
        found = _by_ratio([w0, *marks, w1])
        if len(found) <= most:
            return found
        if gaps == 1:
            return _even(w0, w1, most)
        gaps = max(1, math.floor(gaps / 1.25))


def _by_ratio(marks: list[float]) -> list[int]:
    """``marks`` as whole widths, with widths put in wherever two are over MAX_RATIO apart (or
    more than one pixel, where a pixel is more than that ratio)."""
    found = [round(marks[0])]
    for target in marks[1:]:
        end = round(target)
        if end > found[-1]:
            found.extend(_between(found[-1], end)[1:])
    return found


def _between(start: int, end: int) -> list[int]:
    """The fewest widths from ``start`` to ``end``, none over MAX_RATIO (or one pixel) apart,
    each as near its geometric place as that allows: no wider than the one below permits,
    no narrower than the rest need to reach ``end``."""
    parts = max(1, math.ceil(math.log(end / start) / math.log(MAX_RATIO)))
    while True:
        chain = [start]
        for n in range(1, parts):
            widest = max(math.floor(chain[-1] * MAX_RATIO), chain[-1] + 1)
            needed = math.ceil(end / MAX_RATIO ** (parts - n))
            chain.append(min(max(round(start * (end / start) ** (n / parts)), needed), widest))
        chain.append(end)
        chain = sorted(set(chain))
        if all(b <= max(a * MAX_RATIO, a + 1) for a, b in itertools.pairwise(chain)):
            return chain
        parts += 1


def _even(w0: int, w1: int, most: int) -> list[int]:
    """``most`` widths from ``w0`` to ``w1`` at one ratio apart."""
    ratio = (w1 / w0) ** (1 / (most - 1))
    return sorted({w0, *(round(w0 * ratio ** n) for n in range(1, most - 1)), w1})


def height_for(width: int, source_width: int, source_height: int) -> int:
    """The height that keeps the aspect ratio, at least one pixel."""
    return max(1, round(source_height * width / source_width))
