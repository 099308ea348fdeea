"""Colour: bring pixels to 8-bit sRGB, through the embedded ICC profile when there is a usable one.

A profile is untrusted input like the rest of the file. One whose header is damaged (a colour
space that is not one, a connection space LittleCMS cannot use) is converted as if absent:
RGB as sRGB, CMYK through libvips' built-in CMYK profile; the manifest says so. The pixels
are fine, so the picture is not refused for it.
"""

from __future__ import annotations

import io
from functools import lru_cache

import pyvips
from PIL import ImageCms

# The ICC colour space an image of so many bands needs (with or without alpha).
_SPACES = {1: "GRAY", 2: "GRAY", 3: "RGB", 4: "RGB"}


def _space(icc: bytes) -> str:
    return icc[16:20].decode("latin-1").strip()


@lru_cache(maxsize=64)
def profile_problem(icc: bytes, interpretation: str, bands: int, fmt: str) -> str | None:
    """Why the embedded profile cannot be used for an image of this kind; None when it can.
    The last word is libvips' own: a one-pixel transform through it, as ``to_srgb`` does."""
    try:
        ImageCms.ImageCmsProfile(io.BytesIO(icc))
    except Exception:  # PyCMSError, OSError, ValueError... on junk
        return "unreadable"
    space = _space(icc)
    wanted = "CMYK" if interpretation == "cmyk" else _SPACES.get(bands, "RGB")
    if space != wanted:
        return f"made for {space.encode('ascii', 'backslashreplace').decode() or 'no'} colour "\
               f"space, the image is {wanted}"
    sample = pyvips.Image.black(1, 1, bands=bands).cast(fmt)
    sample = sample.copy(interpretation=interpretation)
    sample.set_type(pyvips.GValue.blob_type, "icc-profile-data", icc)
    try:
        _convert(sample, usable=True).avg()
    except pyvips.Error as error:
        return (error.detail or "LittleCMS cannot use it").strip().splitlines()[-1]
    return None


@lru_cache(maxsize=64)
def profile_is_srgb(icc: bytes) -> bool:
    """True for sRGB profiles, whose transform to sRGB would only cost time."""
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc)).profile
        return _space(icc) == "RGB" and "sRGB" in (profile.profile_description or "")
    except Exception:
        return False


def _convert(image: pyvips.Image, *, usable: bool) -> pyvips.Image:
    if image.interpretation == "cmyk":
        # The embedded profile when usable, else libvips' built-in CMYK profile.
        return image.icc_transform("srgb", embedded=usable, input_profile="cmyk")
    fallback = {"input_profile": "srgb"} if image.bands >= 3 else {}
    return image.icc_transform("srgb", embedded=usable, **fallback)


def to_srgb(image: pyvips.Image, icc: bytes | None) -> pyvips.Image:
    """Convert to sRGB through ``icc`` (a usable profile, see ``profile_problem``; None when
    there is none). Only CMYK and non-sRGB profiles pay for a colour transform."""
    if image.interpretation == "cmyk" or (icc is not None and not profile_is_srgb(icc)):
        image = _convert(image, usable=icc is not None)
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
        if image.format != "uchar":
            image = image.cast("uchar")
    return image
