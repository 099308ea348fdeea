"""Quality: a variant encoded at the lowest quality that reaches the perceptual target (the
``auto`` quality setting), judged on decoded pixels against the resized source's."""

from __future__ import annotations

import io

import numpy
from PIL import Image

from imgwarm.config import ImageSettings
from imgwarm.formats import OUTPUTS, Format
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.quality.search import Chosen, lowest_quality
from imgwarm.quality.ssimulacra2 import Reference

WHITE = [255, 255, 255]  # what a format without alpha is flattened on (encode.py)


def auto_quality(frame: Frame, fmt: Format, settings: ImageSettings, exif: bytes | None,
                 hint: int | None, references: dict[bool, Reference]) -> Chosen:
    """The encoding of ``frame`` at the lowest quality that reaches the target. ``references``
    holds the frame's prepared originals (flattened or not) for the next format's search."""
    flat = frame.image.hasalpha() and not OUTPUTS[fmt].alpha
    if flat not in references:  # the reference is what the format can hold
        image = frame.image.flatten(background=WHITE) if flat else frame.image
        references[flat] = Reference(image)
    return lowest_quality(lambda quality: encode(frame, fmt, settings, exif, quality),
                          _decoded, references[flat], target=settings.quality_target,
                          tolerance=settings.quality_tolerance, hint=hint)


def _decoded(data: bytes) -> numpy.ndarray:
    with Image.open(io.BytesIO(data)) as picture:
        mode = "RGBA" if "A" in picture.getbands() else "RGB"
        return numpy.asarray(picture.convert(mode))
