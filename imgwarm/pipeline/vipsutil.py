"""Turning libvips' error text into one readable reason."""

from __future__ import annotations

import pyvips

# libvips says what failed; these say what it means for the user.
_EXPLAIN = {
    "premature end of JPEG image": "truncated JPEG data",
    "premature end of data segment": "corrupt JPEG data",
    "Unsupported JPEG data precision": "unsupported JPEG coding (only 8-bit JPEG is supported)",
    "JPEG datastream contains no image": "corrupt JPEG header (no image frame)",
    "out of order read": "internal error: out-of-order read",
}
_GENERIC = ("unable to", "error in tile", "VipsImage: ", "vips_region")


def vips_reason(error: pyvips.Error, *, explain: bool = True) -> str:
    """The distinct, meaningful lines of a libvips error, plus what they mean."""
    lines: list[str] = []
    for line in f"{error.message}\n{error.detail or ''}".splitlines():
        line = line.strip()
        if line and line not in lines and not line.startswith(_GENERIC):
            lines.append(line)
    detail = "; ".join(lines[:3]) or (error.message or "libvips failed").strip()
    for needle, meaning in _EXPLAIN.items():
        if explain and needle in detail:
            return f"{meaning} ({detail})"
    return detail
