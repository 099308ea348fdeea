"""Variants: which widths to make for a source."""

from __future__ import annotations


def plan_widths(source_width: int, widths: list[int]) -> list[int]:
    """Every configured width below the source's, plus the source width capped at the
    largest setting. Never upscales."""
    planned = {w for w in widths if w < source_width}
    planned.add(min(source_width, max(widths)))
    return sorted(planned)


def height_for(width: int, source_width: int, source_height: int) -> int:
    """The height that keeps the aspect ratio, at least one pixel."""
    return max(1, round(source_height * width / source_width))
