"""Resize: exact sizes; transparent pixels do not bleed into opaque ones."""

from __future__ import annotations

import pyvips

from imgwarm.pipeline.resize import fit


def test_exact_size() -> None:
    image = pyvips.Image.black(1000, 750, bands=3).cast("uchar")
    out = fit(image, 333, 250)
    assert (out.width, out.height) == (333, 250)
    assert fit(image, 1000, 750) is image


def test_alpha_edges_take_the_opaque_colour() -> None:
    transparent_red = pyvips.Image.black(100, 100).new_from_image([255, 0, 0, 0])
    opaque_blue = pyvips.Image.black(100, 100).new_from_image([0, 0, 255, 255])
    image = transparent_red.join(opaque_blue, "horizontal").cast("uchar").copy(
        interpretation="srgb")
    out = fit(image, 50, 25)
    assert out.format == "uchar" and out.bands == 4
    visible = out.extract_band(3) > 0
    red_where_visible = (out.extract_band(0) * (visible / 255)).max()
    assert red_where_visible < 40  # without premultiplying, the edge turns purple
