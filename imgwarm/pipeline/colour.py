"""Colour: bring pixels to 8-bit sRGB, through the embedded ICC profile when there is one."""

from __future__ import annotations

import io
from functools import lru_cache

import pyvips
from PIL import ImageCms


@lru_cache(maxsize=64)
def profile_is_srgb(icc: bytes) -> bool:
    """True for sRGB profiles, whose transform to sRGB would only cost time."""
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc)).profile
    except (OSError, ValueError):
        return False  # unreadable profile: let libvips decide, it will fall back
    return profile.xcolor_space.strip() == "RGB" and "sRGB" in (profile.profile_description or "")


def to_srgb(image: pyvips.Image, icc: bytes | None) -> pyvips.Image:
    """Convert to sRGB. Only CMYK and non-sRGB profiles pay for a colour transform."""
    if image.interpretation == "cmyk":
        # The embedded profile when there is one, else libvips' built-in CMYK profile.
        image = image.icc_transform("srgb", embedded=True, input_profile="cmyk")
    elif icc is not None and not profile_is_srgb(icc):
        fallback = "srgb" if image.bands >= 3 else None
        image = image.icc_transform("srgb", embedded=True, **(
            {"input_profile": fallback} if fallback else {}))
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
        if image.format != "uchar":
            image = image.cast("uchar")
    return image
