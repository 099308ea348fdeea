"""What making a source yields: its named files and facts, as plain data (no pyvips), so that
it can come back from the process that made it (pipeline/isolate.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from imgwarm.formats import Format

if TYPE_CHECKING:
    from imgwarm.carried import Credits, Placeholder


@dataclass(frozen=True)
class Encoded:
    """One output file, named by its own hash."""

    format: Format
    width: int
    height: int
    name: str
    data: bytes
    quality: int
    score: float | None = None  # SSIMULACRA2 against the resized source (auto quality only)
    hdr: bool = False  # carries the source's gain map (Ultra HDR: pipeline/gainmap.py)
    predicted: bool = False  # auto quality taken from a narrower width's, not checked
    full_chroma: bool = False  # a JPEG with full-resolution colour below quality 90 (auto)


@dataclass(frozen=True)
class Made:
    width: int  # the source as displayed (after orientation)
    height: int
    credits: Credits  # as written: the given ones over the source's
    files: list[Encoded]
    warnings: list[str]  # what was done in place of the usual, in words
    placeholder: Placeholder | None
