"""Placeholder: what a page shows where an image will be, before its bytes arrive.

Two facts, kept in the manifest and made from the smallest variant's pixels (upright, sRGB):

- the dominant colour (``#rrggbb``): the mean of the most common of 512 colour cells of a
  32-pixel copy, so a red bicycle on a white wall gives the wall, as the eye does;
- an LQIP: the picture at PREVIEW_SIDE pixels on its longer side as a tiny WebP data URI (at
  most MAX_URI characters), which the browser scales up smoothly as the ``<img>``'s CSS
  background: no script shows it, and the image paints over it.

Measured against ThumbHash (bench/picture.py; docs/benchmarks.md): a ThumbHash is ~25
bytes but needs a script, or a PNG rendered from it on the server (a data URI of ~1 KB), to be
seen; the WebP LQIP is seen as it is, at a quarter of that. An image with see-through pixels
gets none: its background would still show through it once loaded.
"""

from __future__ import annotations

import base64
import io

import numpy
import pyvips
from PIL import Image

from imgwarm.carried import Placeholder

PREVIEW_SIDE = 16
MAX_URI = 300
QUALITIES = (50, 30, 15, 5)  # the first whose data URI fits in MAX_URI
_CELL_BITS = 3  # 8 levels a channel: 512 colour cells
_SAMPLE_SIDE = 32


def placeholder(image: pyvips.Image) -> Placeholder:
    """The placeholder of an upright sRGB image; Placeholder.none() when it has see-through
    pixels."""
    if image.hasalpha():
        if image[image.bands - 1].min() < 255:
            return Placeholder.none()
        image = image.extract_band(0, n=image.bands - 1)
    if image.bands < 3:
        image = image.colourspace("srgb")
    image = image.cast("uchar")
    return Placeholder(color=_dominant(image), lqip=_lqip(image))


def _pixels(image: pyvips.Image) -> numpy.ndarray:
    return numpy.ndarray(buffer=image.write_to_memory(), dtype=numpy.uint8,
                         shape=(image.height * image.width, image.bands))


def _dominant(image: pyvips.Image) -> str:
    pixels = _pixels(image.thumbnail_image(_SAMPLE_SIDE, height=_SAMPLE_SIDE))[:, :3]
    cells = pixels >> (8 - _CELL_BITS)
    index = (cells[:, 0].astype(numpy.int32) << (2 * _CELL_BITS)) | \
        (cells[:, 1].astype(numpy.int32) << _CELL_BITS) | cells[:, 2]
    common = numpy.bincount(index).argmax()
    red, green, blue = (int(c + 0.5) for c in pixels[index == common].mean(axis=0))
    return f"#{red:02x}{green:02x}{blue:02x}"


def _lqip(image: pyvips.Image) -> str:
    small = image.thumbnail_image(PREVIEW_SIDE, height=PREVIEW_SIDE)
    picture = Image.frombuffer("RGB", (small.width, small.height), small.write_to_memory(),
                               "raw", "RGB", 0, 1)
    uri = ""
    for quality in QUALITIES:
        out = io.BytesIO()
        picture.save(out, "WEBP", quality=quality, method=6)
        uri = "data:image/webp;base64," + base64.b64encode(out.getvalue()).decode("ascii")
        if len(uri) <= MAX_URI:
            break
    return uri
