"""Variants: which widths to make for a source."""

from __future__ import annotations


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


def height_for(width: int, source_width: int, source_height: int) -> int:
    """The height that keeps the aspect ratio, at least one pixel."""
    return max(1, round(source_height * width / source_width))
