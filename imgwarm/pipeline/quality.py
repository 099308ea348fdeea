"""Quality: a variant encoded at the lowest quality that reaches the perceptual target (the
``auto`` quality setting), judged on decoded pixels against the resized source's.

A JPEG is searched as libvips encodes it (colour at half resolution below quality 90), and
again with full-resolution colour when the first search ends past the band at 90: small
variants of colourful photos cannot reach the target with half-resolution colour, and the
jump to full colour at 90 overshoots it.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy
from PIL import Image

from imgwarm.formats import OUTPUTS, Format
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.quality.search import Chosen, lowest_quality
from imgwarm.quality.ssimulacra2 import Reference

if TYPE_CHECKING:  # (a worker gets ImageOptions, the same names: imageoptions.py)
    from imgwarm.config import ImageSettings

WHITE = [255, 255, 255]  # what a format without alpha is flattened on (encode.py)
FULL_CHROMA = 90  # libvips' JPEG keeps colour at full resolution from this quality up
FULL_CHROMA_START = 5  # the full-colour search starts this far below (measured: 4-10)


def auto_quality(frame: Frame, fmt: Format, settings: ImageSettings, exif: bytes | None,
                 hint: int | None, references: dict[bool, Reference]) -> tuple[Chosen, bool]:
    """The encoding of ``frame`` at the lowest quality that reaches the target, and whether
    it is a JPEG with its colour kept at full resolution below quality 90. ``references``
    holds the frame's prepared originals (flattened or not) for the next format's search."""
    flat = frame.image.hasalpha() and not OUTPUTS[fmt].alpha
    if flat not in references:  # the reference is what the format can hold
        image = frame.image.flatten(background=WHITE) if flat else frame.image
        references[flat] = Reference(image)
    target, tolerance = settings.quality_target, settings.quality_tolerance

    def search(full_chroma: bool, start: int | None) -> Chosen:
        return lowest_quality(
            lambda quality: encode(frame, fmt, settings, exif, quality, full_chroma=full_chroma),
            _decoded, references[flat], target=target, tolerance=tolerance, hint=start)

    chosen = search(False, hint)
    if fmt != "jpeg" or chosen.quality != FULL_CHROMA or chosen.score <= target + tolerance \
            or frame.hdr is not None:
        return chosen, False
    # Half-resolution colour did not reach the target below 90 (89 was tried), and at 90 (full
    # colour) the score jumps past the band (5-10 points on colourful detail at small
    # widths): the lowest full-colour quality lands in it, in fewer bytes. (Past 90, the
    # quality below was full colour already and fell short; libvips writes a JPEG with a
    # gain map at half-resolution colour whatever it is asked.)
    full = search(True, chosen.quality - FULL_CHROMA_START)
    tries = chosen.tries + full.tries
    if full.quality >= FULL_CHROMA or full.score < target:  # the same file as chosen's
        return Chosen(chosen.data, chosen.quality, chosen.score, tries), False
    return Chosen(full.data, full.quality, full.score, tries), True


def _decoded(data: bytes) -> numpy.ndarray:
    with Image.open(io.BytesIO(data)) as picture:
        mode = "RGBA" if "A" in picture.getbands() else "RGB"
        return numpy.asarray(picture.convert(mode))
