"""Decode: the one pixel read of a source, shrinking on load where the format allows."""

from __future__ import annotations

import pyvips

from imgwarm.pipeline.probe import Probe

# Strict: libjpeg's warnings are where damage shows (truncation, a marker in the middle of
# the scan), and the lenient default pads the rest of the picture with grey. A file that
# fails only on a benign warning is decoded again leniently, alone, with its warnings read
# (see optimize.py). libspng's warnings are benign; its errors (CRC, truncation) are not.
STRICT = {"jpeg": "warning", "png": "error"}
LENIENT = {"jpeg": "none", "png": "error"}


def jpeg_shrink(factor: float) -> int:
    """The JPEG DCT-domain shrink for an overall downscale: the largest that still leaves at
    least the target size, the rest done by lanczos3. Like sharp's default fast shrink-on-load
    and Pillow's draft(); it halves decode time against leaving a 2x margin as vips_thumbnail
    does, and the scaled IDCT filters well enough that tests see no difference."""
    for shrink in (8, 4, 2):
        if factor >= shrink:
            return shrink
    return 1


def decode(data: bytes, probe: Probe, target_width: int, *, strict: bool = True) -> pyvips.Image:
    """A sequential image, shrunk on load towards ``target_width`` (displayed width)."""
    fail_on = (STRICT if strict else LENIENT)[probe.format]
    if probe.format == "jpeg":
        # jpegload, not the sniffed loader: for Ultra HDR files it reads the SDR base image.
        shrink = jpeg_shrink(probe.displayed_width / target_width)
        return pyvips.Image.jpegload_buffer(
            data, shrink=shrink, fail_on=fail_on, access="sequential"
        )
    return pyvips.Image.pngload_buffer(data, fail_on=fail_on, access="sequential")
