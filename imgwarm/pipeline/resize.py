"""Resize: scale an image to an exact size with a good downsampling filter."""

from __future__ import annotations

import pyvips


def fit(image: pyvips.Image, width: int, height: int) -> pyvips.Image:
    """Scale to exactly width x height (never called to upscale); no-op when already there."""
    if (image.width, image.height) == (width, height):
        return image
    scale = {"vscale": height / image.height, "kernel": "lanczos3"}
    if image.hasalpha():
        # Premultiplied, so the colour of transparent pixels does not bleed into edges.
        resized = image.premultiply().resize(width / image.width, **scale)
        return resized.unpremultiply().cast(image.format)
    return image.resize(width / image.width, **scale)
